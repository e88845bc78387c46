"""The integration branch on a real git repository: made beside the user's branch, merged into one task at a time,
a conflict aborted without a trace, a merge never made twice, the gate, and no worktree left behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.execute_support import cache, git, make_repo, snapshot, task
from wfqueue.cli.progress import TerminalUI
from wfqueue.errors import BadInputError
from wfqueue.execute.coordinator import ExecuteCoordinator
from wfqueue.execute.merge import (
    claim_branch,
    close_integration,
    commit_changes,
    head_of,
    integration_branch,
    leftover_worktrees,
    merge_task,
    open_integration,
    run_gate,
)
from wfqueue.execute.model import ExecutablePlan
from wfqueue.execute.records import Execution, TaskRecord
from wfqueue.execute.schedule import build_schedule
from wfqueue.execute.waves import WaveRunner
from wfqueue.settings import load_settings

EXEC_ID = "EXEC-demo-2026-01-01"


def commit_on(repo: Path, branch: str, base: str, files: dict[str, str], message: str) -> str:
    """A commit on ``branch`` (made from ``base``) changing ``files``, made without touching the checkout."""
    worktree = repo.parent / f"wt-{branch.replace('/', '-')}"
    git(repo, "worktree", "add", "-q", "-B", branch, str(worktree), base)
    for path, text in files.items():
        (worktree / path).parent.mkdir(parents=True, exist_ok=True)
        (worktree / path).write_text(text, encoding="utf-8")
    git(worktree, "add", "-A")
    git(worktree, "commit", "-qm", message)
    sha = git(worktree, "rev-parse", "HEAD")
    git(repo, "worktree", "remove", str(worktree))
    return sha


def test_merges_conflicts_and_cleanup_leave_the_users_checkout_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    base = head_of(repo)
    branch = integration_branch(EXEC_ID)
    claim_branch(repo, branch, base)
    one = commit_on(repo, "t/one", base, {"calc/ops.py": "ONE = 1\n",
                                          "tests/test_one.py": "def test_one():\n    assert True\n"}, "one")
    two = commit_on(repo, "t/two", base, {"calc/ops.py": "TWO = 2\n"}, "two")
    assert commit_changes(repo, one) == [("M", "calc/ops.py"), ("A", "tests/test_one.py")]

    worktree = open_integration(repo, cache(), EXEC_ID)
    merged = merge_task(worktree, one, "T1", EXEC_ID, "One")
    assert merged.merged and head_of(repo, branch) == merged.commit
    assert "Task: T1" in git(repo, "log", "-1", "--format=%B", branch)
    # Merging the same commit again (a continued execution) makes no second merge.
    assert merge_task(worktree, one, "T1", EXEC_ID, "One").commit == merged.commit
    conflict = merge_task(worktree, two, "T2", EXEC_ID, "Two")
    assert not conflict.merged and conflict.conflicts == ["calc/ops.py"]
    assert head_of(repo, branch) == merged.commit and git(worktree, "status", "--porcelain") == ""
    assert run_gate(worktree, ["python -m pytest -q tests/test_one.py"]).passed
    red = run_gate(worktree, ["python -m pytest -q tests/test_missing.py"])
    assert not red.passed and red.failed_command == "python -m pytest -q tests/test_missing.py"

    assert close_integration(repo, worktree) is False
    assert leftover_worktrees(repo, cache(), EXEC_ID) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    # Opened again on a continued execution: the branch keeps its merge.
    again = open_integration(repo, cache(), EXEC_ID)
    assert head_of(again) == merged.commit
    close_integration(repo, again)
    assert snapshot(repo) == before


def test_a_repository_that_verifies_signatures_on_merges_takes_the_unsigned_task_commits(tmp_path: Path) -> None:
    """With merge.verifySignatures set, every task failed at its merge ("does not have a GPG signature"), and a
    --continue paid for every agent run again to fail the same way: wfqueue's own commits are unsigned."""
    repo = make_repo(tmp_path)
    git(repo, "config", "merge.verifySignatures", "true")
    base = head_of(repo)
    claim_branch(repo, integration_branch(EXEC_ID), base)
    one = commit_on(repo, "t/one", base, {"calc/ops.py": "ONE = 1\n"}, "one")
    worktree = open_integration(repo, cache(), EXEC_ID)
    merged = merge_task(worktree, one, "T1", EXEC_ID, "One")
    assert merged.merged, merged.error
    close_integration(repo, worktree)
    assert git(repo, "config", "merge.verifySignatures") == "true"  # the user's setting, left as it was


