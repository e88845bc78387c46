"""The dependencies a project installs beside its code, linked above an execution's worktrees.

A worktree holds what git tracks, not a project's installed ``node_modules``: Node's module resolution and npm's
``node_modules/.bin`` look for it in every folder above the one they run in, as they found the checkout's when
worktrees were inside the repository. The link sits in the execution's folder, beside its worktrees, where git never
sees it.
"""

from __future__ import annotations

import os
from pathlib import Path

from wfqueue.execute.worktree import git

# Dependency folders a project installs beside its code: linked beside an execution's worktrees.
DEPENDENCY_DIRS = ("node_modules",)


def link_dependencies(repo: Path, folder: Path) -> None:
    """Link the repository's installed dependencies (an ignored ``node_modules`` at its top) into ``folder``, the
    parent of an execution's worktrees: Node and npm look for them in every folder above the one they run in.
    Outside the worktrees, git never sees the links. Nothing when there is none, or the folder is tracked."""
    top = Path(git(repo, "rev-parse", "--show-toplevel", check=False).stdout.strip() or repo)
    for name in DEPENDENCY_DIRS:
        installed, link = top / name, folder / name
        if link.is_symlink() or not installed.is_dir():
            continue
        if git(top, "ls-files", "-z", "--", name, check=False).stdout:
            continue  # tracked: a worktree checks it out itself (untracked, it is ignored: the tree is clean)
        folder.mkdir(parents=True, exist_ok=True)
        staged = folder / f".{name}.{os.getpid()}.link"
        staged.unlink(missing_ok=True)
        staged.symlink_to(installed, target_is_directory=True)
        os.replace(staged, link)  # whole or not at all, also beside another process doing the same


def remove_execution_folder(folder: Path) -> None:
    """Remove an execution's folder once its worktrees are gone: the dependency links first (an empty folder
    of links is still a folder)."""
    for name in DEPENDENCY_DIRS:
        if (folder / name).is_symlink():
            (folder / name).unlink()
    try:
        folder.rmdir()
    except OSError:
        pass  # a worktree kept for its uncommitted work is still in it
