"""Text put into the Markdown files wfqueue writes. Pure."""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL and C1 controls: a terminal acts on them (ESC starts a colour, a title change,
# a cursor move), so a model's title holding them ran them on every `cat TODO_LIST.md`. And the bidirectional
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): text after one shows reversed, so a title or
# a path read by a reviewer says something other than what it holds.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def table_cell(text: object) -> str:
    """``text`` as one cell of a Markdown table: on one line, its pipes escaped (a requirement such as
    `tag:a|tag:b`, a model's title, an error message would otherwise end the cell and shift the row)."""
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def inline_code(text: str) -> str:
    """``text`` as one Markdown code span, on one line: fenced with one backtick more than its longest run of them.
    A model's verification command holding a backtick ended the span, and one holding a line break and a fence
    (```` ``` ````) turned the rest of plan.md into a code block."""
    one = " ".join(text.split())
    if not one:
        return "(none)"  # an empty span is no code span in Markdown: its backticks would show
    fence = "`" * (max((len(run) for run in re.findall(r"`+", one)), default=0) + 1)
    pad = " " if one.startswith("`") or one.endswith("`") else ""
    return f"{fence}{pad}{one}{pad}{fence}"


def printable(value: Any) -> Any:
    """``value`` (a string, or JSON-like lists and dicts of them) with the characters a terminal acts on, and those
    that reverse how text reads, replaced by U+FFFD: text from a model goes into files people read with `cat`, and
    onto the terminal. A carriage return (a progress bar's, or one hiding the start of a line) becomes a line
    break."""
    if isinstance(value, str):
        return _CONTROLS.sub("\ufffd", value.replace("\r\n", "\n").replace("\r", "\n"))
    if isinstance(value, list):
        return [printable(item) for item in value]
    if isinstance(value, dict):
        return {printable(key): printable(item) for key, item in value.items()}
    return value
