"""Workers of one wave prepare their task worktrees in the same repository at the same moment. A `git worktree add`
creates its admin folder (``.git/worktrees/NAME``) before it writes the files in it; a `git worktree prune` run by
another worker in between deletes that folder, and the add fails (``fatal: could not open
'.git/worktrees/1/locked' for writing``): the task fails at random. The test stands in for the other worker with
an admin folder as `git worktree add` has it at that moment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.execute_support import EXEC_ID, git, make_repo
from wfqueue.execute.worktree import prepare_worktree, worktree_path


@pytest.mark.xfail(strict=True, reason="prepare_worktree prunes without a lock: a concurrent add loses its folder")
def test_preparing_a_worktree_leaves_another_workers_worktree_being_added_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    being_added = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "worktrees" / "TASK-001-1"
    being_added.mkdir(parents=True)  # another worker's `git worktree add`, between its mkdir and its first write

    path = worktree_path(repo, EXEC_ID, "T2", 1)
    prepare_worktree(repo, path, f"wfqueue/tasks/{EXEC_ID}/T2", git(repo, "rev-parse", "HEAD"))

    assert path.is_dir()
    assert being_added.is_dir(), "the other worker's worktree folder was pruned while it was being added"
