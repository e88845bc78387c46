"""git as wfqueue runs it: a failure quotes the command briefly and git's own message whole."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wfqueue.errors import InfrastructureError
from wfqueue.gitcmd import run_git


def test_a_failure_quotes_the_command_up_to_its_pathspecs_then_gits_message(tmp_path: Path) -> None:
    """A task's `git add` under core.safecrlf failed with some 600 characters, most of them wfqueue's own twelve
    exclusion pathspecs, git's reason ("LF would be replaced by CRLF") at the end."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    excludes = [f":(exclude,glob)**/{name}" for name in ("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")]
    with pytest.raises(InfrastructureError) as caught:
        run_git(tmp_path, "add", "--all", "--", "no-such-file", *excludes)
    message = caught.value.message
    assert message.startswith(f"git add --all (and 6 more arguments) failed in {tmp_path}: fatal: "), message
    assert "pathspec 'no-such-file' did not match any files" in message and ":(exclude" not in message
    with pytest.raises(InfrastructureError) as caught:
        run_git(tmp_path, "rev-parse", "--verify", "no-such-branch")
    assert caught.value.message.startswith("git rev-parse --verify no-such-branch failed in"), caught.value.message


def test_a_folder_that_is_gone_is_named_not_taken_for_git_missing(tmp_path: Path) -> None:
    """A repository moved away under an execution's record: every git command there said "git is not installed
    here" (Python raises the same error for a missing working directory as for a missing program)."""
    with pytest.raises(InfrastructureError) as caught:
        run_git(tmp_path / "moved-away", "status")
    assert caught.value.message == f"git cannot run in {tmp_path / 'moved-away'}: there is no such folder"
    assert "moved or removed" in (caught.value.hint or "")


def test_a_git_command_past_its_time_limit_says_so_and_what_may_be_slow(tmp_path: Path) -> None:
    """A checkout longer than the limit (a large monorepo, a git-lfs filter) said "could not run: ... check that the
    repository is readable and the disk not full"."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(InfrastructureError) as caught:
        run_git(tmp_path, "-c", "alias.nap=!sleep 5", "nap", timeout_s=0.3)
    assert "did not finish within 0.3s" in caught.value.message
    assert "git-lfs" in caught.value.hint and "disk not full" not in caught.value.hint


def test_execution_gives_git_commands_that_write_a_whole_tree_longer() -> None:
    from wfqueue.execute import worktree

    assert worktree._subcommand(("-c", "user.name=x", "-c", "commit.gpgsign=false", "merge", "--no-ff")) == "merge"
    assert worktree._subcommand(("worktree", "add", "--quiet")) == "worktree"
    assert worktree._subcommand(("rev-parse", "HEAD")) not in worktree._WRITES_THE_TREE
