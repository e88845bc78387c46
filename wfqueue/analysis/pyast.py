"""Parsing Python once, shared by symbol and import extraction."""

from __future__ import annotations

import ast
from collections.abc import Iterator


def parse_python(text: str) -> ast.Module | None:
    """The module's AST, or None when it does not parse (caller falls back)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        # ValueError: NUL bytes; RecursionError: pathologically deep nesting.
        return None


def iter_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, however nested, without visiting expressions.

    Much cheaper than ``ast.walk`` when only statements (imports) matter,
    because expression nodes are the bulk of a tree.
    """
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        nested: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list):
                nested += value
        for holder in getattr(node, "handlers", None) or getattr(node, "cases", None) or []:
            nested += holder.body
        stack.extend(reversed(nested))
