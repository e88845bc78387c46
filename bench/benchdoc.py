"""docs/BENCHMARKS.md, as the bench scripts update it: each owns a section between two markers."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"


def write_section(begin: str, end: str, table: str, intro: str) -> None:
    """Put ``table`` (which starts with ``begin`` and ends with ``end``) where the markers stand; on the first
    run, append ``intro`` and the table at the end of the file."""
    text = BENCHMARKS.read_text(encoding="utf-8")
    if begin in text and end in text:
        text = text[: text.index(begin)] + table + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n" + intro + "\n" + table + "\n"
    BENCHMARKS.write_text(text, encoding="utf-8")
