"""A workflow session left partial by exploration angles that failed: whether its resume may plan it again.

The context phase goes on without an angle that failed (a model whose answers stayed unusable), and the tasks are
generated without its findings: the session ends partial. Resumed once the angle can be explored (the API is well
again, or another provider is chosen), the context, the conflicts and the tasks are made again with its findings;
the angles explored before answer from Redis, paying for nothing. That would replace the session's task files,
so it is done only while nobody changed them: not after a replan (its backups say so), an execution, or a hand
edit of a task file.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from wfqueue import keys
from wfqueue.state import SessionStore
from wfqueue.workflow_session.models import WorkflowSession
from wfqueue.workflow_session.session import (
    IMPL_PLAN_FILE,
    PLAN_FILE,
    TODO_FILE,
    recorded_failed_angles,
    task_files,
)

__all__ = ["plan_again", "why_not_planned_again"]

AGAIN = ("context", "conflicts", "tasks")  # the phases made again, in order


def why_not_planned_again(folder: Path, session: WorkflowSession) -> str | None:
    """Why the partial session in ``folder`` is kept as it is rather than planned again, or None when it may be."""
    if (folder / ".process" / "backup").is_dir():
        return "it was replanned since"
    if session.status not in ("active", "planning", "failed"):
        return f"it is {session.status}"
    generated = session.phases_done_at.get("tasks")
    try:
        done = datetime.fromisoformat(generated).timestamp() if generated else None
    except ValueError:
        done = None
    tasks = task_files(folder)
    if {path.stem for path in tasks} != set(session.progress.current_tasks):
        return "a task file was added or removed since the tasks were generated"
    # Written with the phase's end; a file changed a moment after it was edited by hand.
    written = [*tasks, *(folder / name for name in (IMPL_PLAN_FILE, TODO_FILE, PLAN_FILE) if (folder / name).is_file())]
    if done is None or any(path.stat().st_mtime > done + 2 for path in written):
        return "its task files were edited since they were generated"
    return None


def plan_again(state: SessionStore, folder: Path, session: WorkflowSession) -> list[str]:
    """Put the session's phases from the context on back to pending, and forget what those phases remembered in
    Redis (the conflicts found, the strategies chosen for them, the generated plan), so that they are made again
    with every angle's findings; return the angles to explore."""
    failed = sorted(recorded_failed_angles(folder))
    found = state.recall(keys.SESSION_CONFLICTS)
    if found is not None:
        try:
            listed = json.loads(found)
            conflicts = listed.get("conflicts", []) if isinstance(listed, dict) else listed
            for conflict in conflicts if isinstance(conflicts, list) else []:
                if isinstance(conflict, dict) and conflict.get("id"):
                    state.forget(keys.strategy_key(str(conflict["id"])))
        except ValueError:
            pass
    for name in (keys.CONTEXT_AT, keys.SESSION_CONFLICTS, keys.WFS_PLAN, keys.GENERATED_AT):
        state.forget(name)
    for phase in AGAIN:
        session.phases[phase] = "pending"
    return failed
