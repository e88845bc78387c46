"""Terminal UI of plan commands: messages, split confirmation, live agent progress.

Everything goes to stderr, so `--json` leaves stdout to the one JSON object.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.prompt import IntPrompt, Prompt
from rich.table import Table

from wfqueue.collab.coordinator import SplitDecision
from wfqueue.collab.models import RequirementAnalysis

_STYLE = {"queued": "yellow", "running": "cyan", "done": "green", "failed": "bold red"}


class TerminalUI:
    def __init__(self, quiet: bool = False) -> None:
        self.console = Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.live: Live | None = None
        self.seen: dict[str, str] = {}

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]wfqueue:[/] {message}")

    def confirm_split(self, analysis: RequirementAnalysis) -> SplitDecision:
        if not sys.stdin.isatty():
            self.console.print("stdin is not a terminal: starting the plan without confirmation (-y skips this check)")
            return "start"
        table = Table("#", "area", "task ids", "description", title=f"{len(analysis.sub_domains)} sub-domains")
        for n, sub in enumerate(analysis.sub_domains, start=1):
            first, last = sub.task_id_range
            table.add_row(str(n), sub.focus_area, f"TASK-{first:03d}..{last:03d}", sub.description)
        self.console.print(table)
        choice = Prompt.ask("start, adjust or cancel", choices=["start", "adjust", "cancel"], default="start",
                            console=self.console)
        if choice == "adjust":
            return IntPrompt.ask("split into how many sub-domains (2-100)", console=self.console, default=2)
        return choice  # type: ignore[return-value]

    def _table(self, agents: dict[str, dict[str, Any]]) -> Table:
        table = Table("agent", "state", "worker", "attempts", "time")
        now = time.time()
        for area, record in agents.items():
            state = record.get("state", "queued")
            started, finished = record.get("started_at"), record.get("finished_at")
            elapsed = f"{(finished or now) - started:.1f}s" if started else ""
            table.add_row(area, f"[{_STYLE.get(state, '')}]{state}[/]", str(record.get("worker") or ""),
                          str(record.get("attempts") or ""), elapsed)
        return table

    def progress(self, agents: dict[str, dict[str, Any]]) -> None:
        if self.quiet:
            return
        if self.console.is_terminal:
            if self.live is None:
                self.live = Live(self._table(agents), console=self.console, refresh_per_second=8, transient=False)
                self.live.start()
            else:
                self.live.update(self._table(agents))
            return
        for area, record in agents.items():  # no terminal: one line per state change
            state = record.get("state", "queued")
            if self.seen.get(area) != state:
                self.seen[area] = state
                detail = f" ({record['error']})" if state == "failed" and record.get("error") else ""
                self.console.print(f"wfqueue: agent {area}: {state}{detail}")

    def done(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
