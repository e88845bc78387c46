"""The integration branch on a real git repository: made beside the user's branch, merged into one task at a time,
a conflict aborted without a trace, a merge never made twice, the gate, and no worktree left behind."""

from __future__ import annotations

from pathlib import Path

from tests.execute_support import git, make_repo, snapshot
from wfqueue.execute.merge import (
    close_integration,
    commit_changes,
    create_branch,
    head_of,
    integration_branch,
    leftover_worktrees,
    merge_task,
    open_integration,
    run_gate,
)

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
    create_branch(repo, branch, base)
    one = commit_on(repo, "t/one", base, {"calc/ops.py": "ONE = 1\n",
                                          "tests/test_one.py": "def test_one():\n    assert True\n"}, "one")
    two = commit_on(repo, "t/two", base, {"calc/ops.py": "TWO = 2\n"}, "two")
    assert commit_changes(repo, one) == [("M", "calc/ops.py"), ("A", "tests/test_one.py")]

    worktree = open_integration(repo, EXEC_ID)
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
    assert leftover_worktrees(repo, EXEC_ID) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    # Opened again on a continued execution: the branch keeps its merge.
    again = open_integration(repo, EXEC_ID)
    assert head_of(again) == merged.commit
    close_integration(repo, again)
    assert snapshot(repo) == before


def test_a_repository_that_verifies_signatures_on_merges_takes_the_unsigned_task_commits(tmp_path: Path) -> None:
    """With merge.verifySignatures set, every task failed at its merge ("does not have a GPG signature"), and a
    --continue paid for every agent run again to fail the same way: wfqueue's own commits are unsigned."""
    repo = make_repo(tmp_path)
    git(repo, "config", "merge.verifySignatures", "true")
    base = head_of(repo)
    create_branch(repo, integration_branch(EXEC_ID), base)
    one = commit_on(repo, "t/one", base, {"calc/ops.py": "ONE = 1\n"}, "one")
    worktree = open_integration(repo, EXEC_ID)
    merged = merge_task(worktree, one, "T1", EXEC_ID, "One")
    assert merged.merged, merged.error
    close_integration(repo, worktree)
    assert git(repo, "config", "merge.verifySignatures") == "true"  # the user's setting, left as it was
