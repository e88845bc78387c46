"""The dependencies a project installs beside its code, linked above an execution's worktrees.

A worktree holds what git tracks, not a project's installed ``node_modules``: Node's module resolution and npm's
``node_modules/.bin`` look for it in every folder above the one they run in, as they found the checkout's when
worktrees were inside the repository. The links sit in the execution's folder, beside its worktrees, where git
never sees them.

The folder is the execution's own, holding one link per installed package: tools write their caches at the top of
``node_modules`` (Vite's ``.vite``, Babel's and webpack's ``.cache``), and through a link to the whole folder they
wrote into the user's checkout, every task at once (the execution's tasks share the execution's caches). The links
are made once, by the execution's first task on a host: a package installed later is not among them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from wfqueue.execute.worktree import git

# Dependency folders a project installs beside its code: linked beside an execution's worktrees.
DEPENDENCY_DIRS = ("node_modules",)
# The folder of links being made, renamed to node_modules once whole.
STAGED_SUFFIX = ".links"
# Entries of an installed node_modules that are tools' caches or lock files, not packages: not linked, so the
# execution's tools make their own.
_NOT_PACKAGES = frozenset({".cache", ".vite", ".vite-temp", ".package-lock.json", ".yarn-state.yml",
                           ".modules.yaml", ".pnpm-debug.log"})


def link_dependencies(repo: Path, folder: Path) -> None:
    """Give ``folder``, the parent of an execution's worktrees, a ``node_modules`` of links to each package the
    repository installed (an ignored ``node_modules`` at its top): Node and npm look for them in every folder above
    the one they run in. Outside the worktrees, git never sees them. Nothing when there is none, or it is tracked."""
    top = Path(git(repo, "rev-parse", "--show-toplevel", check=False).stdout.strip() or repo)
    for name in DEPENDENCY_DIRS:
        installed, linked = top / name, folder / name
        if linked.exists() or linked.is_symlink() or not installed.is_dir():
            continue
        if git(top, "ls-files", "-z", "--", name, check=False).stdout:
            continue  # tracked: a worktree checks it out itself (untracked, it is ignored: the tree is clean)
        folder.mkdir(parents=True, exist_ok=True)
        # A name of its own: the tasks of a threads pool share a process, and start at once.
        staged = Path(tempfile.mkdtemp(dir=folder, prefix=f".{name}.", suffix=STAGED_SUFFIX))
        try:
            for entry in os.scandir(installed):
                if entry.name not in _NOT_PACKAGES:  # a package, a scope (@types) or .bin: linked as it is
                    (staged / entry.name).symlink_to(Path(entry.path), target_is_directory=entry.is_dir())
            staged.rename(linked)  # whole or not at all
        except OSError:
            if not linked.is_dir():  # not another task's, made first beside this one
                raise
        finally:
            shutil.rmtree(staged, ignore_errors=True)  # gone once renamed; else what was left of it


def staged_links(name: str) -> bool:
    """Whether ``name``, in an execution's folder, is a folder of links being made (or left by a process killed
    while it made them): no task's folder."""
    return name.startswith(".") and name.endswith(STAGED_SUFFIX)


def remove_execution_folder(folder: Path) -> None:
    """Remove an execution's folder once its worktrees are gone: its dependency links first (the links, and what
    tools wrote beside them; never what they point to)."""
    for name in DEPENDENCY_DIRS:
        linked = folder / name
        if linked.is_symlink():  # made by an earlier version: a link to the whole folder
            linked.unlink()
        elif linked.is_dir():
            shutil.rmtree(linked)  # removes links as links: the user's packages are not followed
    for left in folder.glob(f".*{STAGED_SUFFIX}") if folder.is_dir() else []:
        if left.is_dir() and not left.is_symlink():
            shutil.rmtree(left)
    try:
        folder.rmdir()
    except OSError:
        pass  # a worktree kept for its uncommitted work is still in it
