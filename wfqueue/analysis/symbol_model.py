"""The Symbol model, kept apart so the extractors can share it without cycles."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

SymbolKind = Literal["class", "function", "method", "constant"]


class Symbol(BaseModel):
    """A named definition in a source file."""

    name: str
    qualname: str  # dotted container path, e.g. "RateLimiter.acquire"
    kind: SymbolKind
    line: int  # 1-based line of the definition keyword (not its decorators)
    end_line: int  # 1-based, inclusive; best effort for regex extractors
    doc: str = ""  # first line of the docstring, when the language has them


def first_doc_line(doc: str | None) -> str:
    """First non-blank line of a docstring, stripped."""
    for line in (doc or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
