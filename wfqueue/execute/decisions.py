"""The coordinator's decisions, pure: which task waits on a failed one, which files a task's commit may touch,
what a conflicting merge makes of a task, which tasks ``--continue`` runs again, how an execution ended, and what
the user is told to do next."""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel

from wfqueue.analysis.files import is_test_path
from wfqueue.execute.model import ExecTask
from wfqueue.execute.records import Execution, ExecutionStatus, TaskRecord, TaskState
from wfqueue.metering import says_budget_spent

# A task whose dependency ended like this never runs.
UNMET = frozenset({"failed", "skipped", "blocked", "rejected"})
# A task that ended like this runs again, as a new attempt, when the execution is continued: the user may have
# fixed the cause since (the repository, the plan, the executor's configuration). A skipped task is only waiting
# for its dependencies: it is reconsidered once they ran again.
RETRIED = frozenset({"failed", "rejected", "blocked"})


def skip_reason(task: ExecTask, execution: Execution) -> str | None:
    """Why ``task`` cannot run because of a dependency, or None."""
    for dep in task.depends_on:
        record = execution.tasks.get(dep)
        if record is not None and record.state in UNMET:
            return f"depends on {dep}, which is {record.state}"
    return None


def conflict_outcome(record: TaskRecord, files: list[str]) -> tuple[TaskState, str]:
    """What a task whose merge conflicted in ``files`` becomes, with the reason: ``conflict`` (it runs once more
    on the integration branch's new head), or ``blocked`` when that run was already its second chance."""
    listed = ", ".join(files)
    if record.state == "conflict":
        return "blocked", f"its merge conflicts again ({listed})"
    return "conflict", f"its merge conflicted in {listed}"


def reopened(execution: Execution) -> dict[str, TaskRecord]:
    """The tasks ``--continue`` runs again, as they are before that: failed, rejected and blocked ones (their next
    send is a new attempt, on the integration branch's head then) and skipped ones, which run if their
    dependencies complete this time. Completed tasks are never among them. What was recorded of the earlier
    attempt (its commit, reason, files, worker, log and times) is cleared; its attempt number is kept, so the next
    one is new."""
    again: dict[str, TaskRecord] = {}
    for task_id, record in execution.tasks.items():
        if record.state in RETRIED or record.state == "skipped":
            again[task_id] = record.model_copy(update={
                "state": "pending", "base": None, "commit": None, "merge": None, "reason": None,
                "rejected_files": [], "files_changed": [], "worker": "", "log": None, "started_at": None,
                "finished_at": None})
    return again


def disallowed_changes(task: ExecTask, changes: list[tuple[str, str]]) -> list[str]:
    """The ``(status, path)`` changes of a task's commit (git's A, M, D...) it may not make: only the files the
    task names, new test files, and deleting what the plan says to delete. Each as ``path (what it did)``. A test
    file another task added first is that task's: two tasks that add one unasked end with the second rejected,
    never with the first's tests replaced (a plan that names the file for both lets them share it)."""
    named = set(task.files.modify) | set(task.files.create) | set(task.files.delete)
    bad: list[str] = []
    for status, path in changes:
        if status.startswith("D"):
            if path not in task.files.delete:
                bad.append(f"{path} (deleted)")
        elif path in named or (status.startswith("A") and is_test_path(path) and not _test_configuration(path)):
            continue
        else:
            bad.append(f"{path} ({'added' if status.startswith('A') else 'changed'})")
    return bad


def unnamed_tests(task: ExecTask, changes: list[tuple[str, str]]) -> list[str]:
    """The test files a task's commit adds that the task does not name: allowed (an agent writes the tests of its
    change), and worth a reviewer's look, since a test module can change what other tests see when it is
    imported (patch the code under test) and so turn the gate green over broken code."""
    named = set(task.files.create) | set(task.files.modify)
    return [path for status, path in changes
            if status.startswith("A") and path not in named and is_test_path(path) and not _test_configuration(path)]


# Files that sit among the tests but configure how every test below them runs (or whether it runs): one added
# unasked could skip them all and turn the gate green. Only a task that names one may add it.
TEST_CONFIGURATION = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
                                "setup.cfg", "pyproject.toml", "package.json", ".babelrc", "tsconfig.json"})
TEST_CONFIGURATION_PREFIXES = ("jest.config.", "vitest.config.", "karma.conf.", ".mocharc", "babel.config.")


def _test_configuration(path: str) -> bool:
    name = PurePosixPath(path).name
    return name in TEST_CONFIGURATION or name.startswith(TEST_CONFIGURATION_PREFIXES)


def needs_gate(execution: Execution, index: int, head: str) -> bool:
    """Whether wave ``index`` is gated now, the integration branch at ``head``: it has merged tasks no green gate
    has checked yet. A gate after an earlier wave that passed on this very head has checked them (a continued
    execution whose waves were made again)."""
    wave = execution.waves[index - 1]
    if index in execution.gated_waves or not any(execution.tasks[t].state == "completed" for t in wave):
        return False
    return next((g.head for g in reversed(execution.gates) if g.passed), None) != head


