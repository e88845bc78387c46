"""A task's worktree in a real git repository: made at the base, committed, found again, removed or kept."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.execute_support import EXEC_ID, SUB, SUB_TEST, cache, git, make_repo, snapshot, task
from wfqueue.execute import worktree
from wfqueue.execute.commits import commit_all, commit_message, files_of_commit, find_task_commit
from wfqueue.execute.worktree import (
    changed_paths,
    finish_worktree,
    prepare_worktree,
    worktree_path,
)
from wfqueue.execute.worktree import (
    git as wt_git,
)

BRANCH = f"wfqueue/{EXEC_ID}/T1"


def _worktree(repo: Path, attempt: int = 1) -> tuple[Path, str]:
    base = git(repo, "rev-parse", "HEAD")
    path = prepare_worktree(repo, worktree_path(repo, cache(), EXEC_ID, "T1", attempt), BRANCH, base)
    return path, base


def test_worktree_lives_in_the_cache_outside_any_git_directory_and_leaves_the_checkout_alone(tmp_path: Path) -> None:
    """Under the repository's git directory, Jest (which ignores every path holding /.git/) found no test of a
    JavaScript project in a task's worktree or the gate's."""
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    path, base = _worktree(repo)
    assert path.is_relative_to(cache() / "worktrees") and not path.is_relative_to(repo)
    assert "/.git/" not in f"{path}/"
    assert git(path, "rev-parse", "HEAD") == base
    assert git(path, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    assert changed_paths(path) == ["calc/ops.py"]
    assert snapshot(repo) == before  # the user's git status, HEAD, branch and files are untouched


def test_commit_has_conventional_message_trailers_and_only_the_change(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    path, base = _worktree(repo)
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    (path / "tests" / "test_sub.py").write_text(SUB_TEST, encoding="utf-8")
    (path / "calc" / "__pycache__").mkdir()
    (path / "calc" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"\0")  # a byproduct, never committed
    commit = commit_all(path, commit_message(task(), EXEC_ID, 1))
    assert commit is not None
    assert sorted(files_of_commit(repo, commit)) == ["calc/ops.py", "tests/test_sub.py"]
    assert git(repo, "log", "-1", "--format=%s", commit) == "feat(calc): Add subtraction"
    assert git(repo, "log", "-1", "--format=%an <%ae>", commit) == "Repo Owner <owner@example.invalid>"
    assert git(repo, "rev-parse", f"{commit}^") == base
    assert find_task_commit(repo, BRANCH, base, EXEC_ID, "T1", 1) == commit
    assert find_task_commit(repo, BRANCH, base, EXEC_ID, "T1", 2) is None  # another attempt
    assert find_task_commit(repo, BRANCH, base, "EXEC-other", "T1", 1) is None
    assert finish_worktree(repo, path) is False
    assert not path.exists() and str(path) not in git(repo, "worktree", "list")
    assert git(repo, "rev-parse", BRANCH) == commit  # the branch keeps the commit for the merge


def test_nothing_to_commit_gives_no_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    path, _ = _worktree(repo)
    assert commit_all(path, commit_message(task(), EXEC_ID, 1)) is None


def test_a_repository_without_identity_commits_as_wfqueue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path)
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-config"))  # a bare worker host
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    path, _ = _worktree(repo)
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    commit = commit_all(path, commit_message(task(), EXEC_ID, 1))
    assert commit is not None
    assert git(repo, "log", "-1", "--format=%an <%ae>", commit) == "wfqueue <wfqueue@localhost>"
    assert git(repo, "config", "--get", "user.name", check=False) == ""  # nothing was configured


def test_a_redelivered_run_keeps_its_attempts_edits_and_a_moved_branch_is_reset(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    path, base = _worktree(repo)
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    assert prepare_worktree(repo, path, BRANCH, base) == path
    assert changed_paths(path) == ["calc/ops.py"]  # the same attempt goes on from its edits
    git(path, "commit", "-qam", "not a task commit")
    prepare_worktree(repo, path, BRANCH, base)  # the branch moved: back to the base, clean
    assert git(path, "rev-parse", "HEAD") == base and changed_paths(path) == []


def test_a_worktree_with_uncommitted_work_is_kept_and_frees_the_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    path, _ = _worktree(repo)
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    assert finish_worktree(repo, path) is True
    assert (path / "calc" / "ops.py").read_text(encoding="utf-8") == SUB
    # Another attempt gets its own folder and the same branch.
    other, _ = _worktree(repo, attempt=2)
    assert other != path and git(other, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert (path / "calc" / "ops.py").read_text(encoding="utf-8") == SUB


def test_a_worktree_whose_branch_was_deleted_under_it_is_removed(tmp_path: Path) -> None:
    """`git update-ref -d` of the branch a worktree has checked out: every file read as uncommitted work, and
    keeping it meant `git checkout --detach`, which fails there ("a branch yet to be born"): an error, and a
    registered worktree nothing removed."""
    repo = make_repo(tmp_path)
    path, _ = _worktree(repo)
    git(repo, "update-ref", "-d", f"refs/heads/{BRANCH}")
    assert finish_worktree(repo, path) is False
    assert not path.exists() and str(path) not in git(repo, "worktree", "list", "--porcelain")


def test_a_worktree_removed_by_hand_is_made_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    path, base = _worktree(repo)
    subprocess.run(["rm", "-rf", str(path)], check=True)
    assert prepare_worktree(repo, path, BRANCH, base) == path
    assert git(path, "rev-parse", "HEAD") == base


def test_a_worktree_git_never_finished_adding_is_made_again_and_can_be_removed(tmp_path: Path) -> None:
    """A Ctrl-C inside `git worktree add` leaves the worktree locked ("initializing"), half checked out, with the
    task's branch on it: the same attempt reused it, could not remove it, and every later attempt failed because
    the branch was checked out there. Every run of the execution ended with exit 3."""
    repo = make_repo(tmp_path)
    path, base = _worktree(repo)
    git(repo, "worktree", "lock", "--reason", "initializing", str(path))
    (path / "calc" / "ops.py").unlink()  # the checkout it never finished
    assert prepare_worktree(repo, path, BRANCH, base) == path  # the same attempt, sent again
    assert (path / "calc" / "ops.py").is_file() and changed_paths(path) == []
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")
    assert finish_worktree(repo, path) is False and not path.exists()

    path, _ = _worktree(repo)  # half-made again, found at the end of the run
    git(repo, "worktree", "lock", "--reason", "initializing", str(path))
    (path / "calc" / "ops.py").unlink()
    assert finish_worktree(repo, path) is False and not path.exists()
    other, _ = _worktree(repo, attempt=2)  # the next attempt takes the branch: no worktree holds it any more
    assert git(other, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")  # a finished add leaves no lock

    # A user's own lock on a worktree holding work (what `git worktree lock` is for) is respected: kept whole.
    (other / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    git(repo, "worktree", "lock", "--reason", "keeping this", str(other))
    assert finish_worktree(repo, other) is True and (other / "calc" / "ops.py").read_text() == SUB


def test_git_configuration_from_the_environment_is_kept_beside_the_hooks_being_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks were turned off by replacing GIT_CONFIG_COUNT and its keys: a container's safe.directory given that
    way was lost, and every worktree add failed on the ownership check."""
    repo = make_repo(tmp_path)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.name")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "Container Identity")
    assert wt_git(repo, "config", "user.name").stdout.strip() == "Container Identity"
    assert wt_git(repo, "config", "core.hooksPath").stdout.strip() == os.devnull


