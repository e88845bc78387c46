"""`wfqueue status [SESSION]`: sessions of a repository, or one session: per agent, angle or phase with tokens and
cost, or an execution's tasks wave by wave."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, TypeVar, cast

import redis
import typer
from pydantic import BaseModel, SecretStr
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wfqueue.cli import json_output
from wfqueue.cli.plan_common import REPO_DEFAULT, keep_whole, print_table
from wfqueue.collab.coordinator import COLLAB
from wfqueue.collab.inspect import SENT_AGENT, SessionStatus, read_session
from wfqueue.collab.inspect import nobody_runs as collab_nobody_runs
from wfqueue.collab.inspect import read_status as read_collab_status
from wfqueue.coordinator_lease import coordinator_gone
from wfqueue.embedded import SOCKET_RECORD
from wfqueue.errors import SessionNotFoundError, WfqueueError
from wfqueue.execute.continuing import branch_gone
from wfqueue.execute.decisions import merge_hint
from wfqueue.execute.records import Execution
from wfqueue.execute.status_view import gate_lines, headline, task_rows
from wfqueue.metering import UsageReport, budget_resume_hint, usage_line
from wfqueue.planted import refuse_planted
from wfqueue.redis_owner import owned_now
from wfqueue.runtime import resume_command
from wfqueue.session_summary import AWAITING_ACCEPTANCE, SessionSummary, nobody_runs
from wfqueue.sessions import queue_dir, repo_option, resolve_repo
from wfqueue.settings import Settings, load_settings
from wfqueue.state import SessionState, connect
from wfqueue.transport.workspace import rebuild_from_redis
from wfqueue.up_cluster import serving_up
from wfqueue.workflow.registry import locate, sessions_by_kind

MOST_IDS_LISTED = 20  # ids of each other kind the listing names

# The raw calls stay in usage.json; status shows the totals.
NO_CALLS_LIST: dict[str, Any] = {"usage": {"calls"}}


def _changed_at(folder: Path) -> float:
    """When ``folder`` last changed; 0 for one archived or removed since it was listed."""
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


def _row_usage(usage: UsageReport | None) -> tuple[str, str]:
    if usage is None:
        return "-", "-"
    if usage.total.calls == 0:
        return "0", "no LLM calls"
    cost = f"~${usage.total.cost_usd:.2f}" + ("+" if usage.total.unpriced_calls else "")
    return f"{usage.total.usage.total:,}", cost


def held_redis(settings: Settings, root: Path) -> Settings:
    """``settings`` pointed at the embedded Redis a command of ``root`` holds now, where its agents' live records
    are (their states, waits, usage so far); as they are when it cannot be reached (its socket elsewhere, a
    password, a command stopping): the files then tell what they can."""
    record = queue_dir(root) / "redis" / SOCKET_RECORD
    try:
        socket = Path(record.read_text(encoding="utf-8"))
    except OSError:
        return settings
    if not socket.exists():
        return settings
    live = settings.model_copy(update={"broker_url": SecretStr(f"redis+socket://{socket}")})
    try:
        connect(live).close()
    except WfqueueError:
        return settings
    return live


Shown = TypeVar("Shown", bound=BaseModel)  # a session's or execution's record, as status shows it


def _nobody_runs(current: BaseModel, resume: str) -> BaseModel:
    """``current`` when no command runs its session: what was under way was interrupted; ``resume`` finishes it."""
    if isinstance(current, SessionSummary):
        return nobody_runs(current, resume)
    if isinstance(current, SessionStatus):
        return collab_nobody_runs(current, resume)
    if isinstance(current, Execution) and current.status == "running":
        return current.model_copy(update={"status": "interrupted"})
    return current


def _as_it_stands(current: Shown, session_id: str, settings: Settings, live: Settings, *, embedded_here: bool,
                  held: bool, resume: str, reachable: bool = True) -> Shown:
    """``current`` as it stands now: what its files say is under way was interrupted when no command runs it.
    A shared broker known not to answer (``reachable``) is not asked again: each ask would wait its timeout."""
    if _nobody_runs(current, resume) == current:
        return current  # nothing under way (finished, cancelled): no broker to ask, for each row of a listing
    if embedded_here:
        # No command holds the repository's Redis: what its files say is running was interrupted (a command
        # killed outright could not say so itself). One that does may be another session's: this one's
        # own claim tells (its agents run on that command's workers only while it waits for them).
        nobody = not held or (live is not settings and isinstance(current, SessionSummary | SessionStatus | Execution)
                              and coordinator_gone(live, session_id))
    else:
        # A shared broker's (or up's) workers go on without the command: only what waits on the command
        # itself (its next steps, a question) was interrupted; a collab plan whose agents still run or wait
        # for a worker finishes on its own (its callback runs on the workers). Agents still pending were never
        # sent: the command sends them after the understanding, so without it nobody will. An execution's tasks
        # may still finish on the workers, but only its command merges them: without it, it was interrupted.
        agents_go_on = isinstance(current, SessionStatus) and any(a.state in SENT_AGENT and a.silent_s is None
                                                                  for a in current.agents)
        nobody = (reachable and isinstance(current, SessionSummary | SessionStatus | Execution) and not agents_go_on
                  and coordinator_gone(settings, session_id))
    return cast(Shown, _nobody_runs(current, resume)) if nobody else current  # the same kind of record


def _listed(folder: Path, settings: Settings, live: Settings, *, embedded_here: bool, held: bool, resume: str,
            reachable: bool) -> SessionStatus:
    """A row of the listing: the collab session in ``folder`` as it stands. One its files say is under way, on a
    shared broker (or up's), is read with its agents' live states, as `status SESSION` reads it: from the files
    alone the listing called a plan whose agents still ran on up's workers interrupted, and the resume it named
    sent them all again."""
    current = read_session(folder)
    if not embedded_here and reachable and _nobody_runs(current, resume) != current:
        with contextlib.suppress(WfqueueError):  # a damaged file, a broker gone since: the files say what they can
            current = read_collab_status(folder, settings)
    return _as_it_stands(current, folder.name, settings, live, embedded_here=embedded_here, held=held,
                         resume=resume, reachable=reachable)


def _print_summary(out: Console, summary: SessionSummary, label: str) -> None:
    """A lite or workflow session: status, tasks, usage, and its angles or phases."""
    out.print(f"[bold]{summary.session_id}[/] ({label}): {summary.status}, {summary.tasks} tasks")
    out.print(f"usage: {escape(usage_line(summary.usage))}")
    table = Table("angle" if summary.kind == "lite" else "phase", "state", "detail")
    for step in summary.steps:
        table.add_row(escape(step.name), step.state, escape(step.detail))
    print_table(out, table)
    if summary.hint:
        out.print(escape(summary.hint), soft_wrap=True)  # a command to copy: never broken in two


def _print_agents(out: Console, current: SessionStatus) -> None:
    """A collaborative session: one row per agent."""
    out.print(f"[bold]{current.session_id}[/]: {current.status}, {current.tasks} tasks,"
              f" {current.conflicts} conflicts")
    out.print(f"usage: {escape(usage_line(current.usage))}")
    table = Table("agent", "state", "tasks", "worker", "pid", "error or wait")
    for agent in current.agents:
        table.add_row(escape(agent.focus_area), agent.state, str(agent.tasks), escape(agent.worker or ""),
                      str(agent.pid or ""), escape(agent.error or agent.note or ""))
    print_table(out, table)
    if current.hint:
        out.print(escape(current.hint), soft_wrap=True)


def _print_execution(out: Console, execution: Execution) -> None:
    """An execution: its waves, one row per task, the gates, and how to merge or continue."""
    first, *rest = headline(execution)
    out.print(f"[bold]{escape(first)}[/]")
    for line in rest:
        out.print(escape(line))
    # Ids and states never wrap or shorten (a piped status is 80 columns wide); titles fold, and each
    # task's detail (a reason, rejected files, the merge) follows the table in full.
    table = Table("wave", "task", "title", "state", "attempt", "time (s)", "worker")
    keep_whole(table, "wave", "task", "state", "attempt", "time (s)")
    rows = task_rows(execution)
    for row in rows:
        table.add_row(str(row.wave), escape(row.task_id), escape(row.title), row.state, row.attempt, row.seconds,
                      escape(row.worker))
    print_table(out, table)
    for row in rows:
        if row.detail:
            out.print(escape(f"{row.task_id}: {row.detail}"), soft_wrap=True)
    for line in gate_lines(execution):
        out.print(escape(line))
    hint = merge_hint(execution, repo_option(Path(execution.repo)), gone=branch_gone(execution))
    out.print(escape(hint), soft_wrap=True)  # a command to copy: never broken in two


def _elsewhere(settings: Settings, session_id: str, root: Path) -> SessionNotFoundError | None:
    """The answer for a session this machine has no folder of, when the shared broker knows it: it was planned
    from another machine, whose folder status reads (it said "existing sessions: none", as if it did not exist)."""
    if settings.broker_url is None:
        return None
    try:
        meta = SessionState(connect(settings), session_id, settings.state_ttl_s).session_meta()
    except (WfqueueError, redis.RedisError):
        return None
    if meta.session_dir is None or Path(meta.session_dir).is_relative_to(root):  # its folder was here: gone
        return None
    return SessionNotFoundError(
        f"{session_id} is not run from here: the broker knows it, its folder is {meta.session_dir} on the "
        "machine whose command started it", hint=f"run `wfqueue status {session_id}` on that machine (status reads "
                                                 "the session's folder; the broker holds only what is under way)")


def _reachable(settings: Settings) -> bool:
    """Whether the shared broker answers; if not, say so (on stderr): the listing then shows what the files say,
    and a wrong password or a stopped Redis went unnoticed behind a table of stale states."""
    try:
        connect(settings).close()
    except WfqueueError as exc:
        _files_say(exc, "the states below are")
        return False
    return True


def _files_say(exc: WfqueueError, what: str) -> None:
    Console(stderr=True, highlight=False).print(
        f"warning: {escape(exc.message)}; {what} what the session files say", soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        session: str | None = typer.Argument(None, help="A session id (default: list the repository's sessions)."),
        repo: str | None = typer.Option(None, "--repo", help=f"Repository ({REPO_DEFAULT})."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Show sessions, or one session's agents: state, worker, tasks, errors."""
        settings = load_settings()
        root = resolve_repo(repo)
        refuse_planted(root)  # an up.json the repository brings would name a broker of its choosing
        up = serving_up(settings, root)
        if up is not None:  # its Redis holds the live agent records of the plans it runs
            settings = up.broker_settings(settings)
        out = Console(highlight=False)
        embedded_here = settings.embedded and up is None
        held = embedded_here and owned_now(queue_dir(root) / "redis")
        if session is None:
            # The listing shows collaborative plans (`wfqueue status SESSION` reads any kind), each as it stands:
            # one whose command was stopped is interrupted, not still planning.
            reachable = embedded_here or _reachable(settings)
            folder = COLLAB.root(root)
            live = held_redis(settings, root) if held else settings
            option = repo_option(root)
            rows = [_listed(p, settings, live, embedded_here=embedded_here, held=held,
                            resume=resume_command(p.name, root, option), reachable=reachable)
                    for p in sorted(folder.iterdir()) if p.is_dir()] if folder.is_dir() else []
            if as_json:
                json_output.emit([r.model_dump(mode="json", exclude={"agents": True, **NO_CALLS_LIST})
                                  for r in rows])
                return
            table = Table("session", "status", "agents", "tasks", "conflicts", "tokens", "est. cost",
                          title=escape(str(folder)))
            keep_whole(table, "session", "status")
            for r in rows:
                table.add_row(escape(r.session_id), r.status, str(len(r.agents)), str(r.tasks), str(r.conflicts),
                              *_row_usage(r.usage))
            if rows:
                print_table(out, table)
            else:
                out.print(escape(f"no collaborative plans under {folder}"))
            # The other kinds by id: the table's columns (agents, conflicts) are a collaborative plan's.
            others = {kind: ids for kind, ids in sessions_by_kind(root).items() if kind is not COLLAB and ids}
            for kind, ids in others.items():
                if len(ids) > MOST_IDS_LISTED:  # the newest: months of sessions made one line of 300 KB
                    at = kind.root(root)
                    newest = sorted(ids, key=lambda i: _changed_at(at / i))
                    out.print(escape(f"{kind.label} sessions ({len(ids)}), the {MOST_IDS_LISTED} last changed: "
                                     f"{', '.join(newest[-MOST_IDS_LISTED:])}; all are in {at}"), soft_wrap=True)
                else:
                    out.print(escape(f"{kind.label} sessions: {', '.join(ids)}"), soft_wrap=True)
            if others:
                out.print("`wfqueue status SESSION` shows one")
            return
        try:
            kind, folder = locate(root, session)
        except SessionNotFoundError as missing:
            raise _elsewhere(settings, session, root) or missing from None
        rebuild_from_redis(settings, folder.name, folder)  # workers on other machines stored files there
        live = held_redis(settings, root) if held else settings
        reachable = True
        try:
            current = kind.read_status(folder, live)
        except WfqueueError as exc:
            # The command holding it stopped its Redis since, or the shared broker does not answer (stopped, or a
            # wrong password: it was exit 3 even for a completed session): the files tell what they can.
            if not embedded_here:
                _files_say(exc, "the state below is")
                reachable = False
            live = settings if embedded_here else settings.model_copy(update={"broker_url": None})
            current = kind.read_status(folder, live)
        resume = resume_command(folder.name, root)
        if (isinstance(current, SessionSummary | SessionStatus) and current.status in ("failed", "partial")
                and current.usage is not None and current.usage.budget_exhausted):
            # A resume without a larger budget would stop at the same cap.
            current = current.model_copy(update={"hint": budget_resume_hint(folder.name, repo_option(root))})
        elif isinstance(current, SessionSummary | SessionStatus) and current.status == "failed" and not current.hint:
            # A step the model failed (a refusal, answers that never validated): what was done is kept.
            current = current.model_copy(update={"hint": f"{resume} goes on where it stopped (what was done is "
                                                          "kept, not paid again)"})
        elif isinstance(current, SessionSummary) and current.status == AWAITING_ACCEPTANCE:
            # Whether its command still asks is known only in embedded mode (below): say both.
            current = current.model_copy(update={"hint": "answer its question (allow, modify or cancel) where its "
                                                          f"command runs; if that command stopped: {resume}"})
        current = _as_it_stands(current, folder.name, settings, live, embedded_here=embedded_here, held=held,
                                resume=resume, reachable=reachable)
        if as_json:
            json_output.emit(current.model_dump(mode="json", exclude=NO_CALLS_LIST))
        elif isinstance(current, SessionSummary):
            _print_summary(out, current, kind.label)
        elif isinstance(current, SessionStatus):
            _print_agents(out, current)
        elif isinstance(current, Execution):
            _print_execution(out, current)
        else:
            out.print_json(current.model_dump_json(exclude=NO_CALLS_LIST))
