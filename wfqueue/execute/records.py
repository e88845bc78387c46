"""What an execution records: its state (``execution.json``), the report (``execution.md``) and the event log.

``execution.json`` is the execution's own state, rewritten after every change, and what ``--continue``,
``wfqueue resume`` and ``wfqueue status EXEC-ID`` read. ``execution-events.md`` only grows: one line per event.
``execution.md`` is rendered from the state by :func:`render_report` (pure).
"""

from __future__ import annotations

import shlex
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from wfqueue.errors import BadInputError
from wfqueue.execute.merge import integration_branch
from wfqueue.execute.model import PlanKind
from wfqueue.fsio import atomic_write_text
from wfqueue.markdown import table_cell as _cell

STATE_FILE = "execution.json"
REPORT_FILE = "execution.md"
EVENTS_FILE = "execution-events.md"

# pending: not sent yet; running: sent (its attempt and base are recorded); conflict: its merge failed and it runs
# again on the new head; completed: merged into the integration branch. The rest are final.
TaskState = Literal["pending", "running", "conflict", "completed", "failed", "skipped", "blocked", "rejected"]
FINAL_STATES: frozenset[str] = frozenset({"completed", "failed", "skipped", "blocked", "rejected"})
IN_FLIGHT: frozenset[str] = frozenset({"running", "conflict"})  # sent to a worker, not merged yet
# running: tasks in flight; stopped: a red gate stopped it before the next wave (``--continue`` after a fix);
# interrupted: its coordinator stopped (Ctrl-C, a lost broker); then completed or partial.
ExecutionStatus = Literal["running", "stopped", "interrupted", "completed", "partial"]


class TaskRecord(BaseModel):
    id: str
    title: str = ""
    wave: int
    state: TaskState = "pending"
    attempt: int = 0  # the attempt last sent (0: never)
    base: str | None = None  # the integration head that attempt started at
    commit: str | None = None  # the task's own commit
    merge: str | None = None  # its merge commit on the integration branch
    reason: str | None = None  # why it failed, was skipped, blocked or rejected
    rejected_files: list[str] = Field(default_factory=list)
    unnamed_tests: list[str] = Field(default_factory=list)  # test files it added that its task does not name
    files_changed: list[str] = Field(default_factory=list)
    worker: str = ""
    log: str | None = None  # relative to the execution folder
    started_at: float | None = None
    finished_at: float | None = None
    # What the running task waits for (a retry-after), from its agent record as `wfqueue status` reads it: never
    # written to execution.json, whose writer does not follow it.
    note: str | None = Field(default=None, exclude=True)


class GateRun(BaseModel):
    wave: int
    passed: bool
    commands: list[str]
    failed_command: str | None = None
    output: str = ""  # the failing command's output tail
    at: float
    head: str | None = None  # the integration branch's commit it checked


class Execution(BaseModel):
    exec_id: str
    exec_dir: str
    repo: str
    source: str  # what the plan was read from: passed to load_plan again on --continue
    plan_kind: PlanKind
    plan_session: str
    branch: str  # the integration branch
    base: str  # the user's HEAD when the execution started
    executor: Literal["claude", "command"]
    parallel: int | None
    waves: list[list[str]]
    critical_path: list[str] = Field(default_factory=list)
    tasks: dict[str, TaskRecord]
    gates: list[GateRun] = Field(default_factory=list)
    status: ExecutionStatus = "running"
    stopped_wave: int | None = None  # the wave whose gate was red
    # Waves whose merges a green gate has checked. A wave with merges that is not here is gated before the next
    # wave runs, also on --continue after the command stopped between the wave's last merge and its gate.
    gated_waves: list[int] = Field(default_factory=list)
    # Changes to the user's checkout while the execution ran: by the user, or by an agent writing outside its
    # worktree (the command executor has no sandbox). Execution never makes them; it reports them.
    checkout_changes: list[str] = Field(default_factory=list)
    # Task worktrees left holding the uncommitted work of an attempt that did not complete (named once, when
    # first kept: a continued run ended by naming them all again).
    kept_worktrees: list[str] = Field(default_factory=list)
    untested: bool = False  # started with --no-gate: no gate ran after its waves; its merges are untested
    branch_lost: bool = False  # its integration branch was deleted while it ran: it cannot go on
    usage: str | None = None  # the claude executor's model calls, tokens and estimated cost (metering.usage_line)
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None

    def in_state(self, *states: str) -> list[str]:
        return [t for t in self.tasks if self.tasks[t].state in states]

    def counts(self) -> dict[str, list[str]]:
        """The task ids by outcome, as ``--json`` prints them: rejected counts as failed and is also listed on its
        own; ``pending`` is what has not run (yet), such as the tasks after a red gate, which no list named."""
        return {"completed": self.in_state("completed"), "failed": self.in_state("failed", "rejected"),
                "rejected": self.in_state("rejected"), "skipped": self.in_state("skipped"),
                "blocked": self.in_state("blocked"), "pending": self.in_state(*IN_FLIGHT, "pending")}