def test_what_a_check_killed_with_its_worker_wrote_is_put_back_by_the_next_look(tmp_path: Path) -> None:
    """A verification killed mid-run (its worker SIGKILLed) never put back what it wrote: after the redelivery the
    report it left was committed as the task's, and the task rejected for a file its plan does not name."""
    from wfqueue.execute.worktree import CHECK_MARK, left_as_found

    repo = make_repo(tmp_path)
    path, _ = _worktree(repo)
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")  # the executor's change
    (path / "tests" / "test_sub.py").write_text(SUB_TEST, encoding="utf-8")

    checking = left_as_found(path)
    checking.__enter__()
    (path / "report.xml").write_text("<testsuite/>", encoding="utf-8")  # what the check wrote
    (path / "calc" / "ops.py").write_text("broken by the check\n", encoding="utf-8")
    assert (Path(git(path, "rev-parse", "--absolute-git-dir")) / CHECK_MARK).is_file()
    del checking  # killed: its finally never ran

    assert _worktree(repo)[0] == path  # the redelivered task's worktree, prepared again
    assert not (path / "report.xml").exists()
    assert (path / "calc" / "ops.py").read_text(encoding="utf-8") == SUB
    assert (path / "tests" / "test_sub.py").read_text(encoding="utf-8") == SUB_TEST
    with left_as_found(path):
        pass
    commit = commit_all(path, "feat: sub")
    assert commit is not None and sorted(files_of_commit(repo, commit)) == ["calc/ops.py", "tests/test_sub.py"]