def test_a_branch_is_claimed_once(tmp_path: Path) -> None:
    """Two executions that chose one id at once (each from its own worktree of the repository) both adopted its
    branch; the second claim now fails and leaves the first one's branch where it was."""
    repo = make_repo(tmp_path)
    base = head_of(repo)
    branch = integration_branch(EXEC_ID)
    assert claim_branch(repo, branch, base) is True
    later = commit_on(repo, "elsewhere", base, {"calc/other.py": "X = 1\n"}, "later")
    assert claim_branch(repo, branch, later) is False
    assert head_of(repo, f"refs/heads/{branch}") == base


def test_a_new_execution_takes_another_id_when_its_branch_was_taken_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An execution started from another worktree of the repository (its own `.workflow/`, so its own folders)
    took the id this one chose, between the look at the branches and the branch's creation: both ran on one
    branch, each removing the other's worktrees. This one now takes the next id; the other's branch is left."""
    repo = make_repo(tmp_path)
    base = head_of(repo)
    plan = ExecutablePlan(kind="lite", session_id="calc-work-2026-01-01", source=str(repo / "tasks.jsonl"),
                          repo=str(repo), tasks=[task("T1")])
    coordinator = ExecuteCoordinator(load_settings(), TerminalUI())
    first = coordinator._begin(plan, build_schedule(plan.tasks, 1), "command", False)
    shutil.rmtree(first.exec_dir)  # its folder is in the other worktree's .workflow/
    other = commit_on(repo, "elsewhere", base, {"calc/other.py": "X = 1\n"}, "other")
    git(repo, "update-ref", f"refs/heads/{first.branch}", other)  # the other execution's merge
    monkeypatch.setattr("wfqueue.execute.coordinator.used_exec_ids", lambda _repo: set())  # looked before it
    second = coordinator._begin(plan, build_schedule(plan.tasks, 1), "command", False)
    assert second.exec_id != first.exec_id and second.branch != first.branch
    assert head_of(repo, f"refs/heads/{first.branch}") == other and head_of(repo, f"refs/heads/{second.branch}") == base
    assert [p.name for p in Path(second.exec_dir).parent.iterdir()] == [second.exec_id]


def test_an_integration_branch_moved_while_no_command_ran_is_told_before_any_agent_runs(tmp_path: Path) -> None:
    """Moved after a stopped run (`git update-ref` back to its base): `--continue` saw the moved tip as where the
    execution had left it, ran each task's agent, and failed every merge on the stale files of the worktree. A fix
    committed on the branch (as a red gate's hint says) is where the execution goes on from."""
    repo = make_repo(tmp_path)
    base = head_of(repo)
    branch = integration_branch(EXEC_ID)
    claim_branch(repo, branch, base)
    one = commit_on(repo, "t/one", base, {"calc/ops.py": "ONE = 1\n"}, "one")
    worktree = open_integration(repo, cache(), EXEC_ID)
    merged = merge_task(worktree, one, "T1", EXEC_ID, "One")
    execution = Execution(exec_id=EXEC_ID, exec_dir=str(tmp_path / "x"), repo=str(repo), source="tasks.jsonl",
                          plan_kind="lite", plan_session="demo", branch=branch, base=base, executor="command",
                          parallel=1, waves=[["T1"], ["T2"]],
                          tasks={"T1": TaskRecord(id="T1", title="One", wave=1, state="completed", attempt=1,
                                                  merge=merged.commit),
                                 "T2": TaskRecord(id="T2", title="Two", wave=2, state="pending", attempt=0)})

    def runner() -> WaveRunner:
        return WaveRunner(None, None, None, None, execution, worktree, "")  # type: ignore[arg-type]

    fix = commit_on(repo, "t/fix", merged.commit or "", {"calc/text.py": "FIXED = 1\n"}, "a fix after a red gate")
    git(repo, "update-ref", f"refs/heads/{branch}", fix)
    runner().refuse_moved()  # gone on from the last merge: fine
    git(repo, "update-ref", f"refs/heads/{branch}", base)
    with pytest.raises(BadInputError, match="was moved while") as moved:
        runner().refuse_moved()
    assert f"git update-ref refs/heads/{branch} {merged.commit}" in moved.value.hint
