"""The integration branch and its worktree: created at the user's HEAD, task commits merged into it one at a
time (``--no-ff``), and the gate run in it. The user's branch, HEAD, index and files are never touched: the
branch is made with ``git branch`` and everything else happens in the integration worktree, which lives under
the git directory like the task worktrees (wfqueue.execute.worktree)."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from wfqueue.execute.commits import identity_options
from wfqueue.execute.dependency_links import (
    DEPENDENCY_DIRS,
    link_dependencies,
    remove_execution_folder,
    staged_links,
)
from wfqueue.execute.worktree import (
    execution_folder,
    finish_worktree,
    git,
    legacy_execution_folder,
    made_by_wfqueue,
    prepare_worktree,
    worktree_list,
)
from wfqueue.sandboxed_commands import (
    DEFAULT_COMMAND_TIMEOUT_S,
    MISSING_PROGRAM_HINT,
    parse_command,
    program_missing,
    run_command,
)

INTEGRATION_DIR = "integration"


def integration_branch(exec_id: str) -> str:
    return f"wfqueue/{exec_id}"


def task_branch(exec_id: str, task_id: str) -> str:
    """Not ``wfqueue/{exec_id}/{task}``: git cannot hold a branch and branches under it of the same name."""
    return f"wfqueue/tasks/{exec_id}/{task_id}"


# The refs an execution's branches live under (integration_branch, task_branch): a branch of the user's with
# one of these names would keep git from making any branch below it.
BRANCH_FOLDERS = ("wfqueue", "wfqueue/tasks")


def used_exec_ids(repo: Path) -> set[str]:
    """The execution ids that already have a branch (integration or task): a new execution takes another, so
    it never builds on an old execution's merges (its folder may be gone: `.workflow/` is ignored)."""
    listed = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/wfqueue/").stdout.split()
    ids = set()
    for ref in listed:
        parts = ref.removeprefix("refs/heads/wfqueue/").split("/")
        ids.add(parts[1] if parts[0] == "tasks" and len(parts) > 1 else parts[0])
    return ids


def head_of(repo: Path, ref: str = "HEAD") -> str:
    return git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}").stdout.strip()


def claim_branch(repo: Path, branch: str, start: str) -> bool:
    """Make ``branch`` at ``start``, unless it exists: False then. Git checks and makes it in one step (an
    update with the empty old value), so of two executions that chose one id at once (each from its own worktree
    of the repository, whose `.workflow/` folders differ) one gets it and the other takes another id; they shared
    the branch and removed each other's worktrees."""
    for _ in range(2):  # the other may hold the ref's lock while it makes it: look again once it has
        if git(repo, "update-ref", f"refs/heads/{branch}", start, "", check=False).returncode == 0:
            return True
        if branch_exists(repo, branch):
            return False
        time.sleep(0.2)
    git(repo, "update-ref", f"refs/heads/{branch}", start, "")  # failed for another reason: git says which
    return True


def integration_path(repo: Path, cache: Path, exec_id: str) -> Path:
    """The integration worktree: in this host's cache, or under the git directory where an execution started
    before made it (its branch is checked out there: git refuses it a second worktree, even forced)."""
    legacy = legacy_execution_folder(repo, exec_id) / INTEGRATION_DIR
    return legacy if legacy.is_dir() else execution_folder(repo, cache, exec_id) / INTEGRATION_DIR


def open_integration(repo: Path, cache: Path, exec_id: str) -> Path:
    """The integration worktree, on the integration branch at its head (made again if it was removed)."""
    branch = integration_branch(exec_id)
    path = integration_path(repo, cache, exec_id)
    link_dependencies(repo, path.parent)  # the gate runs the project's tests with them
    prepare_worktree(repo, path, branch, head_of(repo, f"refs/heads/{branch}"))
    abort_merge(path)  # a coordinator killed mid-merge left one
    return path


def branch_exists(repo: Path, branch: str) -> bool:
    return git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode == 0


def last_of(repo: Path, commits: list[str]) -> str | None:
    """The newest of ``commits``, one line of history (an execution's merges, each on the one before); None when
    one is no longer in the repository (the branch reset and the repository collected)."""
    listed = git(repo, "rev-list", "--no-walk", "--topo-order", *commits, check=False)
    return listed.stdout.split()[0] if listed.returncode == 0 and listed.stdout.split() else None


def checkouts(repo: Path) -> dict[str, Path]:
    """Each branch checked out in a worktree of the repository, and where (git lets a branch be checked out in
    one place only)."""
    return {line.removeprefix("branch refs/heads/"): where for where, lines in worktree_list(repo)
            for line in lines if line.startswith("branch refs/heads/")}


def checked_out_elsewhere(repo: Path, cache: Path, exec_id: str) -> Path | None:
    """The worktree other than the execution's own where its integration branch is checked out, or None."""
    where = checkouts(repo).get(integration_branch(exec_id))
    if where is None or where.resolve() == integration_path(repo, cache, exec_id).resolve():
        return None
    # Its own, made before (under the git directory) or in another cache folder of this host, its folder gone since:
    # pruned when the integration worktree is made again.
    gone_here = not where.exists() and made_by_wfqueue(repo, where, exec_id=exec_id, here=True)
    return None if gone_here else where


