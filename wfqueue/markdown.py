"""Text put into the Markdown files wfqueue writes. Pure."""

from __future__ import annotations


def table_cell(text: object) -> str:
    """``text`` as one cell of a Markdown table: on one line, its pipes escaped (a requirement such as
    `tag:a|tag:b`, a model's title, an error message would otherwise end the cell and shift the row)."""
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")
