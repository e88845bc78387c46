"""Parsing Python once, shared by symbol and import extraction."""

from __future__ import annotations

import ast
from collections.abc import Iterator

# Statements that contain other statements; everything else is a leaf here.
_COMPOUND: tuple[type[ast.stmt], ...] = tuple(
    node
    for node in (
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.If,
        ast.For,
        ast.AsyncFor,
        ast.While,
        ast.With,
        ast.AsyncWith,
        ast.Try,
        getattr(ast, "TryStar", None),
        ast.Match,
    )
    if node is not None
)


def parse_python(text: str) -> ast.Module | None:
    """The module's AST, or None when it does not parse (caller falls back)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        # ValueError: NUL bytes; RecursionError: pathologically deep nesting.
        return None


def _children(node: ast.stmt) -> list[ast.stmt]:
    nested: list[ast.stmt] = []
    for field in ("body", "orelse", "finalbody"):
        nested += getattr(node, field, None) or []
    for holder in getattr(node, "handlers", None) or getattr(node, "cases", None) or []:
        nested += holder.body
    return nested


def iter_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, however nested, in source order, skipping expressions.

    Much cheaper than ``ast.walk`` when only statements (imports) matter,
    because expression nodes are the bulk of a tree.
    """
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _COMPOUND):
            stack.extend(reversed(_children(node)))