def close_integration(repo: Path, path: Path) -> bool:
    """Remove the integration worktree; True when it was kept because it holds uncommitted work."""
    abort_merge(path)
    return finish_worktree(repo, path)


def abort_merge(worktree: Path) -> None:
    if worktree.is_dir() and git(worktree, "rev-parse", "--verify", "--quiet", "MERGE_HEAD",
                                  check=False).returncode == 0:
        git(worktree, "merge", "--abort", check=False)


def commit_changes(repo: Path, commit: str, prefix: str = "") -> list[tuple[str, str]]:
    """``(status, path)`` for each path ``commit`` changes against its parent (relative to ``prefix``)."""
    listed = git(repo, "diff-tree", "--no-commit-id", "--name-status", "-r", "-z", "--no-renames", f"{commit}^",
                  commit).stdout.split("\0")
    pairs = [(listed[i], listed[i + 1]) for i in range(0, len(listed) - 1, 2) if listed[i]]
    if not prefix:
        return pairs
    return [(status, path[len(prefix):] if path.startswith(prefix) else f"../{path}") for status, path in pairs]


def is_merged(worktree: Path, commit: str) -> bool:
    """Whether ``commit`` is already in the integration branch (a continued execution merged it before)."""
    return git(worktree, "merge-base", "--is-ancestor", commit, "HEAD", check=False).returncode == 0


class MergeResult(BaseModel):
    merged: bool
    commit: str | None = None  # the merge commit
    conflicts: list[str] = []
    error: str = ""


def merge_task(worktree: Path, commit: str, task_id: str, exec_id: str, title: str) -> MergeResult:
    """Merge ``commit`` into the integration branch checked out in ``worktree`` (``--no-ff``); a conflict is
    aborted, leaving the branch as it was."""
    if is_merged(worktree, commit):
        return MergeResult(merged=True, commit=head_of(worktree))
    message = f"Merge {task_id}: {' '.join(title.split())}\n\nTask: {task_id}\nExec: {exec_id}\n"
    # The task's commit is wfqueue's own, unsigned on purpose (commit.gpgsign=false): a repository's
    # merge.verifySignatures would refuse every one of them.
    done = git(worktree, *identity_options(worktree), "-c", "commit.gpgsign=false", "merge", "--no-ff",
                "--no-verify", "--no-verify-signatures", "-m", message, commit, check=False)
    if done.returncode == 0:
        return MergeResult(merged=True, commit=head_of(worktree))
    conflicts = [p for p in git(worktree, "diff", "--name-only", "--diff-filter=U", check=False).stdout.splitlines()
                 if p]
    abort_merge(worktree)
    return MergeResult(merged=False, conflicts=conflicts, error=(done.stdout + done.stderr).strip()[-2000:])


class GateResult(BaseModel):
    passed: bool
    failed_command: str | None = None
    timed_out: bool = False  # the failed command was stopped at the time limit
    output: str = ""


def run_gate(workdir: Path, commands: list[str], timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S) -> GateResult:
    """Each gate command through the sandboxed runner inside the integration worktree; the first red one stops."""
    for command in commands:
        result = run_command(parse_command(command), workdir, timeout_s)
        if result.timed_out:
            stopped = f"[stopped: it ran for {timeout_s:g}s, WFQUEUE_EXECUTE_CHECK_TIMEOUT_S]"
            return GateResult(passed=False, failed_command=command, timed_out=True,
                              output=f"{result.output[-4000:]}\n{stopped}")
        if result.exit_code != 0:
            # A program not found is no test failing: say why it may be missing here (the reason the runner gives
            # for its own program is in its output already).
            missing = f"\n[a program it runs was not found: {MISSING_PROGRAM_HINT}]" if program_missing(result) \
                and not result.missing_program else ""
            return GateResult(passed=False, failed_command=command, output=result.output[-4000:] + missing)
    return GateResult(passed=True)


def leftover_worktrees(repo: Path, cache: Path, exec_id: str) -> list[Path]:
    """Remove what is left of the execution's task worktrees on this host (and under the git directory, where an
    execution started before made them); those holding uncommitted work are kept and returned."""
    kept: list[Path] = []
    for root in (execution_folder(repo, cache, exec_id), legacy_execution_folder(repo, exec_id)):
        if not root.is_dir():
            continue
        for task_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                               and p.name != INTEGRATION_DIR and p.name not in DEPENDENCY_DIRS
                               and not staged_links(p.name)):
            for attempt in sorted(p for p in task_dir.iterdir() if p.is_dir() and not p.is_symlink()):
                if finish_worktree(repo, attempt):
                    kept.append(attempt)
        remove_execution_folder(root)
    return kept
