"""What an executor leaves in the user's repository through its worktree, taken back after each run.

A worktree shares its repository's refs: a coding agent's ``git stash`` in a task's worktree pushed an entry onto
the user's own stash list (a later ``git stash pop`` in their checkout applied the agent's edit there), and its
``git checkout -b fix-x`` left the branch ``fix-x`` in their repository once wfqueue took the run's commits back.
Only what the worktree's own records tie to it is removed: a stash entry made on the task's branch (its message
says "On wfqueue/tasks/..."), and a branch that did not exist before the run and that the worktree checked out
(its HEAD's reflog says so). A tag has no such record: it is named in the task's log, and left.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from wfqueue.execute.worktree import git


class RefsBefore(NamedTuple):
    """The repository's branches and tags, and the length of the worktree's HEAD reflog, before a run."""

    refs: frozenset[str]
    reflog_entries: int


def _refs(worktree: Path) -> frozenset[str]:
    listed = git(worktree, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags", check=False)
    return frozenset(listed.stdout.split())


def _reflog(worktree: Path) -> list[str]:
    """The worktree's HEAD reflog subjects, newest first (its own: each worktree keeps one)."""
    return git(worktree, "reflog", "show", "--format=%gs", "HEAD", check=False).stdout.splitlines()


def before_run(worktree: Path) -> RefsBefore:
    return RefsBefore(_refs(worktree), len(_reflog(worktree)))


_CHECKOUT = re.compile(r"^checkout: moving from .+ to (.+)$")


def take_back_refs(worktree: Path, branch: str, before: RefsBefore) -> list[str]:
    """Remove the stash entries and branches the run made (module docstring); what was removed or left, said."""
    said: list[str] = []
    new = _refs(worktree) - before.refs
    entries = _reflog(worktree)
    checked_out = {match.group(1) for subject in entries[:max(0, len(entries) - before.reflog_entries)]
                   if (match := _CHECKOUT.match(subject))}
    # Branches only this worktree had: the task's, and those the run made and checked out here.
    own = {branch} | {name for name in checked_out if f"refs/heads/{name}" in new}
    stashed = git(worktree, "stash", "list", "--format=%gd%x1f%H%x1f%gs", check=False).stdout.splitlines()
    for line in reversed(stashed):  # the oldest first: dropping one renumbers only those older than it
        ref, commit, subject = [*line.split("\x1f"), "", ""][:3]
        ours = any(subject.startswith((f"WIP on {name}:", f"On {name}:")) for name in own)
        # The list is the repository's: another task's agent, or the user, may have stashed since it was read, and
        # the entry at that place be theirs. Checked again just before it is dropped (git drops by place only, so a
        # stash made between the two commands can still move it: a window of milliseconds, not of the whole run).
        still = ours and git(worktree, "rev-parse", "--verify", "--quiet", ref, check=False).stdout.strip() == commit
        if still and git(worktree, "stash", "drop", "--quiet", ref, check=False).returncode == 0:
            said.append(f"dropped the stash entry the executor made ({commit[:12]}: {subject}) from the "
                        "repository's stash list")
    for ref in sorted(new):
        name = ref.removeprefix("refs/heads/")
        if ref.startswith("refs/heads/") and name in checked_out and not name.startswith("wfqueue/"):
            target = git(worktree, "rev-parse", "--verify", "--quiet", ref, check=False).stdout.strip()
            if target and git(worktree, "update-ref", "-d", ref, target, check=False).returncode == 0:
                said.append(f"deleted the branch {name} the executor made in its worktree (at {target[:12]})")
        elif ref.startswith("refs/tags/"):
            said.append(f"the tag {ref.removeprefix('refs/tags/')} appeared while the executor ran, and is left "
                        "(delete it with `git tag -d` if the executor made it)")
    return said
