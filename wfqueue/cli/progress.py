"""Terminal UI of plan commands: messages, questions, confirmations, live agent progress.

Everything goes to stderr, so `--json` leaves stdout to the one JSON object.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.prompt import IntPrompt, Prompt
from rich.table import Table

from wfqueue.collab.coordinator import SplitDecision
from wfqueue.collab.models import RequirementAnalysis
from wfqueue.keys import AgentState
from wfqueue.lite.coordinator import PlanDecision
from wfqueue.lite.models import Assessment, LitePlanDraft
from wfqueue.lite.synthesis import MergedQuestion
from wfqueue.workflow_session.coordinator import GateChoice
from wfqueue.workflow_session.models import SessionConflict

Choice = TypeVar("Choice", bound=str)


def ask_choice(console: Console, text: str, choices: Sequence[Choice], default: Choice) -> Choice:
    """``Prompt.ask`` limited to ``choices``, typed as one of them (rich asks again until one is given)."""
    answer = Prompt.ask(text, choices=list(choices), default=default, console=console)
    return next(c for c in choices if c == answer)


_STYLE = {AgentState.QUEUED: "yellow", AgentState.RUNNING: "cyan", AgentState.DONE: "green",
          AgentState.FAILED: "bold red"}


class TerminalUI:
    def __init__(self, quiet: bool = False) -> None:
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.live: Live | None = None
        self.seen: dict[str, tuple[str, str | None]] = {}

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]wfqueue:[/] {escape(message)}")

    def note(self, what: str, text: str) -> None:
        """What a step waits for (a model call sent again later), as its worker says it."""
        self.info(f"{what}: {text}")

    def interactive(self, what: str) -> bool:
        """Whether a person can answer a question; if not, says that ``what`` happens without one."""
        if sys.stdin.isatty():
            return True
        self.console.print(f"stdin is not a terminal: {escape(what)} (-y skips this check)")
        return False

    def confirm_split(self, analysis: RequirementAnalysis, most: int) -> SplitDecision:
        if not self.interactive("starting the plan without confirmation"):
            return "start"
        table = Table("#", "area", "task ids", "description", title=f"{len(analysis.sub_domains)} sub-domains")
        for n, sub in enumerate(analysis.sub_domains, start=1):
            first, last = sub.task_id_range
            table.add_row(str(n), escape(sub.focus_area), f"TASK-{first:03d}..{last:03d}", escape(sub.description))
        self.console.print(table)
        choice: Literal["start", "adjust", "cancel"] = ask_choice(self.console, "start, adjust or cancel",
                                                                 ("start", "adjust", "cancel"), "start")
        if choice == "adjust":
            while True:  # asked again until it is in range: a silently changed number is not what was asked for
                wanted = IntPrompt.ask(f"split into how many sub-domains (2-{most})", console=self.console, default=2)
                if 2 <= wanted <= most:
                    return wanted
                self.console.print(f"[prompt.invalid]between 2 and {most} (--max-agents), please")
        return choice

    def _table(self, agents: dict[str, dict[str, Any]]) -> Table:
        table = Table("agent", "state", "worker", "attempts", "time")
        now = time.time()
        for area, record in agents.items():
            state = record.get("state", AgentState.QUEUED)
            # A queued agent runs nowhere: a retried one's record still holds its last run's worker and start, which
            # showed as a worker still on it and a time still growing.
            queued = state == AgentState.QUEUED
            started, finished = record.get("started_at"), record.get("finished_at")
            elapsed = f"{(finished or now) - started:.1f}s" if started and not queued else ""
            said = record.get("note") or (record.get("error") if queued else None)  # a retry says when
            note = f" [dim]{escape(str(said))}[/]" if said else ""
            table.add_row(escape(area), f"[{_STYLE.get(state, '')}]{state}[/]{note}",
                          "" if queued else escape(str(record.get("worker") or "")), str(record.get("attempts") or ""),
                          elapsed)
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
        for area, record in agents.items():  # no terminal: one line per change of state or of note
            state, note = record.get("state", AgentState.QUEUED), record.get("note")
            before = self.seen.get(area)
            self.seen[area] = (state, note)
            if before == (state, note) or (before is not None and before[0] == state and note is None):
                continue  # unchanged, or only a wait that ended: the next state says more
            error = record.get("error") or ""
            shown = error if state == AgentState.FAILED or (state == AgentState.QUEUED and
                                                             error.startswith("retrying")) else note
            self.console.print(f"wfqueue: agent {area}: {state}" + (f" ({shown})" if shown else ""),
                               markup=False)

    def done(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    # -- lite plan ------------------------------------------------------------------------

    def show_assessment(self, assessment: Assessment) -> None:
        table = Table("dimension", "assessment", title=f"complexity: {assessment.complexity}")
        for name in ("scope", "depth", "risk", "dependencies"):
            table.add_row(name, escape(str(getattr(assessment, name))))
        self.console.print(table)
        if assessment.needs_exploration:
            self.console.print(escape(f"exploring {len(assessment.angles)} angle(s) in parallel ({assessment.preset} "
                                      f"preset): {', '.join(assessment.angles)} — because "
                                      f"{'; '.join(assessment.exploration_reasons)}"))
        else:
            self.console.print("no exploration needed: planning straight from the repository index")

    def ask(self, batch: list[MergedQuestion], number: int, total: int) -> list[str]:
        if not self.interactive(f"{len(batch)} clarification question(s) left unanswered"):
            return ["" for _ in batch]
        self.console.print(f"[bold]clarification round {number}/{total}[/]")
        answers = []
        for question in batch:
            options = f" (options: {' / '.join(question.options)})" if question.options else ""
            # Prompt reads its text as markup: the angles' brackets and the model's words are escaped.
            answers.append(Prompt.ask(escape(f"[{', '.join(question.angles)}] {question.question}{options}"),
                                      default="", console=self.console))
        return answers

    def confirm_plan(self, tasks_path: Path, draft: LitePlanDraft) -> PlanDecision:
        table = Table("id", "title", "type", "effort", "depends on",
                      title=escape(f"{len(draft.tasks)} tasks: {tasks_path}"))
        for task in draft.tasks:
            table.add_row(escape(task.id), escape(task.title), escape(task.type or "-"), escape(task.effort or "-"),
                          escape(", ".join(task.depends_on) or "-"))
        self.console.print(table)
        if not self.interactive("accepting the plan"):
            return "allow"
        return ask_choice(self.console, "allow, modify or cancel", ("allow", "modify", "cancel"), "allow")

    def edit_tasks(self, tasks_path: Path, problems: list[str]) -> None:
        for problem in problems:
            self.console.print(f"[red]problem[/]: {escape(problem)}")
        variable = "VISUAL" if os.environ.get("VISUAL") else "EDITOR"
        editor = os.environ.get(variable)
        if editor:
            try:
                subprocess.run([*shlex.split(editor), str(tasks_path)], check=False)
                return
            except (OSError, ValueError) as exc:  # not installed, not executable, or unbalanced quotes
                self.console.print(escape(f"could not run ${variable} ({editor}): {exc}; edit the file yourself"),
                                   soft_wrap=True)
        Prompt.ask(escape(f"edit {tasks_path}, then press Enter"), default="", console=self.console)

    # -- workflow plan ----------------------------------------------------------------------

    def choose_strategy(self, conflict: SessionConflict) -> int:
        table = Table("#", "strategy", "approach", "complexity", "risk",
                      title=escape(f"{conflict.id} [{conflict.category}, {conflict.severity}] {conflict.title}"))
        for n, strategy in enumerate(conflict.strategies, start=1):
            mark = " (recommended)" if n - 1 == conflict.recommended else ""
            table.add_row(str(n), escape(strategy.name + mark), escape(strategy.approach), escape(strategy.complexity),
                          escape(strategy.risk))
        self.console.print(table)
        if not self.interactive(f"taking the recommended strategy for {conflict.id}"):
            return conflict.recommended
        choice = IntPrompt.ask("strategy", default=conflict.recommended + 1, console=self.console,
                               choices=[str(n) for n in range(1, len(conflict.strategies) + 1)])
        return choice - 1

    def gate(self) -> GateChoice:
        if not self.interactive("verifying the plan"):
            return "verify"
        return ask_choice(self.console, "next: verify (recommended), status, or stop", ("verify", "status", "stop"),
                          "verify")
