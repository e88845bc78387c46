"""docs/BENCHMARKS.md, as the bench scripts update it: each owns a section between two markers; and what
the scripts read from a worker's log."""

from __future__ import annotations

from datetime import datetime
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


def ready_logged_at(log: Path) -> float:
    """The wall-clock time of the worker's ``ready.`` log line (its log stamps milliseconds, local time)."""
    for line in log.read_text(errors="replace").splitlines():
        if line.endswith(" ready."):
            stamp = line[1:24]  # [2026-11-23 20:46:54,159: ...
            return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return float("nan")
