"""The safety rule checked before a plan runs: the repository is git, has a commit, and its working tree
is clean. Execution starts its branches at HEAD and never touches the user's branch or files, so an
uncommitted change would silently be left out of every task's worktree: refuse instead, naming the files.
For the same reason every file the plan modifies or deletes must be tracked by git (not ignored).

Only reads: ``git rev-parse``, ``git status`` and ``git ls-files``. Changes under ``.workflow/`` (the plans
themselves, the queue's files) do not count: planning writes them. A branch named ``wfqueue`` (or
``wfqueue/tasks``) is refused too: git could make none of the execution's branches below it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

from wfqueue.errors import UnsafeRepositoryError
from wfqueue.execute.merge import BRANCH_FOLDERS
from wfqueue.gitcmd import gitlinks, is_bare_repository, run_git
from wfqueue.sessions import WORKFLOW_DIR

GIT_TIMEOUT_S = 30.0
SHOWN_DIRTY = 30  # files named in the message; the error carries them all


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Git for the checks made before anything runs: git missing is bad input here, its failures the caller's."""
    return run_git(repo, *args, check=False, timeout_s=GIT_TIMEOUT_S, error=UnsafeRepositoryError,
                   needed_for="execution works on git branches")


def parse_porcelain(output: str) -> list[str]:
    """``git status --porcelain=v1 -z`` -> one ``XY path`` line per changed or untracked path."""
    entries = output.split("\0")
    lines: list[str] = []
    skip = False
    for entry in entries:
        if skip:  # the source path of a rename or copy follows its entry
            skip = False
            continue
        if len(entry) < 4:
            continue
        lines.append(entry)
        skip = entry[0] in "RC"
    return lines


def checked_in(repo: Path, path: Path) -> bool:
    """Whether git tracks ``path`` (a file, or any file of a folder) in the working tree of ``repo``, outside its
    ``.workflow/``: a file the user's checkout holds, which execution never writes. False where git cannot say
    (no repository there any more)."""
    if not repo.is_dir():
        return False
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return False
    root, target = Path(top.stdout.strip()).resolve(), path.resolve()
    if not target.is_relative_to(root) or target.is_relative_to(repo.resolve() / WORKFLOW_DIR):
        return False
    listed = _git(root, "--literal-pathspecs", "ls-files", "-z", "--", str(target.relative_to(root)))
    return listed.returncode == 0 and bool(listed.stdout.strip("\0"))


def refuse_bare(repo: Path) -> None:
    """A bare repository has no working tree to check a plan's files against, nor to make worktrees from: said
    as such (it read as files missing, or as no git repository at all)."""
    if repo.is_dir() and is_bare_repository(repo):
        raise UnsafeRepositoryError(f"{repo} is a bare git repository: execution needs a working tree",
                                    hint=f"clone it (`git clone {repo} DIR`) and execute the plan there with "
                                         "--repo DIR")


