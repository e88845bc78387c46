"""What a lite-plan or workflow session folder says about itself, for `wfqueue status SESSION`.

Collaborative sessions have their own, per-agent view (``wfqueue.collab.inspect``).
These two are read from the files their final steps wrote, so the summary also
works after an embedded broker has stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from wfqueue import keys
from wfqueue.errors import BadInputError
from wfqueue.fsio import read_json_object
from wfqueue.lite.render import says_awaiting, says_cancelled
from wfqueue.lite.steps import MANIFEST_FILE, NOTES_FILE, TASKS_FILE
from wfqueue.metering import UsageReport, read_usage_file, session_report
from wfqueue.settings import Settings
from wfqueue.state import SessionState, connect
from wfqueue.usage import PriceTable
from wfqueue.workflow_session.replan.backup import HALF_WRITTEN, half_written_now
from wfqueue.workflow_session.session import load_session, read_session, recorded_failed_angles, task_files


class StepStatus(BaseModel):
    name: str  # an exploration angle, or a workflow phase
    state: str
    detail: str = ""


class SessionSummary(BaseModel):
    kind: Literal["lite", "workflow"]
    session_id: str
    session_dir: str
    status: str
    tasks: int
    steps: list[StepStatus]
    usage: UsageReport | None = None
    hint: str = ""  # what to do next, when the session waits for someone


# A lite plan shown to the user, who has not allowed, modified or cancelled it yet.
AWAITING_ACCEPTANCE = "awaiting acceptance"
# Statuses of a session that goes on only while its command runs.
_UNDER_WAY = ("planning", AWAITING_ACCEPTANCE)


def nobody_runs(summary: SessionSummary, resume: str) -> SessionSummary:
    """``summary`` when no command runs its session (it was killed, or stopped at a question): a session or step
    still under way was interrupted, and ``resume`` says how to finish it. Pure."""
    steps = [step.model_copy(update={"state": "interrupted", "detail": step.detail or f"finish it: {resume}"})
             if step.state == "running" else step for step in summary.steps]
    if summary.status not in _UNDER_WAY:
        return summary.model_copy(update={"steps": steps})
    said = "stopped before the plan was accepted" if summary.status == AWAITING_ACCEPTANCE else "stopped"
    return summary.model_copy(update={"steps": steps, "status": "interrupted",
                                      "hint": f"{said}: finish it with {resume}"})


def read_lite_session(folder: Path) -> SessionSummary:
    """Angles from the exploration manifest, tasks from tasks.jsonl."""
    steps: list[StepStatus] = []
    manifest_file = folder / MANIFEST_FILE
    manifest = read_json_object(manifest_file)
    if manifest_file.is_file() and not manifest:
        raise BadInputError(f"{folder.name}: {MANIFEST_FILE} does not read as an exploration manifest (a JSON "
                            "object)",
                            hint=f"mend {manifest_file}, or restore it from a copy; nothing was changed")
    for entry in _records(manifest, "explorations"):
        steps.append(StepStatus(name=str(entry.get("angle")), state="done",
                                detail=f"{entry.get('verified', 0)} verified, {entry.get('unverified', 0)} not"))
    for failure in _records(manifest, "failed_angles"):  # [{angle, error}], as lite/synthesis.py writes it
        steps.append(StepStatus(name=str(failure.get("angle")), state="failed", detail=str(failure.get("error"))))
    # An angle explored before the plan stopped (the manifest is written with the synthesis, after them all).
    told = {step.name for step in steps}
    for path in sorted(folder.glob("exploration-*.md")):
        angle = path.stem.removeprefix("exploration-")
        if path.name != NOTES_FILE and angle not in told:
            steps.append(StepStatus(name=angle, state="done", detail="explored"))
    tasks_file = folder / TASKS_FILE
    tasks = 0
    plan_md = folder / "plan.md"
    said = plan_md.read_text(encoding="utf-8", errors="replace") if plan_md.is_file() else ""
    if says_cancelled(said):  # the user said no to the plan
        status = "cancelled"
    elif tasks_file.is_file():
        # One task per line; `wfqueue validate` is where a malformed line is reported.
        tasks = sum(1 for line in tasks_file.read_text(encoding="utf-8", errors="replace").split("\n") if line.strip())
        if says_awaiting(said):
            status = AWAITING_ACCEPTANCE
        else:
            status = "partial" if any(s.state == "failed" for s in steps) else "completed"
    elif plan_md.is_file():
        # plan.md without tasks.jsonl: the plan ended before any task was planned (a spent budget).
        status = "failed"
    else:
        status = "planning"
    return SessionSummary(kind="lite", session_id=folder.name, session_dir=str(folder), status=status, tasks=tasks,
                          steps=steps, usage=read_usage_file(folder))


def _records(manifest: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The objects listed under ``key`` (a hand-edited manifest may hold anything there)."""
    listed = manifest.get(key)
    return [entry for entry in listed if isinstance(entry, dict)] if isinstance(listed, list) else []


