"""Text put into the Markdown files wfqueue writes. Pure."""

from __future__ import annotations

import re
from typing import Any

# C0 controls but tab and newline, DEL and C1 controls: a terminal acts on them (ESC starts a colour, a title change,
# a cursor move), so a model's title holding them ran them on every `cat TODO_LIST.md`.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def table_cell(text: object) -> str:
    """``text`` as one cell of a Markdown table: on one line, its pipes escaped (a requirement such as
    `tag:a|tag:b`, a model's title, an error message would otherwise end the cell and shift the row)."""
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def printable(value: Any) -> Any:
    """``value`` (a string, or JSON-like lists and dicts of them) with the characters a terminal acts on replaced
    by U+FFFD: text from a model goes into files people read with `cat`, and onto the terminal. A carriage return
    (a progress bar's, or one hiding the start of a line) becomes a line break."""
    if isinstance(value, str):
        return _CONTROLS.sub("\ufffd", value.replace("\r\n", "\n").replace("\r", "\n"))
    if isinstance(value, list):
        return [printable(item) for item in value]
    if isinstance(value, dict):
        return {printable(key): printable(item) for key, item in value.items()}
    return value
