"""The repository index, built once per state of the repository and shared through a file.

Every task of a plan (the understanding step, each agent, each exploration angle) runs in
its own process and needs the same index; building it reads and parses every file. The
first task to need it builds it and stores it under ``{repo}/.workflow/.cache/index/``; the
others read it back (a JSON load instead of a scan). Not under ``.queue/``: that folder is
the embedded broker's, and exists only when wfqueue started one.

What makes a stored index valid is a manifest of the files the index could have read: the
path, size and modification time of every file of the repository the scan lists (in a git
working tree, those git does not ignore). That covers committed and uncommitted edits alike,
a change to a .gitignore (a file of the list) and a file edited again after its first change, which a key of
``HEAD`` plus ``git status`` would miss. A file modified less than two seconds before the
manifest was taken also has its content digest recorded, since a second edit within the
file system's timestamp resolution might leave size and time unchanged (git's "racily
clean" case). The commit HEAD names is recorded too: the index holds the last commits' history
(wfqueue.analysis.history), which a commit changes even when it leaves every file as it was; then only the
history is read again (a ``git log``, not a scan). An index whose files have changed since is still of use:
the files whose manifest entry is the same are not parsed again (``unchanged_files``), as long as the
repository holds the same files (a file added or removed may change how any import resolves).

Writes are atomic (``wfqueue.fsio``); builders of one repository take turns under a file
lock so that tasks starting together build it once. Any trouble with the cache (an
unwritable folder, a corrupt or foreign file, a lock not granted in time) falls back to
building the index in memory: the cache can only save time, never fail a plan.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import BaseModel, ValidationError

from wfqueue.analysis.files import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_INDEXED_FILES, repository_files
from wfqueue.analysis.history import read_history
from wfqueue.analysis.index import RepoIndex, build_index
from wfqueue.errors import WfqueueError
from wfqueue.fsio import atomic_write_bytes
from wfqueue.gitcmd import run_git
from wfqueue.sessions import WORKFLOW_DIR

log = logging.getLogger(__name__)

CACHE_DIR = ".cache"
# Files changed this recently when the manifest is taken get a content digest as well.
_RACY_NS = 2_000_000_000
# How long a task waits for another process building the same index before building its own.
_LOCK_WAIT_S = 300.0

ManifestEntry = tuple[str, int, int, str]  # path, size, mtime_ns, sha256 of the content or ""


class CacheHeader(BaseModel):
    """The first line of a cache file: what the index below it was built from."""

    code: str  # digest of the analysis code that built it
    root: str
    max_bytes: int
    max_files: int = DEFAULT_MAX_INDEXED_FILES
    manifest: list[ManifestEntry]
    head: str = ""  # the commit HEAD named, "" outside a git repository


@cache
def _code_digest() -> str:
    """The analysis package's own source: an index built by other code is not reused."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _walk_stats(root: Path, listed: list[str]) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of each of ``listed``, the files the index scan could read
    (wfqueue.analysis.files.repository_files: in a git working tree, not those git ignores), any size or kind,
    sorted by path. A file git ignores (a build's output) changing does not make the index built again."""
    found: list[tuple[str, int, int]] = []
    for rel in listed:
        try:
            stat = (root / rel).stat()  # through a symlink: the target is what gets read
        except OSError:
            continue
        found.append((rel, stat.st_size, stat.st_mtime_ns))
    found.sort()
    return found


def take_manifest(root: Path, listed: list[str], now_ns: int | None = None) -> list[ManifestEntry]:
    """The manifest of ``root`` now, ``listed`` being ``repository_files(root)``; recently modified files carry
    their content digest."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    return [(path, size, mtime, _file_digest(root / path) if mtime > now_ns - _RACY_NS else "")
            for path, size, mtime in _walk_stats(root, listed)]


def current_head(root: Path) -> str:
    """The commit HEAD names in ``root``'s repository; "" outside one, before its first commit or
    without git."""
    try:
        done = run_git(root, "rev-parse", "-q", "--verify", "HEAD", check=False)
    except WfqueueError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def cache_file(repo: Path, max_bytes: int, cache_dir: Path | None = None,
               max_files: int = DEFAULT_MAX_INDEXED_FILES) -> Path:
    """Where the index of ``repo`` (scanned with ``max_bytes`` and ``max_files``) is stored."""
    root = str(repo.resolve())
    limits = f"{max_bytes}" if max_files == DEFAULT_MAX_INDEXED_FILES else f"{max_bytes}\0{max_files}"
    name = hashlib.sha256(f"{root}\0{limits}".encode()).hexdigest()[:16]
    return (cache_dir or repo / WORKFLOW_DIR / CACHE_DIR / "index") / f"{name}.json"


def unchanged_files(before: list[ManifestEntry], now: list[ManifestEntry],
                    digest: Callable[[str], str]) -> frozenset[str]:
    """The files of manifest ``now`` whose content is what manifest ``before`` recorded: the same size and
    modification time, and the same content digest where ``before`` recorded one (a file changed within the
    timestamps' resolution then); ``digest`` gives a file's digest now, where ``now`` did not record it."""
    recorded = {path: (size, mtime, sha) for path, size, mtime, sha in before}
    same: set[str] = set()
    for path, size, mtime, sha in now:
        then = recorded.get(path)
        if then is not None and then[:2] == (size, mtime) and (not then[2] or then[2] == (sha or digest(path))):
            same.add(path)
    return frozenset(same)


def _read(path: Path, root: Path, max_bytes: int, max_files: int,
          now: list[ManifestEntry] | None = None) -> tuple[CacheHeader, RepoIndex] | None:
    """The stored header and index when the index was built by this code, with ``now``, from the files manifest
    ``now`` describes (HEAD may have moved since: the caller compares); without, from the files as they were
    then."""
    try:
        with path.open("rb") as handle:
            header = CacheHeader.model_validate_json(handle.readline())
            if (header.code, header.root, header.max_bytes, header.max_files) != (
                    _code_digest(), str(root), max_bytes, max_files):
                return None
            if now is not None and not _same_files(header.manifest, now, _unchanged_under(root, header.manifest, now)):
                return None
            return header, RepoIndex.model_validate_json(handle.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError) as exc:  # corrupt, truncated or foreign: rebuilt over
        log.warning("ignoring the index cache %s (%s); rebuilding it", path, exc)
        return None


def _write(path: Path, header: CacheHeader, index: RepoIndex) -> None:
    try:
        # A file name that is not UTF-8 (kept as the file system gave it) cannot go into JSON: not cached.
        data = header.model_dump_json().encode() + b"\n" + index.model_dump_json().encode()
        atomic_write_bytes(path, data)
    except (OSError, ValueError, WfqueueError) as exc:
        log.info("index not cached at %s: %s", path, exc)


def _unchanged_under(root: Path, before: list[ManifestEntry], now: list[ManifestEntry]) -> frozenset[str]:
    """``unchanged_files`` of two manifests of ``root``, digests read from its files."""
    return unchanged_files(before, now, lambda rel: _file_digest(root / rel))


def _same_files(before: list[ManifestEntry], now: list[ManifestEntry], unchanged: frozenset[str]) -> bool:
    """Whether manifest ``now`` describes the files manifest ``before`` did, ``unchanged`` being the files of
    ``now`` that ``before`` holds as they are: all of them, and no other."""
    return len(before) == len(now) == len(unchanged)


def _build(root: Path, max_bytes: int, max_files: int, listed: list[str], manifest: list[ManifestEntry],
           stale: tuple[CacheHeader, RepoIndex] | None = None,
           unchanged: frozenset[str] = frozenset()) -> tuple[CacheHeader, RepoIndex]:
    """A new index of the files ``listed`` and its header, ``manifest`` taken before the scan (a file changed
    during the scan no longer matches it); with ``stale``, the stored index of files that have changed since,
    whose ``unchanged`` files are not parsed again (editing one file of 20 000 made every plan scan them all)."""
    header = CacheHeader(code=_code_digest(), root=str(root), max_bytes=max_bytes, max_files=max_files,
                         manifest=manifest, head=current_head(root))
    return header, build_index(root, max_bytes=max_bytes, max_files=max_files, listed=listed,
                               previous=None if stale is None else stale[1], unchanged=unchanged)


def cached_index(repo: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES, cache_dir: Path | None = None,
                 max_files: int = DEFAULT_MAX_INDEXED_FILES) -> RepoIndex:
    """``build_index(repo, max_bytes, max_files)``, read from the cache when the repository has not changed
    since it was stored; built (once across processes) and stored otherwise."""
    root = Path(repo).resolve()
    path = cache_file(root, max_bytes, cache_dir, max_files)
    head = current_head(root)
    # One look at the files (git's list, a stat of each) serves every step below: whether the stored index is
    # still theirs, before and after the lock, and the manifest of a new one, taken before its scan reads them.
    # Listing 20 000 files is a walk of their folders (0.4 s); the steps listed them once each.
    listed = list(repository_files(root))
    manifest = take_manifest(root, listed)
    stored = _read(path, root, max_bytes, max_files, manifest)
    if stored is not None and stored[0].head == head:
        return stored[1]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path) + ".lock", timeout=_LOCK_WAIT_S)
        lock.acquire()
    except (OSError, Timeout) as exc:  # read-only folder, or a builder that takes too long
        log.info("building the index without the cache (%s)", exc)
        return build_index(root, max_bytes=max_bytes, max_files=max_files, listed=listed)
    try:
        # Another process may have built it while we waited: read again. Files changed since the look above are
        # not in its manifest, so the index built here (or found) is renewed by the next task that looks.
        stored = _read(path, root, max_bytes, max_files)
        unchanged = _unchanged_under(root, stored[0].manifest, manifest) if stored is not None else frozenset()
        same = stored is not None and _same_files(stored[0].manifest, manifest, unchanged)
        if stored is not None and same and stored[0].head == head:
            return stored[1]
        if stored is not None and same:  # the same files at another commit: only the history is read again
            header = stored[0].model_copy(update={"head": head})
            index = stored[1].model_copy(update={"history": read_history(root, {f.path for f in stored[1].files})})
        else:
            header, index = _build(root, max_bytes, max_files, listed, manifest, stored, unchanged)
        _write(path, header, index)
        return index
    finally:
        lock.release()
