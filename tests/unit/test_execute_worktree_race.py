"""Workers of one wave prepare their task worktrees in the same repository at the same moment. A `git worktree add`
creates its admin folder (``.git/worktrees/NAME``) before it writes the files in it; a `git worktree prune` run by
another worker in between would delete that folder, and the add fail (``fatal: could not open
'.git/worktrees/1/locked' for writing``): the task would fail at random. Adding, pruning and removing happen under
one lock per repository (``worktrees_locked``).

The test plays the other worker: it holds the lock with its admin folder half made, as `git worktree add` has it,
and lets go only once ``prepare_worktree`` is waiting for the lock. Without the lock, the prune runs at once, the
folder is gone, and the wait below times out."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.execute_support import EXEC_ID, cache, git, make_repo
from wfqueue.execute import worktree
from wfqueue.execute.worktree import prepare_worktree, worktree_path, worktrees_locked


def test_preparing_a_worktree_waits_for_another_workers_add(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path)
    being_added = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "worktrees" / "TASK-001-1"
    holding, waiting = threading.Event(), threading.Event()
    real_flock = fcntl.flock

    def flock(handle: Any, operation: int) -> None:
        if operation == fcntl.LOCK_EX and threading.current_thread().name == "prepare":
            waiting.set()  # about to block: the other worker still holds the lock
        real_flock(handle, operation)

    monkeypatch.setattr(worktree.fcntl, "flock", flock)
    seen: dict[str, bool] = {}

    def other_worker() -> None:
        with worktrees_locked(repo):
            being_added.mkdir(parents=True)  # its `git worktree add`, between the mkdir and the first write
            holding.set()
            seen["prepare waited"] = waiting.wait(30)
            seen["folder intact"] = being_added.is_dir()
            being_added.rmdir()  # its add gave up; the folder is its own to clean

    path = worktree_path(repo, cache(), EXEC_ID, "T2", 1)
    errors: list[Exception] = []

    def prepare() -> None:
        try:
            prepare_worktree(repo, path, f"wfqueue/tasks/{EXEC_ID}/T2", git(repo, "rev-parse", "HEAD"))
        except Exception as exc:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(exc)

    other = threading.Thread(target=other_worker)
    other.start()
    assert holding.wait(30)
    preparing = threading.Thread(target=prepare, name="prepare")
    preparing.start()
    other.join(60)
    preparing.join(60)

    assert not errors, errors
    assert seen == {"prepare waited": True, "folder intact": True}, "the other worker's folder was pruned mid-add"
    assert path.is_dir() and git(path, "rev-parse", "--abbrev-ref", "HEAD") == f"wfqueue/tasks/{EXEC_ID}/T2"
