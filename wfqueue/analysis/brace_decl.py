"""What the curly-brace languages' line classifiers report (wfqueue.analysis.brace_langs drives them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

# What a declaration's body holds: "members" (methods of a type), "namespace"
# (more top-level-like declarations), "object" (an exported JS object literal's
# entries) or None (nothing we extract).
BodyKind = str | None


class Decl(NamedTuple):
    """A declaration found on a line, before its extent is known."""

    name: str
    kind: str  # a Symbol kind, or "container" for impl/mod/namespace blocks
    column: int
    body: BodyKind = None
    qualname: str | None = None  # overrides prefix.name (Go receivers, Rust impls)


Classifier = Callable[[str, str, str], list[Decl]]

NAME = r"[A-Za-z_$][\w$]*"
# Words before "(" in statements and calls (`if (`, `return (`): never the name a declaration gives.
KEYWORDS = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "function", "with", "super", "new", "typeof"}
)
# Words a statement may start with where a method's declaration has its return type (`return x(` declares
# nothing).
NOT_TYPES = frozenset({"return", "new", "throw", "else", "case", "yield", "await"})


def first_match(line: str, rules: list[tuple[re.Pattern[str], str, BodyKind]]) -> list[Decl]:
    """The first rule that matches wins: rules are ordered most specific first."""
    for pattern, kind, body in rules:
        match = pattern.match(line)
        if match:
            return [Decl(match.group(1), kind, match.start(1), body)]
    return []
