"""The worker's side of the repository's journey: a local checkout of a pinned commit, from its cache.

Layout of the cache (:func:`cache_dir`)::

    git/                      one bare repository holding the objects of every commit this worker received
    checkouts/<commit>/       the files of one commit, shared by every task (and pool process) that reads it,
                              and a ``.git`` of its own at that commit that borrows git/'s objects
    checkout-locks/<commit>   shared flock while a task reads the checkout; its mtime is the last use
    wfqueue-tmp/              checkouts being built, bundles being downloaded, checkouts being removed
    cache.lock                exclusive flock held while git/, checkouts/ or wfqueue-tmp/ change

Why one bare repository: objects arrive once (a thin bundle of the next commit adds only what changed), so a
50 MB repository is not copied per commit, and execution's task worktrees (:func:`repository_for`) come from it
too. Why checkouts are plain files, not git worktrees: a checkout is built in ``wfqueue-tmp/`` (``read-tree``
and ``checkout-index`` into a temporary index) and renamed into ``checkouts/`` only when complete; a worktree
records its own path in the repository and cannot be renamed atomically. So a worker killed mid-way leaves
only something under ``wfqueue-tmp/``, which the next build clears; a folder under ``checkouts/`` is always whole.
Agents read the files; the planner also reads the commit's history there (wfqueue.analysis.history), which
its ``.git`` gives without copying an object (a checkout made before it had one gets it on its next use).

Least recently used checkouts beyond ``checkout_cache_max`` are removed (renamed into ``wfqueue-tmp/`` first, so a
reader never sees half a folder), except those a task holds open through :func:`checked_out`. Objects stay in
``git/``: a later thin bundle may build on them.

The cache removes only what it made: its scratch folder has a name no other program uses (a cache dir set to
``$HOME`` or ``/`` by mistake must not empty the user's ``tmp/``, as the ``tmp/`` of versions before it did), and
eviction looks only at folders named by a full commit id. A ``tmp/`` left by those versions is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from pydantic import BaseModel, ConfigDict

from wfqueue import keys
from wfqueue.errors import InfrastructureError
from wfqueue.gitcmd import run_git
from wfqueue.settings import Settings
from wfqueue.transport.repo import GIT_TIMEOUT_S, MAX_CHAIN, REPUBLISH_HINT, BundleMeta, download, read_meta, rev

GIT_DIR = "git"
CHECKOUTS_DIR = "checkouts"
USE_DIR = "checkout-locks"
TMP_DIR = "wfqueue-tmp"  # cleared on each build: a name only wfqueue uses, so it is never someone else's folder
CACHE_LOCK = "cache.lock"
RECEIVED_REF_PREFIX = "refs/wfqueue/commits/"  # keeps every received commit from `git gc` in the cache


class CheckoutUse(BaseModel):
    """One checkout in the cache and when a task last used it (ns since the epoch)."""

    model_config = ConfigDict(frozen=True)

    commit: str
    last_used_ns: int


def choose_evictions(checkouts: list[CheckoutUse], keep_max: int, spared: frozenset[str]) -> list[str]:
    """The checkouts to remove so that at most ``keep_max`` stay: least recently used first, never one of
    ``spared`` (in use now, or just built). Fewer when too many are spared. Pure."""
    excess = len(checkouts) - keep_max
    if excess <= 0:
        return []
    candidates = sorted((c for c in checkouts if c.commit not in spared), key=lambda c: (c.last_used_ns, c.commit))
    return [c.commit for c in candidates[:excess]]


def cache_dir(settings: Settings) -> Path:
    """The worker's cache: ``worker_cache_dir``, else ``$XDG_CACHE_HOME/wfqueue``, else ``~/.cache/wfqueue``."""
    if settings.worker_cache_dir is not None:
        return settings.worker_cache_dir.expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"  # the XDG spec: relative is invalid
    return (base / "wfqueue").resolve()


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    """An flock on ``path`` (created if need be): released by the kernel if its holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _use_file(root: Path, commit: str) -> Path:
    return root / USE_DIR / commit


def _touch(root: Path, commit: str) -> None:
    """Record a use of the checkout, to the nanosecond (a file system's own clock may tick far coarser)."""
    path = _use_file(root, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def _is_commit_name(name: str) -> bool:
    """A full hexadecimal object name (SHA-1 or SHA-256): what names a checkout's folder and refs."""
    return len(name) in (40, 64) and all(c in "0123456789abcdef" for c in name)


def _check_commit_name(commit: str) -> None:
    # The commit names folders and refs: only a full hexadecimal object name may.
    if not _is_commit_name(commit):
        raise InfrastructureError(f"{commit!r} is not a full commit id; a worker materialises pinned commits only",
                                  hint="the coordinator sends the full id of the commit it pinned: update wfqueue "
                                       "on the coordinator and the workers to the same version")


def materialise(client: redis.Redis, commit: str, settings: Settings, *, repo_url: str | None = None) -> Path:
    """The folder holding the files of ``commit`` in this worker's cache, built if need be from the bundle in
    Redis (or fetched from ``repo_url``). To keep it from being removed while a task reads it, use
    :func:`checked_out` instead."""
    _check_commit_name(commit)
    root = cache_dir(settings)
    final = root / CHECKOUTS_DIR / commit
    if not _is_repository_at(final, commit):
        with _flock(root / CACHE_LOCK, fcntl.LOCK_EX):
            if not final.is_dir():  # another process may have built it while this one waited
                _clear_tmp(root)
                git_dir = _ensure_commit(client, root, commit, repo_url)
                _build(root, git_dir, commit, final)
                _evict(root, settings.checkout_cache_max, commit)
            elif not _is_repository_at(final, commit):  # the files alone, as checkouts were once made
                _make_repository(final, root / GIT_DIR, commit)
    _touch(root, commit)
    return final


@contextlib.contextmanager
def checked_out(client: redis.Redis, commit: str, settings: Settings, *,
                repo_url: str | None = None) -> Iterator[Path]:
    """:func:`materialise`, holding the checkout until the block ends so no eviction removes it meanwhile."""
    _check_commit_name(commit)
    with _flock(_use_file(cache_dir(settings), commit), fcntl.LOCK_SH):
        yield materialise(client, commit, settings, repo_url=repo_url)


def repository_for(client: redis.Redis, commit: str, settings: Settings, *, repo_url: str | None = None) -> Path:
    """The local git repository (bare) that holds ``commit`` and its history: where a task's worktree and branch
    are made. Its commits go back with :func:`wfqueue.transport.repo.send_commits`."""
    _check_commit_name(commit)
    root = cache_dir(settings)
    git_dir = root / GIT_DIR
    if (git_dir / "HEAD").is_file() and rev(git_dir, commit) == commit:
        return git_dir
    with _flock(root / CACHE_LOCK, fcntl.LOCK_EX):
        _clear_tmp(root)
        return _ensure_commit(client, root, commit, repo_url)


# -- under the cache lock ---------------------------------------------------------------------------------------


def _clear_tmp(root: Path) -> None:
    """Remove what an earlier process left half done (only ever under the cache lock, so nothing is in use)."""
    tmp = root / TMP_DIR
    if tmp.is_dir():
        for entry in tmp.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)


def _cache_git(cwd: Path, *args: str, env: dict[str, str] | None = None,
               check: bool = True) -> subprocess.CompletedProcess[str]:
    """Git in this worker's cache: a failure there is the cache's (a full disk, a read-only folder), said as such.
    The transport's own hint sent the user to `git fsck` their repository, which was never the matter."""
    return run_git(cwd, *args, check=check, env=env, timeout_s=GIT_TIMEOUT_S,
                   needed_for="the repository travels to workers by git",
                   install_hint="install git on every worker",
                   failure_hint=f"on worker {socket.gethostname()}: free space in its cache, or set "
                                "WFQUEUE_WORKER_CACHE_DIR there to a writable folder with room; if git says an "
                                f"object is missing or corrupt, delete {cwd if cwd.name == GIT_DIR else 'the cache'} "
                                "there (it is filled again from Redis); then resume the session")


def _ensure_commit(client: redis.Redis, root: Path, commit: str, repo_url: str | None) -> Path:
    """The cache's bare repository, holding ``commit`` (fetched from ``repo_url``, else from Redis)."""
    git_dir = root / GIT_DIR
    git_dir.mkdir(parents=True, exist_ok=True)
    _cache_git(git_dir, "init", "--quiet", "--bare")  # idempotent, and it completes one a crash cut short
    if rev(git_dir, commit) == commit:
        return git_dir
    # With a repo URL the pinned commit comes from there; commits made since (an execution's integration head)
    # exist only in the user's repository, which publishes them as thin bundles on top of the pin.
    for link, meta in reversed(_missing_chain(client, git_dir, commit, repo_url)):
        target = Path(tempfile.mkdtemp(prefix="bundle-", dir=root / TMP_DIR)) / f"{link}.bundle"
        try:
            download(client, keys.bundle_prefix(link), meta, target)
            _cache_git(git_dir, "fetch", "--quiet", "--no-write-fetch-head", str(target),
                       f"+{meta.ref}:{RECEIVED_REF_PREFIX}{link}")
        finally:  # a failed fetch (a full disk) left the bundle, as large as the repository, until the next build
            shutil.rmtree(target.parent, ignore_errors=True)
    return git_dir


def _fetch_from_url(git_dir: Path, repo_url: str, commit: str) -> None:
    fetched = _cache_git(git_dir, "fetch", "--quiet", "--no-write-fetch-head", repo_url,
                  f"+{commit}:{RECEIVED_REF_PREFIX}{commit}", check=False)
    if fetched.returncode != 0:
        raise InfrastructureError(
            f"this worker could not fetch commit {commit[:12]} from WFQUEUE_REPO_URL {repo_url}: "
            f"{fetched.stderr.strip()}",
            hint="push the commit there (a snapshot of uncommitted changes cannot be fetched: commit first), "
                 "and give the worker read access to the URL")


def _missing_chain(client: redis.Redis, git_dir: Path, commit: str,
                   repo_url: str | None) -> list[tuple[str, BundleMeta]]:
    """The bundles to fetch for ``commit``: its own, then those of the prerequisites this cache lacks. A commit
    with no bundle in Redis is fetched from ``repo_url`` right away, when one is given."""
    chain: list[tuple[str, BundleMeta]] = []
    link: str | None = commit
    while link is not None and rev(git_dir, link) != link:
        meta = read_meta(client, keys.bundle_prefix(link))
        if meta is None and repo_url:
            _fetch_from_url(git_dir, repo_url, link)
            break
        if meta is None or len(chain) >= MAX_CHAIN:
            needed = "" if link == commit else f" (which commit {commit[:12]} builds on)"
            raise InfrastructureError(
                f"the repository bundle of commit {link[:12]}{needed} is not in Redis: it expired or was never "
                f"published", hint=REPUBLISH_HINT)
        chain.append((link, meta))
        link = meta.prerequisite
    return chain


def _build(root: Path, git_dir: Path, commit: str, final: Path) -> None:
    """Write the files of ``commit`` in a folder under ``wfqueue-tmp/``, then rename it to ``final``."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{commit[:12]}-", dir=root / TMP_DIR))
    tree = scratch / "tree"
    tree.mkdir()
    env = {"GIT_INDEX_FILE": str(scratch / "index")}
    _cache_git(tree, f"--git-dir={git_dir}", f"--work-tree={tree}", "read-tree", commit, env=env)
    _cache_git(tree, f"--git-dir={git_dir}", f"--work-tree={tree}", "checkout-index", "--all", "--force", env=env)
    _make_repository(tree, git_dir, commit)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(tree, final)
    shutil.rmtree(scratch, ignore_errors=True)


def _make_repository(tree: Path, git_dir: Path, commit: str) -> None:
    """Make ``tree`` a repository of its own at ``commit``, borrowing ``git_dir``'s objects: the planner reads
    the commit's history there (wfqueue.analysis.history) as it would in the user's repository, so a worker
    without the shared disk plans as one with it. HEAD is written last: it marks the repository complete."""
    _cache_git(tree, "init", "--quiet")
    (tree / ".git" / "objects" / "info" / "alternates").write_text(f"{(git_dir / 'objects').resolve()}\n")
    _cache_git(tree, "update-ref", "--no-deref", "HEAD", commit)


def _is_repository_at(folder: Path, commit: str) -> bool:
    try:
        return (folder / ".git" / "HEAD").read_text(encoding="ascii").strip() == commit
    except (OSError, UnicodeDecodeError):
        return False


def _evict(root: Path, keep_max: int, built: str) -> None:
    """Remove the least recently used checkouts beyond ``keep_max``, skipping any a task holds now."""
    checkouts = root / CHECKOUTS_DIR
    uses: list[CheckoutUse] = []
    for entry in checkouts.iterdir():
        if not (_is_commit_name(entry.name) and entry.is_dir() and not entry.is_symlink()):
            continue  # not a checkout this cache built: never removed (a cache dir set to a folder in use)
        stamp = _use_file(root, entry.name)
        last_used = (stamp if stamp.exists() else entry).stat().st_mtime_ns
        uses.append(CheckoutUse(commit=entry.name, last_used_ns=last_used))
    if len(uses) <= keep_max:
        return
    with contextlib.ExitStack() as held:
        busy = {built}
        for use in uses:
            if use.commit != built and not _try_exclusive(held, _use_file(root, use.commit)):
                busy.add(use.commit)
        for commit in choose_evictions(uses, keep_max, frozenset(busy)):
            # Renamed first: a folder under checkouts/ is whole or absent, never half removed.
            trash = Path(tempfile.mkdtemp(prefix="evicted-", dir=root / TMP_DIR))
            os.rename(checkouts / commit, trash / commit)
            shutil.rmtree(trash, ignore_errors=True)
            # The use file stays: a task waiting on its flock must lock the file a later eviction will try.


def _try_exclusive(held: contextlib.ExitStack, path: Path) -> bool:
    """Take an exclusive flock on ``path`` for the rest of ``held``, or False at once when a task holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = held.enter_context(open(path, "a+b"))  # noqa: SIM115 - closed by `held`
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    held.callback(fcntl.flock, handle, fcntl.LOCK_UN)
    return True
