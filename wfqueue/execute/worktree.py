"""The git side of one task: its own worktree on its own branch, and removing it afterwards (its commit is
wfqueue.execute.commits).

Everything goes through ``git`` (one :func:`git` helper) and only ever touches the task's branch
``wfqueue/tasks/{exec_id}/{task_id}`` and the task's worktree: never the user's checkout, branch, index or files.

Where worktrees live: outside the repository, in this host's wfqueue cache (wfqueue.transport.checkouts.cache_dir):
``{cache}/worktrees/{host}/{repo name}-{hash}/{exec_id}/{task_id}/{attempt}``. Inside the working tree a worktree
would show up as an untracked folder in the user's ``git status`` wherever ``.workflow/`` is not ignored, and tools
that scan the tree (test runners, type checkers, editors) would find a second copy of every file. Under the git
directory (where they were) no such tool sees them, but neither do the task's own checks: Jest ignores every file
whose path holds ``/.git/``, so a JavaScript project's tests were "not found" (a failure, or a green run of no
tests with ``--passWithNoTests``). Per host: with a shared disk, another host's worktrees are registered in the
same repository but their folders are not here, and must not be pruned as gone (:func:`made_by_wfqueue`). The
repository's ``node_modules`` is linked beside each execution's worktrees (wfqueue.execute.dependency_links),
where Node's module resolution and npm's ``node_modules/.bin`` look when they walk up from a worktree, as they
found it when worktrees were inside the repository. One folder per attempt: a worktree kept because it holds
uncommitted work (see :func:`finish_worktree`) is never reset by a later attempt of the same task.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from wfqueue.gitcmd import run_git

GIT_TIMEOUT_S = 120.0
# Git commands that write a whole working tree (a worktree's checkout, a reset, a merge): their time grows with the
# repository and its filters (git-lfs, git-crypt); a large monorepo's checkout took longer than 120 s, and the
# execution could never start.
TREE_GIT_TIMEOUT_S = 1800.0
_WRITES_THE_TREE = frozenset({"worktree", "checkout", "reset", "merge", "clean", "read-tree", "sparse-checkout"})
WORKTREES_DIR = "worktrees"  # in the wfqueue cache
# Where worktrees were made before they moved out of the repository (under its git directory): still pruned and
# cleaned up there, for an execution started before.
LEGACY_WORKTREES_DIR = "wfqueue-worktrees"
# Files a test run or an interpreter leaves behind: never part of a task's change, and not "uncommitted work"
# either. A repository that does not ignore them would otherwise get them committed (and the task rejected for
# writing files its plan does not name).
BYPRODUCTS = ("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".coverage")
EXCLUDE_BYPRODUCTS = [f":(exclude,glob)**/{name}" for name in BYPRODUCTS] + \
                      [f":(exclude,glob)**/{name}/**" for name in BYPRODUCTS]


# The lock `git worktree add` holds on a new worktree until its checkout is done: one still there was never
# finished (the command was killed). Git writes the reason in the user's language unless told otherwise, so
# execution's git runs untranslated (LANGUAGE below).
HALF_MADE_REASON = "initializing"


def no_hooks_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The repository's hooks do not run for wfqueue's own git commands (worktree add, checkout, commit, merge): a
    prepare-commit-msg hook that wants a ticket in the branch name failed every task, and a post-checkout hook for
    a tool the worker lacks (git-lfs) failed the execution. The task's verification and the gate are the checks.
    Added to the configuration the environment already gives git (git 2.31+: GIT_CONFIG_COUNT), never replacing
    it (a container's safe.directory), so git's messages quote each command as it was written. Git speaks
    English here (no catalog is named "en"): its lock reason is then one wfqueue can recognise."""
    try:
        count = max(0, int(environ.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        count = 0
    return {"GIT_CONFIG_COUNT": str(count + 1), f"GIT_CONFIG_KEY_{count}": "core.hooksPath",
            f"GIT_CONFIG_VALUE_{count}": os.devnull, "LANGUAGE": "en"}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Git for execution's worktrees and branches (wfqueue.gitcmd), hooks off: its failures are
    InfrastructureErrors."""
    timeout_s = TREE_GIT_TIMEOUT_S if _subcommand(args) in _WRITES_THE_TREE else GIT_TIMEOUT_S
    return run_git(cwd, *args, check=check, timeout_s=timeout_s, env=no_hooks_env(os.environ),
                   needed_for="execution works on git branches",
                   install_hint="install git on every worker that consumes the execute queue",
                   failure_hint="check the repository with `git status` and `git worktree list`")


def _subcommand(args: tuple[str, ...]) -> str | None:
    """Git's command among ``args``, after its own options (``-c name=value`` pairs, ``--no-pager``)."""
    rest = iter(args)
    for arg in rest:
        if arg in ("-c", "-C"):
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return None


def _safe_name(text: str) -> str:
    """A path component for an id (ids are validated, but a folder name must never climb or hide)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-") or "task"


def _common_dir(repo: Path) -> Path:
    common = Path(git(repo, "rev-parse", "--git-common-dir").stdout.strip())
    return (common if common.is_absolute() else repo / common).resolve()


def _repo_key(common: Path) -> str:
    """The folder name, in a cache of worktrees, of the repository whose git directory is ``common``: its name, told
    apart from another of the same name by that directory's path (the same on every host that shares the disk)."""
    name = common.parent.name if common.name == ".git" else common.name.removesuffix(".git")
    return f"{_safe_name(name)}-{hashlib.sha256(os.fsencode(common)).hexdigest()[:12]}"


def worktrees_root(repo: Path, cache: Path) -> Path:
    """This host's folder for the repository's worktrees, in the wfqueue cache ``cache``."""
    return cache / WORKTREES_DIR / _safe_name(socket.gethostname()) / _repo_key(_common_dir(repo))


def made_by_wfqueue(repo: Path, checkout: Path, *, exec_id: str | None = None, here: bool = False) -> bool:
    """Whether the worktree at ``checkout`` is one of wfqueue's for ``repo`` (of execution ``exec_id``, when
    given): under the git directory, where they were made before, or ``.../worktrees/{host}/{repo key}/...`` in a
    wfqueue cache, any host's (with ``here``: this host's). Told by its path, which git keeps even when the folder
    is gone, whatever cache folder the host that made it had set."""
    return _made_by_wfqueue(_common_dir(repo), checkout, exec_id=exec_id, here=here)


def _made_by_wfqueue(common: Path, checkout: Path, *, exec_id: str | None, here: bool) -> bool:
    """:func:`made_by_wfqueue` for the repository whose git directory is ``common`` (asked of git once by a caller
    that judges many worktrees)."""
    legacy = common / LEGACY_WORKTREES_DIR
    parts = Path(os.path.normpath(checkout)).parts
    key, host = _repo_key(common), _safe_name(socket.gethostname())
    places = [n for n in range(len(parts) - 3) if parts[n] == WORKTREES_DIR and parts[n + 2] == key
              and (not here or parts[n + 1] == host)]
    if exec_id is not None:
        places = [n for n in places if parts[n + 3] == _safe_name(exec_id)]
        legacy = legacy / _safe_name(exec_id)
    return bool(places) or checkout.is_relative_to(legacy)


def execution_folder(repo: Path, cache: Path, exec_id: str) -> Path:
    """Where an execution's worktrees are: its tasks' and its integration worktree."""
    return worktrees_root(repo, cache) / _safe_name(exec_id)


def legacy_execution_folder(repo: Path, exec_id: str) -> Path:
    """Where an execution started before worktrees moved out of the git directory made them."""
    return _common_dir(repo) / LEGACY_WORKTREES_DIR / _safe_name(exec_id)


def worktree_path(repo: Path, cache: Path, exec_id: str, task_id: str, attempt: int) -> Path:
    """Where the attempt's worktree is: in this host's cache, or under the git directory where an execution
    started before made it (its branch is checked out there: git refuses it a second worktree)."""
    legacy = legacy_execution_folder(repo, exec_id) / _safe_name(task_id) / str(attempt)
    return legacy if legacy.is_dir() else execution_folder(repo, cache, exec_id) / _safe_name(task_id) / str(attempt)


@contextmanager
def worktrees_locked(repo: Path) -> Iterator[None]:
    """Held while a worktree is added, pruned or removed. `git worktree add` creates its admin folder
    (``.git/worktrees/NAME``) before writing the files in it, and a `git worktree prune` run meanwhile by another
    worker of the same wave deletes that folder: the add fails and its task with it. One lock file per repository,
    in its git directory, serialises those steps across the processes of this host (an flock: released by the
    kernel if its holder dies)."""
    lock_file = _common_dir(repo) / LEGACY_WORKTREES_DIR / ".lock"  # where wfqueue's earlier versions lock too
    lock_file.parent.mkdir(exist_ok=True)
    with open(lock_file, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def worktree_list(repo: Path) -> list[tuple[Path, list[str]]]:
    """Every worktree of the repository, as `git worktree list --porcelain` gives it: its path and its lines."""
    listed: list[tuple[Path, list[str]]] = []
    for block in git(repo, "worktree", "list", "--porcelain").stdout.split("\n\n"):
        lines = block.splitlines()
        if lines and lines[0].startswith("worktree "):
            listed.append((Path(lines[0][len("worktree "):]), lines))
    return listed


def _worktree_entry(repo: Path, path: Path) -> list[str] | None:
    """The lines git gives for the worktree at ``path``, or None when git does not know it."""
    return next((lines for where, lines in worktree_list(repo) if where.resolve() == path.resolve()), None)


def _registered(repo: Path, path: Path) -> bool:
    return _worktree_entry(repo, path) is not None


def _locks(repo: Path, path: Path) -> list[str]:
    """The lock reasons of the worktree at ``path`` ("" for a lock without one): none when it is not locked."""
    return [line.removeprefix("locked").strip() for line in _worktree_entry(repo, path) or []
            if line == "locked" or line.startswith("locked ")]


def _half_made(repo: Path, path: Path) -> bool:
    """A worktree `git worktree add` never finished (killed by a Ctrl-C): still locked with git's reason for a
    worktree being made. Its files are partial, no executor ever ran in it, and while it stands its branch cannot
    be checked out elsewhere and it cannot be removed. A lock of anyone else's (a user keeping a worktree that
    holds work) is not that, and is respected."""
    return HALF_MADE_REASON in _locks(repo, path)


def _commit_of_its_own(path: Path) -> bool:
    """Whether the worktree's HEAD is a commit no branch or other reference contains."""
    return not git(path, "for-each-ref", "--count=1", "--format=%(refname)", "--contains", "HEAD").stdout.strip()


def _forget_missing(repo: Path) -> None:
    """`git worktree prune` for wfqueue's own worktrees only (made on this host, or under the git directory where
    they were made before: :func:`made_by_wfqueue`): the registration of one whose folder is gone is removed, so
    that its branch can be checked out again. A prune of the whole repository also dropped the user's own worktrees
    whose folders were away (moved, on a disk not mounted), and what their index held with them; another host's
    (sharing the repository's disk) is there, not here. As git does, a worktree locked by someone is left
    registered; an "initializing" lock is a dead add's."""
    common = _common_dir(repo)
    for pointer in (common / "worktrees").glob("*/gitdir"):
        admin = pointer.parent
        try:
            written = pointer.read_text(encoding="utf-8").strip()
            lock = (admin / "locked").read_text(encoding="utf-8").strip() if (admin / "locked").exists() else None
        except (OSError, UnicodeDecodeError):
            continue
        checkout = Path(os.path.normpath(admin / written)).parent  # written absolute, or relative to admin
        if _made_by_wfqueue(common, checkout, exec_id=None, here=True) and not checkout.exists() \
                and lock in (None, HALF_MADE_REASON):
            shutil.rmtree(admin, ignore_errors=True)


def _discard(repo: Path, path: Path) -> None:
    git(repo, "worktree", "remove", "--force", "--force", str(path))  # twice: a locked one too


def prepare_worktree(repo: Path, path: Path, branch: str, base: str) -> Path:
    """A worktree at ``path`` with ``branch`` checked out at ``base``.

    A redelivered or retried task finds the worktree its earlier run of the same attempt left, on ``branch`` at
    ``base``: its edits are kept, since the executor runs again on top of them (a durable executor continues its
    conversation, whose edits are not made twice). Any other state is reset to ``base``. ``branch`` is moved to
    ``base`` whatever it held: callers look for an existing commit of the attempt (:func:`find_task_commit`)
    first. What a check killed in it mid-run wrote is put back (:func:`left_as_found`)."""
    base_commit = git(repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}").stdout.strip()
    with worktrees_locked(repo):
        prepared = _whole_tree(_prepare(repo, path, branch, base, base_commit))
    _undo_killed_check(prepared, _check_mark(prepared))
    return prepared


def _whole_tree(path: Path) -> Path:
    """``path`` with every file of its commit: a worktree added from a sparse checkout takes its cone (git copies
    the patterns), and the agent and the checks would not see the files outside it. Only this worktree's own
    configuration changes (sparse checkouts keep theirs per worktree: extensions.worktreeConfig); a repository
    whose sparse setting is shared by every worktree is refused before any (safety.check_clean_repository)."""
    if git(path, "config", "--bool", "core.sparseCheckout", check=False).stdout.strip() == "true":
        git(path, "sparse-checkout", "disable")
    return path


def _prepare(repo: Path, path: Path, branch: str, base: str, base_commit: str) -> Path:
    if _half_made(repo, path):
        _discard(repo, path)
    if path.exists() and _registered(repo, path):
        head = git(path, "rev-parse", "HEAD", check=False).stdout.strip()
        on = git(path, "symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip()
        if head == base_commit:
            if on != f"refs/heads/{branch}":  # left detached by an earlier run: back on the branch, edits kept
                git(path, "checkout", "--quiet", "-B", branch)
            return path
        git(path, "checkout", "--quiet", "--force", "-B", branch, base)
        git(path, "reset", "--quiet", "--hard", base)
        git(path, "clean", "-ffdxq")
        return path
    if path.exists():  # a folder git no longer knows (removed by hand): ours, in wfqueue's cache
        shutil.rmtree(path)
    _forget_missing(repo)  # a registration whose folder is gone would hold the branch
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--quiet", "--force", "-B", branch, str(path), base)
    return path


def take_back_commits(worktree: Path, branch: str, base: str) -> None:
    """Undo commits (and a branch switch) the executor made itself, keeping their changes in the worktree: some
    agent CLIs commit every edit, and the task's change must be one commit of wfqueue's on ``branch``."""
    on = git(worktree, "symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip()
    if on != f"refs/heads/{branch}":
        git(worktree, "checkout", "--quiet", "-B", branch)  # working tree and index stay as they are
    if git(worktree, "rev-parse", "HEAD").stdout.strip() != git(worktree, "rev-parse", base).stdout.strip():
        git(worktree, "reset", "--quiet", "--soft", base)


def changed_paths(worktree: Path) -> list[str]:
    """Paths changed, added or deleted in the worktree (not counting test and interpreter byproducts)."""
    status = git(worktree, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all",
                  "--", ".", *EXCLUDE_BYPRODUCTS).stdout
    paths: list[str] = []
    entries = iter(status.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":
            next(entries, None)  # the rename's source path
    return paths


# In a worktree's own git directory while a check runs: the tree of what the worktree held before it. A check killed
# with its worker (a long test run, a hard time limit) never puts back what it wrote; the next look does.
CHECK_MARK = "WFQUEUE_BEFORE_CHECK"


@contextmanager
def left_as_found(worktree: Path) -> Iterator[None]:
    """Run a check (a task's verification, the gate) in ``worktree``, then put back what it wrote, changed or
    deleted there (ignored files and byproducts aside). A test that writes a report into its folder had it
    committed as part of the task, which was then rejected for a file its plan does not name; the gate's
    leftovers kept the integration worktree as "uncommitted work". What the worktree held is staged and its tree
    recorded (CHECK_MARK) while the check runs, and the index is left with nothing staged, as commit_all expects.
    A check killed with its worker never reaches its own clean-up: the next prepare_worktree of the worktree
    (the redelivered task, the reopened integration worktree) puts it back from the mark."""
    git(worktree, "add", "--all", "--", ".", *EXCLUDE_BYPRODUCTS)
    mark = _check_mark(worktree)
    mark.write_text(git(worktree, "write-tree").stdout.strip(), encoding="utf-8")
    try:
        yield
    finally:
        _put_back(worktree)
        mark.unlink(missing_ok=True)


def _undo_killed_check(worktree: Path, mark: Path) -> None:
    """Put back what a check killed mid-run (its worker SIGKILLed) left in ``worktree``: the tree ``mark`` records
    is read into the index and the worktree made to match it. Committed as they were, a report it wrote became
    part of the task after the redelivery."""
    if not mark.is_file():
        return
    tree = mark.read_text(encoding="utf-8").strip()
    if tree:
        git(worktree, "read-tree", tree)
        _put_back(worktree)
    mark.unlink(missing_ok=True)


def _put_back(worktree: Path) -> None:
    """The worktree made to match its index again, then the index unstaged (ignored files and byproducts aside)."""
    # Only when something differs from the index: `checkout -- .` fails on an index with no files at all.
    if git(worktree, "ls-files", "--modified", "--deleted", "-z").stdout:
        git(worktree, "checkout", "--quiet", "--", ".")
    git(worktree, "clean", "-d", "--force", "--quiet", *(f"--exclude={name}" for name in BYPRODUCTS))
    git(worktree, "reset", "--quiet")


def _check_mark(worktree: Path) -> Path:
    """Where CHECK_MARK goes: the worktree's own git directory, which no check sees."""
    return Path(git(worktree, "rev-parse", "--absolute-git-dir").stdout.strip()) / CHECK_MARK


def repo_prefix(repo: Path) -> str:
    """Where ``repo`` sits inside its git repository (``""`` at the top, else ``"project/"``): a plan for one
    project of a larger repository names its files relative to that project."""
    return git(repo, "rev-parse", "--show-prefix").stdout.strip()


def finish_worktree(repo: Path, path: Path) -> bool:
    """Remove the task's worktree, unless it holds uncommitted work or a commit no branch has: then it is kept
    (True) for the caller to name, its HEAD detached so the task's branch stays free for another attempt."""
    with worktrees_locked(repo):
        return _finish(repo, path)


def _finish(repo: Path, path: Path) -> bool:
    if not path.exists():
        _forget_missing(repo)
        return False
    if not _registered(repo, path):
        shutil.rmtree(path)
        return False
    if _half_made(repo, path):  # it holds no one's work
        _discard(repo, path)
        return False
    if git(path, "rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode != 0:
        # Its branch was deleted under it (`git update-ref -d`): every file reads as uncommitted, and there is no
        # commit to detach at. What it held was the branch's, gone with it.
        _discard(repo, path)
        return False
    if changed_paths(path) or _locks(repo, path) or _commit_of_its_own(path):
        # Uncommitted work, a lock of someone's, or a commit made there (the user saving the work a failed
        # attempt left) that no branch holds: removing the worktree would leave that commit to garbage collection.
        git(path, "checkout", "--quiet", "--detach")
        return True
    git(repo, "worktree", "remove", "--force", str(path))
    for parent in (path.parent, path.parent.parent):  # the task's and the execution's folders, once empty
        try:
            parent.rmdir()
        except OSError:
            break
    return False