def read_workflow_session(folder: Path) -> SessionSummary:
    """Phases and status from workflow-session.json, tasks from .task/."""
    try:
        session = load_session(folder)
    except (OSError, ValueError, ValidationError):
        return SessionSummary(kind="workflow", session_id=folder.name, session_dir=str(folder), status="unreadable",
                              tasks=0, steps=[], usage=read_usage_file(folder))
    skipped = recorded_failed_angles(folder)
    steps = [StepStatus(name=phase, state=state,
                        detail="; ".join(f"angle {a} failed: {why}" for a, why in skipped.items())
                        if phase == "context" else "")
             for phase, state in session.phases.items()]
    tasks = len(task_files(folder))
    summary = SessionSummary(kind="workflow", session_id=session.session_id, session_dir=str(folder),
                             status=session.status, tasks=tasks, steps=steps, usage=read_usage_file(folder))
    said = half_written_now(folder)  # its record is the one before or after: the files are neither
    return summary if said is None else summary.model_copy(update={"status": HALF_WRITTEN,
                                                                   "hint": f"{said[0]}: {said[1]}"})


def with_live_records(summary: SessionSummary, settings: Settings, *, angles: bool = False) -> SessionSummary:
    """Live totals while the session runs on a broker (shared, `wfqueue up`'s, or the embedded one a command holds),
    and, with ``angles``, the live record of each angle its assessment chose that its files do not yet tell (one
    still exploring, or waiting on the API); else what the files recorded."""
    if settings.broker_url is None:
        return summary
    state = SessionState(connect(settings), summary.session_id, settings.state_ttl_s)
    if not state.meta():
        return summary
    told = {step.name for step in summary.steps}
    pending = [a for a in (_assessed_angles(state) if angles else []) if a not in told]
    live = [StepStatus(name=angle, state=str(record.get("state", "queued")),
                       detail=str(record.get("note") or record.get("error") or ""))
            for angle, record in state.agents(pending).items() if record]
    return summary.model_copy(update={"usage": session_report(state, PriceTable(settings.price_table)),
                                      "steps": [*summary.steps, *live]})


def _assessed_angles(state: SessionState) -> list[str]:
    """The angles a lite plan's assessment chose, as Redis holds it (none before the assessment)."""
    stored = state.recall(keys.ASSESSMENT)
    try:
        return list(json.loads(stored).get("angles") or []) if stored else []
    except (ValueError, AttributeError):
        return []


def lite_status(folder: Path, settings: Settings) -> SessionSummary:
    return with_live_records(read_lite_session(folder), settings, angles=True)


def workflow_status(folder: Path, settings: Settings) -> SessionSummary:
    """`wfqueue status WFS-...`: a record that does not read is bad input naming the file and what to do (exit 2),
    as verify and replan say; it showed "unreadable, 0 tasks" and an empty phase table, exit 0."""
    read_session(folder)
    return with_live_records(read_workflow_session(folder), settings)