def save(execution: Execution) -> None:
    atomic_write_text(Path(execution.exec_dir) / STATE_FILE, execution.model_dump_json(indent=2) + "\n")


def load(exec_dir: Path) -> Execution:
    """The execution recorded in ``exec_dir``; a record that cannot be read is bad input naming its file (it was
    a pydantic traceback and exit 1, which says that tasks failed)."""
    path = exec_dir / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
        return Execution.model_validate_json(text)
    except (OSError, UnicodeDecodeError, ValidationError) as exc:
        why = (exc.strerror or str(exc) if isinstance(exc, OSError) else
               "it is empty" if isinstance(exc, ValidationError) and not text.strip() else
               "it is not an execution record")
        raise BadInputError(f"{path} cannot be read: {why}",
                            hint=f"restore it from a backup; or start a new execution of the plan (`wfqueue "
                                 f"execute PLAN`), whose tasks then all run again (what {exec_dir.name} merged is "
                                 f"on its branch {integration_branch(exec_dir.name)})") from None


def iso(at: float | None) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if at else "-"


def append_event(exec_dir: Path, text: str, at: float | None = None) -> None:
    """One line at the end of ``execution-events.md`` (never rewritten)."""
    path = exec_dir / EVENTS_FILE
    header = "" if path.exists() else "# Execution events\n\n"
    with path.open("a", encoding="utf-8") as events:
        events.write(f"{header}- {iso(at or time.time())} {' '.join(text.split())}\n")


def review_note(record: TaskRecord) -> str:
    """What a reviewer of the task's merge should look at beyond its files: the tests it added unasked."""
    return f"review the tests it added unasked: {', '.join(record.unnamed_tests)}" if record.unnamed_tests else ""


def render_report(execution: Execution, merge_hint: str) -> str:
    """``execution.md``: the execution, its waves, tasks, gates, timeline and summary. Pure."""
    e = execution
    total = len(e.tasks)
    done = len(e.in_state("completed"))
    rate = f"{100 * done / total:.0f}%" if total else "-"
    lines = [f"# Execution {e.exec_id}", "",
             f"- plan: {e.plan_session} ({e.plan_kind}), `{e.source}`",
             f"- repository: `{e.repo}`", f"- integration branch: `{e.branch}` (started at {e.base[:12]})",
             f"- executor: {e.executor}; at most {e.parallel or 'any number of'} task(s) at once",
             f"- status: **{e.status}**" + (f" (the gate after wave {e.stopped_wave} is red)"
                                             if e.stopped_wave else ""),
             *(["- gate: **none** (--no-gate): no test ran on the merges"] if e.untested else []),
             f"- started {iso(e.started_at)}, finished {iso(e.finished_at)}",
             *([f"- model usage: {e.usage}"] if e.usage else []), "",
             "## Waves", ""]
    lines += [f"{n}. {', '.join(ids)}" for n, ids in enumerate(e.waves, start=1)]
    lines += ["", "## Tasks", "", "| task | wave | state | attempt | commit | detail |", "|---|---|---|---|---|---|"]
    for record in e.tasks.values():
        detail = ": ".join(part for part in (record.reason, ", ".join(record.rejected_files)) if part)
        detail = "; ".join(part for part in (detail, review_note(record)) if part)
        lines.append(f"| {record.id} {_cell(record.title)} | {record.wave} | {record.state} | {record.attempt or '-'} "
                     f"| {(record.commit or '')[:12]} | {_cell(detail)} |")
    if e.gates:
        lines += ["", "## Gate", ""]
        for gate in e.gates:
            verdict = "passed" if gate.passed else f"red: `{gate.failed_command}`"
            lines.append(f"- after wave {gate.wave}, {iso(gate.at)}: {verdict}")
    timed = sorted((r for r in e.tasks.values() if r.started_at), key=lambda r: r.started_at or 0.0)
    if timed:
        lines += ["", "## Timeline", ""]
        lines += [f"- {iso(r.started_at)} -> {iso(r.finished_at)} {r.id} (attempt {r.attempt}, {r.state}"
                  + (f", {r.worker}" if r.worker else "") + ")" for r in timed]
    if e.kept_worktrees:
        lines += ["", "## Worktrees kept", "",
                  "The work of attempts that did not complete (uncommitted changes, or commits made there that no "
                  "branch has); remove each once you no longer need it:", ""]
        lines += [f"- `git worktree remove --force {shlex.quote(path)}`" for path in e.kept_worktrees]
    if e.checkout_changes:
        lines += ["", "## Your checkout changed while it ran", "",
                  "Not by wfqueue: by you, or by an agent writing outside its worktree. Check these:", ""]
        lines += [f"- {_cell(change)}" for change in e.checkout_changes]
    counts = e.counts()
    lines += ["", "## Summary", "",
              f"{done} of {total} task(s) completed ({rate}); failed {len(counts['failed'])}, "
              f"skipped {len(counts['skipped'])}, blocked {len(counts['blocked'])}.", "", merge_hint, ""]
    return "\n".join(lines)
