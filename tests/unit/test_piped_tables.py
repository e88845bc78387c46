"""Tables printed where no person reads them (a pipe, a file, a CI log), which rich takes for 80 columns.

`wfqueue status | cat` showed its session list as `│ completed │  │ … │  │ … │  │`: the session id and status, kept
whole, took the width, and agents, tasks, conflicts, tokens and cost were squeezed to nothing; `wfqueue sessions
| cat` cut the status to `act…`.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from wfqueue.cli.plan_common import keep_whole, print_table

HEADERS = ("session", "status", "agents", "tasks", "conflicts", "tokens", "est. cost")
ROW = ("CPLAN-add-audit-logging-of-note-changes-2026-11-26", "conflicts_detected", "3", "14", "2", "123,456",
       "no LLM calls")


def listing() -> Table:
    table = Table(*HEADERS, title="/home/someone/projects/notes/.workflow/.planning")
    keep_whole(table, "session", "status")
    table.add_row(*ROW)
    return table


def test_a_piped_table_keeps_every_header_and_cell_whole_on_one_line() -> None:
    sink = io.StringIO()
    print_table(Console(file=sink, width=80), listing())
    lines = sink.getvalue().splitlines()
    header = next(line for line in lines if "session" in line)
    row = next(line for line in lines if "CPLAN-" in line)
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == list(HEADERS)
    assert [cell.strip() for cell in row.strip("│").split("│")] == list(ROW)
    assert "…" not in sink.getvalue()


def test_a_table_that_fits_is_printed_as_before() -> None:
    wide, narrow = io.StringIO(), io.StringIO()
    small = Table("id", "state")
    small.add_row("IMPL-1", "done")
    print_table(Console(file=wide, width=80), small)
    Console(file=narrow, width=80).print(small)
    assert wide.getvalue() == narrow.getvalue()
