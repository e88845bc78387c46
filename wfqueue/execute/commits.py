"""A task's commit: made in its worktree (every change but a test run's byproducts, hooks and signing off),
its message (``type(scope): title`` with the trailers that find it again), and found again on a redelivery.
Git goes through the worktree module's one helper."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from wfqueue.execute.model import ExecTask
from wfqueue.execute.worktree import EXCLUDE_BYPRODUCTS, git

IDENTITY = ("wfqueue", "wfqueue@localhost")
# A conventional commit type for each task type; anything else is a chore.
COMMIT_TYPES = {"feature": "feat", "enhancement": "feat", "fix": "fix", "bugfix": "fix", "refactor": "refactor",
                "testing": "test", "test-gen": "test", "test-fix": "test", "docs": "docs"}


def find_task_commit(repo: Path, branch: str, base: str, exec_id: str, task_id: str, attempt: int) -> str | None:
    """The commit of this task's attempt on ``branch`` above ``base``, if a run already made it."""
    if git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode != 0:
        return None
    fmt = "%H%x1f%(trailers:key=Task,valueonly,separator=%x1d)%x1f%(trailers:key=Exec,valueonly,separator=%x1d)" \
          "%x1f%(trailers:key=Attempt,valueonly,separator=%x1d)%x1e"
    listed = git(repo, "log", f"--format={fmt}", f"{base}..refs/heads/{branch}", check=False)
    if listed.returncode != 0:
        return None
    for record in listed.stdout.split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) != 4:
            continue
        sha, tasks, execs, attempts = fields
        if (task_id in tasks.split("\x1d") and exec_id in execs.split("\x1d")
                and str(attempt) in attempts.split("\x1d")):
            return sha.strip()
    return None


def commit_type(task: ExecTask) -> str:
    return COMMIT_TYPES.get(task.type or "", "chore")


def commit_scope(task: ExecTask) -> str:
    """The task's main package: the folder of its first file (the file's stem when it sits at the top)."""
    files = task.files.modify or task.files.create or task.files.delete
    if not files:
        return ""
    parts = Path(files[0]).parts
    name = parts[-2] if len(parts) > 1 and parts[-2] not in ("src", "lib") else Path(parts[-1]).stem
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


def commit_message(task: ExecTask, exec_id: str, attempt: int) -> str:
    """``type(scope): title``, the task's description, and the trailers that find the commit again. Pure."""
    scope = commit_scope(task)
    title = " ".join(task.title.split()).rstrip(".")
    head = f"{commit_type(task)}({scope}): {title}" if scope else f"{commit_type(task)}: {title}"
    body = task.description.strip()
    trailers = f"Task: {task.id}\nExec: {exec_id}\nAttempt: {attempt}"
    return f"{head}\n\n{body}\n\n{trailers}\n" if body else f"{head}\n\n{trailers}\n"


def identity_options(worktree: Path) -> list[str]:
    """``-c user.name/user.email`` only when git has no identity for this repository (a bare worker host)."""
    name = git(worktree, "config", "user.name", check=False).stdout.strip()
    email = git(worktree, "config", "user.email", check=False).stdout.strip()
    options: list[str] = []
    if not name:
        options += ["-c", f"user.name={IDENTITY[0]}"]
    if not email:
        options += ["-c", f"user.email={IDENTITY[1]}"]
    return options


def commit_all(worktree: Path, message: str) -> str | None:
    """Commit every change in the worktree (byproducts left out); the new commit, or None when nothing changed.

    Hooks are skipped (:data:`NO_HOOKS`) and signing is off: a worker cannot answer a passphrase prompt, and the
    task's own verification and the gate are the checks a change passes."""
    git(worktree, "add", "--all", "--", ".", *EXCLUDE_BYPRODUCTS)
    if git(worktree, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return None
    # The message goes through a file in the worktree's own git directory (git reads no stdin here).
    git_dir = Path(git(worktree, "rev-parse", "--absolute-git-dir").stdout.strip())
    message_file = git_dir / "WFQUEUE_COMMIT_MSG"
    message_file.write_text(message, encoding="utf-8")
    try:
        git(worktree, *identity_options(worktree), "-c", "commit.gpgsign=false", "commit", "--quiet",
             "--no-verify", "--cleanup=verbatim", "-F", str(message_file))
    finally:
        message_file.unlink(missing_ok=True)
    return git(worktree, "rev-parse", "HEAD").stdout.strip()


def files_of_commit(repo: Path, commit: str, prefix: str = "") -> list[str]:
    """Paths ``commit`` added, changed or deleted against its first parent, relative to ``prefix`` (a path outside
    it climbs out with ``..``, so a check against the plan's files sees it)."""
    listed = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "-z", "--no-renames", f"{commit}^",
                  commit).stdout
    paths = [p for p in listed.split("\0") if p]
    return [posixpath.relpath(p, prefix) for p in paths] if prefix else paths