def dirty_files(repo: Path) -> list[str]:
    """Changed, staged and untracked paths under ``repo`` (``XY path``, relative to the git top level), outside
    ``repo/.workflow/``."""
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise UnsafeRepositoryError(f"{repo} is not a git repository; execution works on git branches",
                                    hint="run `git init` and commit your files, then run the command again")
    root = Path(top.stdout.strip())
    if _git(root, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
        raise UnsafeRepositoryError(f"{root} has no commit yet; execution starts its branches at HEAD",
                                    hint="commit your files first (git add -A && git commit)")
    # Pathspecs are relative to the repository folder: a plan for one project of a larger git repository
    # needs that project clean, not the whole checkout.
    # --no-optional-locks: a plain `git status` may rewrite .git/index to refresh its stat cache; this
    # check must leave the repository byte for byte as it was.
    status = _git(repo, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--", ".",
                  f":(exclude){WORKFLOW_DIR}")
    if status.returncode != 0:
        raise UnsafeRepositoryError(f"git status failed in {root}: {status.stderr.strip()}",
                                    hint="fix the repository so that `git status` works")
    return parse_porcelain(status.stdout)


def changed_submodules(repo: Path, dirty: list[str]) -> list[str]:
    """The submodules (gitlinks in the index) among ``dirty`` (dirty_files' lines, whose paths are relative
    to the top of the repository), by their absolute paths."""
    paths = [line[3:] for line in dirty if line[:2] != "??"]
    top = _git(repo, "rev-parse", "--show-toplevel").stdout.strip() if paths else ""
    # Absolute: the hint's `git -C` is run from wherever the user is (a --repo elsewhere, a project in a subfolder).
    # Only a hint depends on it: none where git cannot say.
    return [str(Path(top) / module) for module in gitlinks(Path(top), paths)] if top else []


def untracked(repo: Path, paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to ``repo``) that git does not track: ignored, or never added."""
    if not paths:
        return []
    listed = _git(repo, "--literal-pathspecs", "ls-files", "-z", "--", *paths)
    if listed.returncode != 0:
        raise UnsafeRepositoryError(f"git ls-files failed in {repo}: {listed.stderr.strip()}",
                                    hint="fix the repository so that `git ls-files` works")
    tracked = set(listed.stdout.split("\0"))
    return [p for p in paths if p not in tracked]


def ignored(repo: Path, paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to ``repo``, not tracked) that git ignores (.gitignore, info/exclude, the
    global excludes file): a task's commit would leave them out."""
    if not paths:
        return []
    # One path a line (-z needs --stdin), unquoted; a name git would still quote (a newline, a backslash) is not
    # matched, and its task then says it changed nothing rather than this.
    found = _git(repo, "-c", "core.quotePath=false", "check-ignore", "--", *paths)
    if found.returncode not in (0, 1):  # 1: none is ignored
        raise UnsafeRepositoryError(f"git check-ignore failed in {repo}: {found.stderr.strip()}",
                                    hint="fix the repository so that `git check-ignore` works")
    said = set(found.stdout.splitlines())
    return [p for p in paths if p in said]


def _listing(paths: list[str], separator: str) -> str:
    more = len(paths) - SHOWN_DIRTY
    return separator.join(paths[:SHOWN_DIRTY]) + (f"{separator}... and {more} more" if more > 0 else "")


def check_clean_repository(repo: Path, existing_files: list[str] | None = None,
                           new_files: list[str] | None = None) -> None:
    """Refuse (exit 2) unless ``repo`` is a git repository with a commit and a clean working tree in which git
    tracks ``existing_files`` (the files the plan modifies or deletes: a task's worktree starts at HEAD) and
    ignores none of ``new_files`` (those it creates: a commit would leave them out), and can hold the
    execution's branches."""
    dirty = dirty_files(repo)
    if dirty:
        lines = _listing(dirty, "\n  ")
        modules = changed_submodules(repo, dirty)
        # The superproject's stash leaves a submodule's own changes (and its checked-out commit) where they are.
        inside = (f"; in a submodule ({_listing(modules, ', ')}), commit or stash inside it (`git -C "
                  f"{modules[0]} stash --include-untracked`), or record its new commit here (`git add "
                  f"{modules[0]}` and commit)" if modules else "")
        raise UnsafeRepositoryError(
            f"the working tree of {repo} is not clean ({len(dirty)} path{'s' if len(dirty) != 1 else ''} changed "
            f"or untracked):\n  {lines}",
            hint=f"commit or stash them (`git stash --include-untracked`){inside}, then run the command again: "
                 "execution works from HEAD and never touches your branch or working tree",
            dirty=dirty,
        )
    missing = untracked(repo, list(dict.fromkeys(existing_files or [])))
    top = _git(repo, "rev-parse", "--show-toplevel").stdout.strip() if missing else ""
    if missing and Path(top).resolve() != repo.resolve() and _git(repo, "check-ignore", "-q", ".").returncode == 0:
        # A folder inside another project's checkout that ignores it (a copy under .demo/, a vendored tree):
        # committing there would put it in that other project.
        raise UnsafeRepositoryError(
            f"{repo} is not a git repository of its own: it lies inside {top}, whose git ignores it",
            hint=f"make it one (`git init`, `git add -A` and `git commit` in {repo}), then run the command again",
            dirty=missing,
        )
    if missing:
        raise UnsafeRepositoryError(
            f"git does not track {len(missing)} file{'s' if len(missing) != 1 else ''} the plan changes "
            f"(ignored, or never added): {_listing(missing, ', ')}",
            hint="commit them (or stop ignoring them): execution works from HEAD, where they are not",
            dirty=missing,
        )
    if _git(repo, "config", "--bool", "core.sparseCheckout").stdout.strip() == "true" and _git(
            repo, "config", "--bool", "extensions.worktreeConfig").stdout.strip() != "true":
        # Execution's worktrees need every file; turning sparse checkout off in one of them would turn it off for
        # this checkout too, where the setting lives.
        raise UnsafeRepositoryError(
            f"{repo} is a sparse checkout whose setting (core.sparseCheckout in .git/config) every worktree shares; "
            "execution's worktrees need every file",
            hint="re-make the sparse checkout with `git sparse-checkout set ...` (which keeps the setting to this "
                 "checkout), or execute from a full clone")
    left_out = ignored(repo, list(dict.fromkeys(new_files or [])))
    if left_out:
        raise UnsafeRepositoryError(
            f"git ignores {len(left_out)} file{'s' if len(left_out) != 1 else ''} the plan creates: "
            f"{_listing(left_out, ', ')}; their tasks' commits would leave them out",
            hint="stop ignoring them (see `git check-ignore -v PATH`), or change the plan to create files git keeps",
            dirty=left_out,
        )
    for name in BRANCH_FOLDERS:  # git cannot hold a branch `wfqueue` beside the branch `wfqueue/EXEC-...`
        if _git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}").returncode == 0:
            raise UnsafeRepositoryError(
                f"the branch {name} keeps git from making the execution's branches below it ({name}/...)",
                hint=f"rename it (`git branch -m {name} NEW-NAME`), then run the command again")


class CheckoutState(NamedTuple):
    """What an execution must leave alone in the user's checkout: its HEAD, its branch and its changed files."""

    head: str
    branch: str
    changed: frozenset[str]


def checkout_state(repo: Path) -> CheckoutState:
    branch = _git(repo, "symbolic-ref", "--quiet", "HEAD").stdout.strip() or "(detached)"
    return CheckoutState(head=_git(repo, "rev-parse", "HEAD").stdout.strip(), branch=branch,
                         changed=frozenset(dirty_files(repo)))


def checkout_changes(before: CheckoutState, after: CheckoutState) -> list[str]:
    """What changed between two looks at the user's checkout, as a person reads it. Pure."""
    changes = []
    if after.branch != before.branch:
        changes.append(f"the checked-out branch went from {before.branch} to {after.branch}")
    if after.head != before.head:
        changes.append(f"HEAD moved from {before.head[:12]} to {after.head[:12]}")
    changes += [f"{entry} (now changed)" for entry in sorted(after.changed - before.changed)]
    return changes
