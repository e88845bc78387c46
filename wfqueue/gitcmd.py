"""The one way wfqueue runs git: no prompt, no inherited repository location, errors that say what to do.

Execution (worktrees, merges, the clean-tree check) and the repository's
transport to workers (pins, bundles, checkouts) all run git through
:func:`run_git`; each names why it needs git and what to check when a command
fails, and the error class that fits where it runs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from wfqueue.errors import InfrastructureError, WfqueueError

# Set by a git hook that runs wfqueue, they would point every command at the hook's repository.
LOCATION_VARIABLES = frozenset({"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
                                "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX"})
DEFAULT_TIMEOUT_S = 120.0
# The subject of the commit that carries a working tree's uncommitted changes to workers without the shared
# disk (wfqueue.transport.repo); the planner's reading of history leaves it out (wfqueue.analysis.history).
SNAPSHOT_SUBJECT = "wfqueue: uncommitted changes on top of"


def run_git(cwd: Path, *args: str, check: bool = True, env: Mapping[str, str] | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S, error: type[WfqueueError] = InfrastructureError,
            needed_for: str = "wfqueue works on git repositories",
            install_hint: str = "install git, then run the command again",
            failure_hint: str = "check the repository with `git status`",
            errors: str = "strict") -> subprocess.CompletedProcess[str]:
    """Run git in ``cwd`` and return what it did. Raises ``error`` when git is missing or cannot run
    (``needed_for`` says why it is needed), and, with ``check``, when the command fails (quoting git's
    message, with ``failure_hint``). ``env`` adds variables (e.g. ``GIT_INDEX_FILE``) to this process's
    environment, less any repository location it inherited. Git never prompts: a worker has nobody to answer.
    ``errors`` is how output that is not UTF-8 is decoded (``surrogateescape`` for file names, which may be
    any bytes)."""
    inherited = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, errors=errors, timeout=timeout_s,
                              check=False, stdin=subprocess.DEVNULL,
                              env={**inherited, "GIT_TERMINAL_PROMPT": "0", **(env or {})})
    except FileNotFoundError:
        if not Path(cwd).is_dir():  # the same error as a missing program
            raise error(f"git cannot run in {cwd}: there is no such folder",
                        hint="it was moved or removed; check the path") from None
        raise error(f"git is not installed here, and {needed_for}", hint=install_hint) from None
    except subprocess.TimeoutExpired:
        raise error(f"{_shown(args)} did not finish within {timeout_s:g}s in {cwd}",
                    hint="a checkout that large, or a filter that slow (git-lfs, git-crypt), needs longer: run the "
                         "same git command in the repository to see what it waits for; then run the command "
                         "again") from None
    except OSError as exc:
        raise error(f"git {args[0] if args else ''} could not run in {cwd}: {exc}",
                    hint="check that the repository is readable and the disk not full") from None
    if check and done.returncode != 0:
        raise error(f"{_shown(args)} failed in {cwd}: {done.stderr.strip() or done.stdout.strip()}",
                    hint=failure_hint)
    return done


def _shown(args: tuple[str, ...], limit: int = 80) -> str:
    """The command as an error quotes it: its arguments up to the pathspecs (`--`) or ``limit`` characters, so
    that git's own message, after it, is what the reader sees (a `git add` of twelve exclusions read as noise)."""
    shown: list[str] = []
    for arg in args:
        if arg == "--" or len(" ".join(["git", *shown, arg])) > limit:
            rest = len(args) - len(shown)
            return " ".join(["git", *shown]) + f" (and {rest} more argument{'s' if rest != 1 else ''})"
        shown.append(arg)
    return " ".join(["git", *shown])


def tracked_files(repo: Path) -> frozenset[str]:
    """The files git tracks under ``repo`` (relative to it; those a sparse checkout leaves out of the folder
    too); none where git cannot tell (not a repository, no git)."""
    try:
        listed = run_git(repo, "-c", "core.quotePath=false", "ls-files", "-z", check=False, errors="surrogateescape")
    except WfqueueError:
        return frozenset()
    return frozenset(p for p in listed.stdout.split("\0") if p) if listed.returncode == 0 else frozenset()


def gitlinks(cwd: Path, paths: Sequence[str] = ()) -> list[str]:
    """The submodules (gitlinks in the index) under ``cwd``, among ``paths`` when given, relative to ``cwd``; none
    where git cannot list them."""
    try:
        listed = run_git(cwd, "--literal-pathspecs", "ls-files", "--stage", "-z", "--", *paths, check=False,
                         errors="surrogateescape")
    except WfqueueError:
        return []
    if listed.returncode != 0:
        return []
    return [entry.split("\t", 1)[1] for entry in listed.stdout.split("\0") if entry.startswith("160000 ")
            and "\t" in entry]


def is_bare_repository(path: Path) -> bool:
    """Whether ``path`` is a bare git repository (no working tree); False when git cannot say."""
    if not (path / "HEAD").is_file():  # a bare repository keeps HEAD at its top: no git run for any other folder
        return False
    try:
        done = run_git(path, "rev-parse", "--is-bare-repository", check=False)
    except WfqueueError:
        return False
    return done.stdout.strip() == "true"


def is_shallow_repository(path: Path) -> bool:
    """Whether ``path`` is in a shallow clone (``git clone --depth N``: its oldest commits' parents are missing);
    False when git cannot say."""
    try:
        done = run_git(path, "rev-parse", "--is-shallow-repository", check=False)
    except WfqueueError:
        return False
    return done.stdout.strip() == "true"
