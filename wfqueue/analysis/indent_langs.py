"""Regex symbol extraction for indentation-structured languages.

Used for Ruby, and for Python files that ``ast`` cannot parse (work in
progress, syntax from a newer Python).  Containers are tracked with an
indentation stack; a block ends where indentation returns to the header's.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from wfqueue.analysis.scan import indent_of, indented_block_end
from wfqueue.analysis.symbol_model import Symbol, SymbolKind

_PY_CLASS = re.compile(r"^\s*class\s+([A-Za-z_]\w*)")
_PY_DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)")
_PY_CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]+)\s*(?::[^=]+)?=(?!=)")

_RB_CONTAINER = re.compile(r"^\s*(?:class|module)\s+((?:[A-Z]\w*::)*[A-Z]\w*)")
_RB_DEF = re.compile(r"^\s*def\s+(?:self\.)?([A-Za-z_]\w*[?!=]?)")
_RB_CONSTANT = re.compile(r"^\s*([A-Z][A-Z0-9_]+)\s*=(?!=)")
# `def x; end` / `def x = expr`: the whole definition is on one line.
_RB_ONE_LINE = re.compile(r"\bend\s*$|^\s*def\s+[\w.?!]+(?:\([^)]*\))?\s*=[^=~]")


class _Open(NamedTuple):
    indent: int
    qualname: str
    is_class: bool


def _enclosing(stack: list[_Open], indent: int) -> _Open | None:
    """Pop blocks the current line has dedented out of; return the innermost."""
    while stack and stack[-1].indent >= indent:
        stack.pop()
    return stack[-1] if stack else None


def python_regex_symbols(text: str) -> list[Symbol]:
    """Best-effort Python symbols without a parser (same shape as the ast path).

    Functions nested in functions are skipped, as in ``python_symbols``.
    """
    lines = text.splitlines()
    stack: list[_Open] = []
    symbols: list[Symbol] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = indent_of(line)
        outer = _enclosing(stack, indent)
        constant = _PY_CONSTANT.match(line)
        if constant and outer is None:
            symbols.append(
                Symbol(
                    name=constant.group(1),
                    qualname=constant.group(1),
                    kind="constant",
                    line=index + 1,
                    end_line=index + 1,
                )
            )
            continue
        match = _PY_CLASS.match(line) or _PY_DEF.match(line)
        if not match:
            continue
        is_class = match.re is _PY_CLASS
        if outer is not None and not outer.is_class:
            stack.append(_Open(indent, f"{outer.qualname}.{match.group(1)}", is_class))
            continue  # local definition inside a function body
        name = match.group(1)
        qualname = f"{outer.qualname}.{name}" if outer else name
        kind: SymbolKind = "class" if is_class else ("method" if outer else "function")
        end = indented_block_end(lines, index)
        symbols.append(Symbol(name=name, qualname=qualname, kind=kind, line=index + 1, end_line=end + 1))
        stack.append(_Open(indent, qualname, is_class))
    return symbols


def ruby_symbols(text: str) -> list[Symbol]:
    """Ruby classes/modules (as "class"), methods, functions and constants."""
    lines = text.splitlines()
    stack: list[_Open] = []
    symbols: list[Symbol] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = indent_of(line)
        outer = _enclosing(stack, indent)
        prefix = f"{outer.qualname}." if outer else ""
        container = _RB_CONTAINER.match(line)
        definition = _RB_DEF.match(line)
        constant = _RB_CONSTANT.match(line)
        kind: SymbolKind
        if container:
            name = container.group(1).split("::")[-1]
            kind = "class"
        elif definition:
            name = definition.group(1)
            kind = "method" if outer and outer.is_class else "function"
        elif constant and (outer is None or outer.is_class):
            symbols.append(
                Symbol(
                    name=constant.group(1),
                    qualname=prefix + constant.group(1),
                    kind="constant",
                    line=index + 1,
                    end_line=index + 1,
                )
            )
            continue
        else:
            continue
        if outer is not None and not outer.is_class:
            continue  # a def nested in a method body
        one_line = kind != "class" and bool(_RB_ONE_LINE.search(stripped))
        end = index if one_line else indented_block_end(lines, index, closer="end")
        symbols.append(Symbol(name=name, qualname=prefix + name, kind=kind, line=index + 1, end_line=end + 1))
        if not one_line:
            stack.append(_Open(indent, prefix + name, kind == "class"))
    return symbols
