"""What a collaborative session folder says about itself, for `wfqueue status`.

Status comes from what the workers recorded (agent plan.json files, the note's
front matter and failure markers) and, when a shared broker is configured, from
the live agent states in Redis; never from what the coordinator hoped for.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from wfqueue.collab.models import RequirementAnalysis
from wfqueue.collab.note import parse_note
from wfqueue.collab.steps import ANALYSIS_FILE, CONFLICTS_FILE, NOTE_FILE, SUMMARY_FILE, UNFINISHED, agent_dir
from wfqueue.collab.summary import NO_TASK, UNDERSTANDING_FAILED
from wfqueue.fsio import read_json_object
from wfqueue.keys import AgentState
from wfqueue.liveness import silent_for
from wfqueue.metering import UsageReport, read_usage_file, session_report
from wfqueue.session_check import check_session_files
from wfqueue.settings import Settings
from wfqueue.state import SessionState, connect
from wfqueue.usage import PriceTable


class AgentStatus(BaseModel):
    focus_area: str
    state: str
    tasks: int = 0
    worker: str | None = None
    pid: int | None = None
    error: str | None = None
    note: str | None = None  # what a running agent waits for (wfqueue.agent_notes)
    # Seconds since a running agent's last heartbeat, once it has missed three: its worker is gone (killed, its
    # host lost) or stuck. None while it beats.
    silent_s: float | None = None


class SessionStatus(BaseModel):
    session_id: str
    session_dir: str
    status: str
    requirement: str
    agents: list[AgentStatus]
    tasks: int
    conflicts: int
    # Tokens and estimated cost: live from Redis when a shared broker is configured, else the
    # usage.json the callback wrote; None for a session that recorded none (older, or still running).
    usage: UsageReport | None = None
    hint: str | None = None  # what to do next, when the status alone does not say it


DAMAGED = "damaged"  # a session, or an agent, whose file does not read (the listing goes on past it)
UNFINISHED_AGENT = ("pending", "queued", "running")
SENT_AGENT = ("queued", "running")  # given to the workers, which go on with it without the command


def nobody_runs(status: SessionStatus, resume: str) -> SessionStatus:
    """``status`` when no command runs its session (it was killed, or stopped by Ctrl-C): a plan the note
    still calls planning was interrupted, and so were its agents without a result; ``resume`` finishes it.
    Pure."""
    if status.status not in UNFINISHED:
        return status
    agents = [a.model_copy(update={"state": "interrupted"}) if a.state in UNFINISHED_AGENT else a
              for a in status.agents]
    return status.model_copy(update={"status": "interrupted", "agents": agents, "hint": f"finish it: {resume}"})


def _failure_marker(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("> ⚠️"):
            return line.split("failed:", 1)[-1].strip()
    return None


def read_session(session_dir: Path, live: dict[str, dict[str, Any]] | None = None,
                 live_usage: UsageReport | None = None, now: float | None = None) -> SessionStatus:
    usage = live_usage or read_usage_file(session_dir)
    try:
        analysis = RequirementAnalysis.model_validate_json((session_dir / ANALYSIS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:  # not written yet: under way, or the model failed the step (plan.md says so)
        try:
            failed = UNDERSTANDING_FAILED in (session_dir / SUMMARY_FILE).read_text(encoding="utf-8", errors="replace")
        except OSError:  # none (under way), or unreadable: what the folder tells is that nothing was split yet
            failed = False
        return SessionStatus(session_id=session_dir.name, session_dir=str(session_dir),
                             status="failed" if failed else "understanding", requirement="", agents=[], tasks=0,
                             conflicts=0, usage=usage)
    except (OSError, UnicodeDecodeError, ValidationError):  # it said "interrupted: resume", which refused it
        return SessionStatus(session_id=session_dir.name, session_dir=str(session_dir), status=DAMAGED,
                             requirement="", agents=[], tasks=0, conflicts=0, usage=usage,
                             hint=f"{ANALYSIS_FILE} does not read: `wfqueue status {session_dir.name}` says more")
    try:
        # A byte that is not UTF-8 (a hand edit in another encoding) is no reason to show nothing of the plan.
        note = parse_note((session_dir / NOTE_FILE).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        note = parse_note("")
    agents = []
    for sub in analysis.sub_domains:
        record = (live or {}).get(sub.focus_area) or {}
        plan_file = agent_dir(session_dir, sub.focus_area) / "plan.json"
        pool = note.section(sub.task_pool_heading)
        failure = _failure_marker(pool.body) if pool else None
        meta = read_json_object(plan_file)
        if plan_file.is_file() and not meta:
            agents.append(AgentStatus(focus_area=sub.focus_area, state=DAMAGED, error="its plan.json does not read"))
        elif meta:
            written: dict[str, Any] = meta["_metadata"] if isinstance(meta.get("_metadata"), dict) else {}
            agents.append(AgentStatus(focus_area=sub.focus_area, state=record.get("state", AgentState.DONE),
                                      tasks=meta.get("task_count", 0), worker=written.get("worker"),
                                      pid=written.get("pid")))
        elif failure or record.get("state") == AgentState.FAILED:
            agents.append(AgentStatus(focus_area=sub.focus_area, state=AgentState.FAILED,
                                      error=record.get("error") or failure))
        else:
            silent = silent_for(record, now)
            note_text = record.get("note") if silent is None else (
                f"no heartbeat for {silent:g}s: its worker is gone or stuck; the broker gives its task to another "
                "worker after WFQUEUE_VISIBILITY_TIMEOUT_S, and beat's watchdog sends it again sooner")
            agents.append(AgentStatus(focus_area=sub.focus_area, state=record.get("state", "pending"),
                                      worker=record.get("worker"), pid=record.get("pid"), note=note_text,
                                      silent_s=silent))
    report = read_json_object(session_dir / CONFLICTS_FILE)
    status = str(note.front_matter.get("status", "planning"))
    tasks = int(report.get("total_tasks", sum(a.tasks for a in agents)))
    # Every agent answered with no task: a resume has nothing to run again.
    empty = status == "failed" and not tasks and all(a.state == AgentState.DONE for a in agents)
    return SessionStatus(
        session_id=analysis.session_id,
        session_dir=str(session_dir),
        status=status,
        requirement=analysis.original_requirement,
        agents=agents,
        tasks=tasks,
        conflicts=len(report.get("conflicts", [])),
        usage=usage,
        hint=NO_TASK if empty else None,
    )


def read_status(session_dir: Path, settings: Settings) -> SessionStatus:
    """The session's status from its files, with agent states and usage live from a shared broker
    when one is configured (embedded sessions have only their files). A file of the session that does not read
    is bad input naming it (the status said "interrupted: resume", and the resume refused the file)."""
    check_session_files(session_dir)
    current = read_session(session_dir)
    if settings.broker_url is None:
        return current
    state = SessionState(connect(settings), current.session_id, settings.state_ttl_s)
    live = state.agents([a.focus_area for a in current.agents])
    # A session Redis no longer knows (expired) keeps what its callback wrote to usage.json.
    live_usage = session_report(state, PriceTable(settings.price_table)) if state.meta() else None
    return read_session(session_dir, live, live_usage, now=time.time()) if live or live_usage else current