def test_a_users_worktree_whose_folder_is_away_keeps_its_registration_and_index(tmp_path: Path) -> None:
    """The user's own worktree, moved away (or on a disk not mounted), with a change staged in its index: an
    execution ran `git worktree prune` on the whole repository, which deleted its registration and index, and
    `git worktree repair` in the moved folder then failed ("not a git repository"). Only wfqueue's own missing
    worktrees are forgotten (so a branch one held can be checked out again)."""
    repo = make_repo(tmp_path)
    mine = tmp_path / "feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(mine))
    (mine / "calc" / "extra.py").write_text("WIP = 1\n", encoding="utf-8")
    git(mine, "add", "calc/extra.py")
    mine.rename(tmp_path / "feature-moved")

    path, base = _worktree(repo)
    subprocess.run(["rm", "-rf", str(path)], check=True)  # ours, gone: forgotten, and the branch is free again
    assert finish_worktree(repo, path) is False
    assert str(path) not in git(repo, "worktree", "list", "--porcelain")
    again, _ = _worktree(repo, attempt=2)
    assert git(again, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    subprocess.run(["rm", "-rf", str(again)], check=True)
    assert prepare_worktree(repo, again, BRANCH, base) == again

    assert f"worktree {mine}" in git(repo, "worktree", "list", "--porcelain")
    git(tmp_path / "feature-moved", "worktree", "repair")
    assert git(tmp_path / "feature-moved", "diff", "--cached", "--name-only") == "calc/extra.py"


def test_a_kept_worktree_where_the_user_committed_the_work_is_kept_again(tmp_path: Path) -> None:
    """A failed attempt's worktree is kept with its uncommitted work, and named; the user commits that work there
    (on its detached HEAD) to save it. The next look (`execute --continue`) saw a clean worktree and removed it:
    the commit was reachable only through `git fsck`, until garbage collection."""
    repo = make_repo(tmp_path)
    path, _ = _worktree(repo)
    (path / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    assert finish_worktree(repo, path) is True
    git(path, "-c", "user.name=U", "-c", "user.email=u@example.invalid", "commit", "-qam", "save the agent's work")
    saved = git(path, "rev-parse", "HEAD")
    assert finish_worktree(repo, path) is True and git(path, "rev-parse", "HEAD") == saved
    git(repo, "branch", "saved-work", saved)  # once a branch has it, the worktree is wfqueue's to remove
    assert finish_worktree(repo, path) is False and not path.exists()


def test_only_this_hosts_worktrees_whose_folders_are_gone_are_pruned(tmp_path: Path) -> None:
    """With a shared disk, a worktree another host made is registered in the same repository, its folder on that
    host: pruned here as gone, its task there lost its checkout. Told by its path, whatever cache the host had."""
    repo = make_repo(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    key = worktree.worktrees_root(repo, cache()).name
    elsewhere = tmp_path / "cache-b" / "worktrees" / "another-host" / key / EXEC_ID / "T8" / "1"
    host = worktree._safe_name(socket.gethostname())
    gone_here = tmp_path / "cache-a" / "worktrees" / host / key / EXEC_ID / "T9" / "1"
    users_own = tmp_path / "users-own-worktree"
    for path, branch in ((elsewhere, "wfqueue/tasks/x/T8"), (gone_here, "wfqueue/tasks/x/T9"), (users_own, "mine")):
        git(repo, "worktree", "add", "-q", "-b", branch, str(path), base)
        shutil.rmtree(path)
    _worktree(repo)  # a new task worktree: registrations whose folders are gone are pruned first
    listed = git(repo, "worktree", "list", "--porcelain")
    assert f"worktree {elsewhere}" in listed  # another host's: left registered
    assert f"worktree {users_own}" in listed  # the user's: theirs to prune
    assert f"worktree {gone_here}" not in listed  # this host's, removed by hand: forgotten


def test_an_execution_started_before_the_move_goes_on_in_its_worktrees_under_the_git_directory(
        tmp_path: Path) -> None:
    """Its integration branch is checked out under .git/wfqueue-worktrees/: a worktree of it in the cache was
    refused by git ("cannot force update the branch ... checked out at"), on every --continue."""
    from wfqueue.execute.merge import close_integration, integration_branch, leftover_worktrees, open_integration

    repo = make_repo(tmp_path)
    base = git(repo, "rev-parse", "HEAD")
    legacy = repo / ".git" / "wfqueue-worktrees" / EXEC_ID
    git(repo, "worktree", "add", "-q", "-b", integration_branch(EXEC_ID), str(legacy / "integration"), base)
    git(repo, "worktree", "add", "-q", "-b", f"wfqueue/tasks/{EXEC_ID}/T1", str(legacy / "T1" / "1"), base)
    assert open_integration(repo, cache(), EXEC_ID) == legacy / "integration"
    assert worktree_path(repo, cache(), EXEC_ID, "T1", 1) == legacy / "T1" / "1"
    assert close_integration(repo, legacy / "integration") is False
    assert leftover_worktrees(repo, cache(), EXEC_ID) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1 and not legacy.exists()


def test_an_older_executions_integration_worktree_whose_folder_is_gone_does_not_hold_it_back(tmp_path: Path) -> None:
    """Registered under .git/wfqueue-worktrees/, its folder removed: --continue said to `git switch -` in a folder
    that no longer existed."""
    from wfqueue.execute.merge import checked_out_elsewhere, integration_branch, open_integration

    repo = make_repo(tmp_path)
    legacy = repo / ".git" / "wfqueue-worktrees" / EXEC_ID / "integration"
    git(repo, "worktree", "add", "-q", "-b", integration_branch(EXEC_ID), str(legacy), git(repo, "rev-parse", "HEAD"))
    shutil.rmtree(legacy)
    assert checked_out_elsewhere(repo, cache(), EXEC_ID) is None
    opened = open_integration(repo, cache(), EXEC_ID)
    assert opened.is_relative_to(cache()) and git(opened, "symbolic-ref", "HEAD").endswith(integration_branch(EXEC_ID))