def retry_feedback(record: TaskRecord) -> str:
    """What the run after a conflicting merge is told (a task run again on ``--continue`` starts afresh)."""
    if record.state != "conflict" or not record.reason:
        return ""
    return (f"A previous attempt of this task was not merged: {record.reason} with changes other tasks made to "
            "the integration branch. Make the change again on top of the current code.")


def final_status(execution: Execution) -> ExecutionStatus:
    if execution.stopped_wave is not None:
        return "stopped"
    return "completed" if all(t.state == "completed" for t in execution.tasks.values()) else "partial"


def stopped_by_budget(execution: Execution) -> list[str]:
    """The tasks that failed because the execution's ``--budget`` was spent (their executor made no call
    after). Pure."""
    return [task_id for task_id, record in execution.tasks.items()
            if record.state == "failed" and says_budget_spent(record.reason)]


class BranchGone(BaseModel):
    """An ended execution's integration branch is no longer in the repository (wfqueue.execute.continuing
    .branch_gone): merged and deleted, as a user does once reviewed, or deleted unmerged."""

    tip: str | None  # its last merge (None: nothing was merged)
    in_head: bool  # that commit is in the branch checked out in the repository


def merge_commits(execution: Execution) -> list[str]:
    """The merge commits of the completed tasks (each merge builds on the ones before it)."""
    return [r.merge for r in execution.tasks.values() if r.state == "completed" and r.merge]


def _gone_hint(execution: Execution, gone: BranchGone, why_at: str) -> str:
    branch = f"`{execution.branch}`"
    again = f"execute the plan again (`wfqueue execute {execution.source}`)"
    missed = len(execution.tasks) - len(execution.in_state("completed"))
    rest = (f"{missed} task(s) did not complete (see {why_at} for why), and its integration branch {branch} is no "
            f"longer in the repository, so they cannot run again on it: {again}" if missed else "")
    if gone.tip is None:
        return f"{rest}." if rest else f"Its integration branch {branch} is no longer in the repository."
    if gone.in_head:
        merged = f"its integration branch {branch} was merged into your branch (its last merge, {gone.tip[:12]})"
        return f"{rest}; {merged}." if rest else f"Nothing is left to do: {merged} and deleted."
    back = (f"its integration branch {branch} is no longer in the repository, and its last merge, {gone.tip[:12]}, "
            f"is not in your branch: if you merged it another way (a squash) or do not want it, nothing is left to "
            f"do; otherwise `git branch {execution.branch} {gone.tip}` brings it back while git keeps the commit")
    return f"{rest}; {back}." if rest else f"{back[0].upper()}{back[1:]}."


def merge_hint(execution: Execution, repo_option: str = "", why_at: str = "execution.md",
               gone: BranchGone | None = None) -> str:
    """What the user does next, as the report and the terminal say it; ``repo_option`` (" --repo PATH", see
    wfqueue.sessions.repo_option) goes into the command it names; ``why_at`` is where the reasons of tasks that
    did not complete are read (the report itself says "the tasks above"); ``gone``: the integration branch of an
    ended execution is no longer there (its review hint would name a branch that does not exist)."""
    larger = " --budget LARGER" if stopped_by_budget(execution) else ""  # the same cap would stop them again
    again = f"`wfqueue execute --continue {execution.exec_id}{repo_option}{larger}`"
    if execution.branch_lost:
        return (f"Its integration branch `{execution.branch}` was deleted while it ran: execute the plan again "
                f"(`wfqueue execute {execution.source}`).")
    if gone is not None and execution.status in ("completed", "partial"):
        return _gone_hint(execution, gone, why_at)
    if execution.status == "stopped":
        return (f"The gate after wave {execution.stopped_wave} is red: fix the integration branch `{execution.branch}` "
                f"(or the plan), then run {again}.")
    if execution.status == "running":  # as `wfqueue status` shows it: a command runs it now
        return f"It runs now; should its command stop, {again} finishes it."
    if execution.status == "interrupted":
        return f"Finish it with {again}."
    review = (f"`git diff HEAD...{execution.branch}`, then `git merge {execution.branch}`")
    if execution.status == "partial":
        missed = len(execution.tasks) - len(execution.in_state("completed"))
        again_runs = (f"{missed} task(s) did not complete (see {why_at} for why): fix the cause (in the plan, "
                      f"the executor's settings, or on the integration branch `{execution.branch}`, which {again} "
                      f"builds on: a commit to your own branch is not seen there), then {again} runs them again")
        if not execution.in_state("completed"):
            return f"{again_runs}. Nothing was merged: your branch has nothing to review yet."
        return f"{again_runs}; or review what completed on the integration branch ({review})."
    untested = " No test ran on it (--no-gate): run the project's tests there first." if execution.untested else ""
    return f"Review and merge the integration branch into yours: {review}.{untested}"
