"""The coordinator's decisions, pure: which task waits on a failed one, which files a task's commit may touch,
how an execution ended, and what the user is told to do next."""

from __future__ import annotations

from wfqueue.analysis.files import is_test_path
from wfqueue.execute.model import ExecTask
from wfqueue.execute.records import Execution, ExecutionStatus

# A task whose dependency ended like this never runs.
UNMET = frozenset({"failed", "skipped", "blocked", "rejected"})


def skip_reason(task: ExecTask, execution: Execution) -> str | None:
    """Why ``task`` cannot run because of a dependency, or None."""
    for dep in task.depends_on:
        record = execution.tasks.get(dep)
        if record is not None and record.state in UNMET:
            return f"depends on {dep}, which is {record.state}"
    return None


def disallowed_changes(task: ExecTask, changes: list[tuple[str, str]]) -> list[str]:
    """The ``(status, path)`` changes of a task's commit (git's A, M, D...) it may not make: only the files the
    task names, new test files, and deleting what the plan says to delete. Each as ``path (what it did)``."""
    named = set(task.files.modify) | set(task.files.create) | set(task.files.delete)
    bad: list[str] = []
    for status, path in changes:
        if status.startswith("D"):
            if path not in task.files.delete:
                bad.append(f"{path} (deleted)")
        elif path in named or (status.startswith("A") and is_test_path(path)):
            continue
        else:
            bad.append(f"{path} ({'added' if status.startswith('A') else 'changed'})")
    return bad


def final_status(execution: Execution) -> ExecutionStatus:
    if execution.stopped_wave is not None:
        return "stopped"
    return "completed" if all(t.state == "completed" for t in execution.tasks.values()) else "partial"


def merge_hint(execution: Execution) -> str:
    """What the user does next, as the report and the terminal say it."""
    if execution.status == "stopped":
        return (f"The gate after wave {execution.stopped_wave} is red: fix the integration branch `{execution.branch}` "
                f"(or the plan), then run `wfqueue execute --continue {execution.exec_id}`.")
    if execution.status in ("running", "interrupted"):
        return f"Finish it with `wfqueue execute --continue {execution.exec_id}`."
    return (f"Review and merge the integration branch into yours: `git diff HEAD...{execution.branch}`, then "
            f"`git merge {execution.branch}`.")
