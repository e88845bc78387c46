"""A replan's draft as what it writes and shows, pure: :func:`render_artifacts` gives the exact bytes of every
session file that changes, so the I/O layer backs up precisely those files and nothing else; :func:`render_impact`
is the modification plan shown before anything changes."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from wfqueue.fsio import dumps_json
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import PlanOverview, ReplanEntry
from wfqueue.workflow_session.render import execution_strategy, recount, render_impl_plan, render_todo
from wfqueue.workflow_session.replan.impact import Impact, ReplanDraft, SessionSnapshot
from wfqueue.workflow_session.session import IMPL_PLAN_FILE, PLAN_FILE, SESSION_FILE, TASK_DIR, TODO_FILE


def render_artifacts(snap: SessionSnapshot, draft: ReplanDraft, entry: ReplanEntry) -> dict[str, str | None]:
    """New content of every session file that changes (None: the file goes), task files
    first and workflow-session.json last, so the history entry is the last thing written."""
    impact, ids = draft.impact, list(draft.tasks)
    out: dict[str, str | None] = {}
    for tid in [*impact.added, *impact.updated]:
        out[snap.task_files.get(tid, f"{TASK_DIR}/{tid}.json")] = dumps_json(draft.tasks[tid])
    for tid in impact.deleted:
        out[snap.task_files[tid]] = None
    unified = _valid_tasks(draft)
    whole = len(unified) == len(draft.tasks)  # else a task the session had broken stays so: see unrendered
    if snap.plan is not None:
        plan = {**snap.plan, "task_ids": ids, "task_count": len(ids), **(_recounted(snap.plan, unified) if whole
                                                                          else {})}
        out[PLAN_FILE] = dumps_json(plan)
        if snap.context is not None and whole:
            out[IMPL_PLAN_FILE] = render_impl_plan(snap.session, PlanOverview.model_validate(plan), unified,
                                                   snap.context, snap.constraints)
    if whole:
        out[TODO_FILE] = render_todo(snap.topic, unified)
    session = snap.session.model_copy(deep=True)
    session.replan_history.append(entry)
    session.progress.current_tasks = ids
    session.progress.last_replan = entry.timestamp
    session.updated_at = entry.timestamp
    out[SESSION_FILE] = dumps_json(session.model_dump(mode="json", exclude_none=True))
    return {rel: text for rel, text in out.items()
            if text is None or snap.files.get(rel) != text.encode("utf-8")}


def _valid_tasks(draft: ReplanDraft) -> list[UnifiedTask]:
    tasks: list[UnifiedTask] = []
    for data in draft.tasks.values():
        try:
            tasks.append(UnifiedTask.model_validate(data))
        except ValidationError:
            continue
    return tasks


def unrendered(draft: ReplanDraft) -> list[str]:
    """The draft's tasks that are no valid task (a file the session had broken, which this replan leaves as it
    was: its check names the problem as the plan's before): while one is, the documents listing every task,
    IMPL_PLAN.md and TODO_LIST.md, are left as they are instead of rendered without it."""
    valid = {task.id for task in _valid_tasks(draft)}
    return [tid for tid in draft.tasks if tid not in valid]


def _recounted(plan: dict[str, Any], tasks: list[UnifiedTask]) -> dict[str, Any]:
    """plan.json's fields that describe the task set, made to agree with it: IMPL_PLAN.md shows the summary
    and approach beside the counts it derives from the tasks themselves."""
    out: dict[str, Any] = {key: recount(plan[key], tasks) for key in ("summary", "approach")
                           if isinstance(plan.get(key), str)}
    if plan.get("recommended_execution") is not None:
        out["recommended_execution"] = execution_strategy(tasks)
    return out


def _bullets(values: list[str]) -> str:
    return ", ".join(values) or "-"


def render_impact(impact: Impact, artifacts: list[str]) -> str:
    """The modification plan shown before anything changes (seed step 6.3.2)."""
    lines = [f"## Modification Plan: {impact.session_id}" + (f" / {impact.task_id}" if impact.task_id else ""),
             f"Scope: {impact.scope}   tasks: {impact.task_count_before} -> {impact.task_count_after}",
             f"Create: {_bullets(impact.added)}", f"Update: {_bullets(impact.updated)}",
             f"Delete: {_bullets(impact.deleted)} (moved into the backup)"]
    for change in impact.changes:
        if change.fields:
            lines.append(f"  {change.task_id}: {', '.join(change.fields)}")
    if impact.execution_config:
        lines.append(f"Execution config: {impact.execution_config}")
    for tid, downstream in impact.dependents.items():
        lines.append(f"Dependents of {tid}: {', '.join(downstream)}")
    lines.append(f"Source files of these tasks: {_bullets(impact.source_files)}")
    lines.append(f"Session files to change: {_bullets(artifacts)}")
    lines += [f"note: {n}" for n in impact.notes] + [f"warning: {w}" for w in impact.warnings]
    lines += [f"problem: {p}" for p in impact.problems]
    return "\n".join(lines)
