"""The one seam where wfqueue writes files.

Every artifact is written atomically (a temporary file in the same folder, then
``os.replace``) so a reader never sees half a file, and writes that several
processes make to one file go through :func:`locked_update`, a read-modify-write
under a file lock. File locks only serialise writers that share a local disk.

A folder can be *mirrored* (:func:`mirroring`): a worker that shares no disk with
the coordinator works in its own copy of the session folder, and the coordinator
in the real one, each mirrored to the session's files in Redis. While a folder is
mirrored, every write under it (:func:`atomic_write_bytes` and the functions built
on it) is also handed to its :class:`MirrorSink`, so is every :func:`remove`, and
:func:`locked_update` becomes the sink's read-modify-write under a lock every host
honours (the local file is written too). This module knows only the sink protocol;
``wfqueue.transport.session_files`` implements it on Redis.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout

from wfqueue.errors import InfrastructureError
from wfqueue.per_process import PerProcess

# Errors that mean the disk will not take the write however often it is retried.
_NOT_WRITABLE = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
                 errno.EROFS: "read-only file system"}
_FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded"}


@contextmanager
def unwritable_is_infrastructure(path: Path) -> Iterator[None]:
    """Turn a folder that refuses writes (permissions, an immutable flag, a read-only or full
    file system) into an InfrastructureError that names it and says how to go on."""
    try:
        yield
    except OSError as exc:
        # Said for a plan's writes and for verify's and replan's alike: each goes on its own way.
        refusal = disk_refusal(exc, path, folder="the session folder",
                               then="`wfqueue resume` a plan, or run `verify` or `replan` again")
        if refusal is None:
            raise
        raise refusal from None


def disk_refusal(exc: OSError, path: Path | None, then: str,
                 folder: str = "that folder") -> InfrastructureError | None:
    """The InfrastructureError for a write to ``path`` the disk refused for good (permissions, a read-only or
    full file system), saying to mend ``folder`` and then do ``then``; None for any other OSError. ``path`` None:
    the error named no file (a full disk's ENOSPC is raised when a file is closed, without its name)."""
    if path is None:
        why = _FULL.get(exc.errno or 0) or _NOT_WRITABLE.get(exc.errno or 0)
        return None if why is None else InfrastructureError(
            f"a write was refused: {why}", hint="free some space or make writable where wfqueue writes (the "
                                                f"repository's .workflow folder, ~/.cache/wfqueue), then {then}")
    if exc.errno in _NOT_WRITABLE:
        return InfrastructureError(f"cannot write {path}: {_NOT_WRITABLE[exc.errno]} on {path.parent}",
                                   hint=f"make {folder} writable again, then {then}")
    if exc.errno in _FULL:
        return InfrastructureError(f"cannot write {path}: {_FULL[exc.errno]} ({path.parent})",
                                   hint=f"free some space there, then {then}")
    if exc.errno == errno.ENOTDIR:
        file = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), path.parent)
        return InfrastructureError(f"cannot write {path}: {file} is a file, not a folder",
                                   hint=f"move that file away, then {then}")
    if exc.errno == errno.EISDIR:  # a folder where wfqueue keeps a file (`up`'s up.json made a folder by hand)
        return InfrastructureError(f"cannot write {path}: it is a folder, where wfqueue keeps a file",
                                   hint=f"move that folder away, then {then}")
    return None


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or {} when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def check_writable(folder: Path, hint: str) -> None:
    """Raise InfrastructureError when ``folder`` (when not there yet: the nearest folder above it, where it
    would be created) refuses writes. Checked before a command starts anything, so that it fails with the
    folder's name instead of a traceback from the first write, half-way through."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():  # a file where the folder goes: every mkdir under it fails (NotADirectoryError)
        raise InfrastructureError(f"cannot write {folder}: {existing} is a file, not a folder",
                                  hint="move that file away: wfqueue makes a folder there")
    if os.access(existing, os.W_OK):
        return
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "read-only file system" if read_only else "permission denied"
    where = "" if existing == folder else f" on {existing}"
    raise InfrastructureError(f"cannot write {folder}: {why}{where}", hint=hint)


class MirrorSink(Protocol):
    """Where the writes under a mirrored folder also go; ``rel`` is the POSIX path relative to that folder."""

    def put(self, rel: str, data: bytes) -> None: ...

    def remove(self, rel: str) -> None: ...

    def locked_update(self, rel: str, update: Callable[[str | None], str], timeout_s: float) -> str:
        """Apply ``update`` to the sink's copy of ``rel`` (None when it has none) under a lock every
        writer of the sink honours, store the result and return it."""
        ...


class _Mirror:
    def __init__(self, root: Path, sink: MirrorSink) -> None:
        self.root = root
        self.sink = sink


# Process-wide rather than per context: a thread that a task starts writes to the same folder, and must be
# mirrored too. Two mirrors of one folder (two tasks of a session in one process) hold equivalent sinks.
_mirrors: list[_Mirror] = []
_mirrors_lock = threading.Lock()


def real_path(path: Path) -> Path:
    """``path`` without symlinks and ``..`` (a folder given one way then matches a path given another). Unlike
    ``Path.resolve``, which raises RuntimeError there on Python 3.11, links that loop are left as they are: a
    read or write through them then fails as any unreadable file does."""
    return Path(os.path.realpath(path))


@contextmanager
def mirroring(root: Path, sink: MirrorSink) -> Iterator[None]:
    """While inside, every write, removal and locked update of a file under ``root`` also goes to ``sink``.

    The innermost mirrored folder that holds a path is the one it is mirrored to; paths outside every
    mirrored folder are written to disk only."""
    entry = _Mirror(real_path(root), sink)
    with _mirrors_lock:
        _mirrors.append(entry)
    try:
        yield
    finally:
        with _mirrors_lock:
            _mirrors[:] = [m for m in _mirrors if m is not entry]


def mirror_of(path: Path) -> tuple[MirrorSink, str] | None:
    """The sink that ``path`` is mirrored to and the path relative to its folder, or None."""
    if not _mirrors:  # the common case, shared disk or no session: no realpath per write
        return None
    with _mirrors_lock:
        mirrors = list(_mirrors)
    real = real_path(path)
    best: _Mirror | None = None
    for mirror in mirrors:
        if real != mirror.root and real.is_relative_to(mirror.root) and (
                best is None or len(mirror.root.parts) >= len(best.root.parts)):
            best = mirror
    return None if best is None else (best.sink, real.relative_to(best.root).as_posix())


def _process_umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: put straight back, at import
    os.umask(mask)
    return mask


# The file mode a new file gets from open(): what the user's umask allows, as for every other program. The
# temporary file an atomic write renames is made private (mkstemp), and would leave every artifact 0600.
_NEW_FILE_MODE = 0o666 & ~_process_umask()


def atomic_write_bytes(path: Path, data: bytes, *, mirror: bool = True, mode: int | None = None) -> bool:
    """Write ``data`` to ``path`` atomically; returns False when the file already held it.

    Skipping identical content keeps redelivered tasks from touching mtimes. On
    failure the old file (if any) is intact and the temporary file removed, when
    the folder still allows it. Under a mirrored folder the content also goes to
    its sink, even when the file already held it (the sink may not have it yet);
    ``mirror=False`` writes the disk only (a folder being filled from its sink). ``mode``: the file's
    permissions from the start (0o600 for a secret); by default those of the file it replaces, else what the
    umask gives a new file."""
    changed = _write_bytes(path, data, mode)
    target = mirror_of(path) if mirror else None
    if target is not None:
        sink, rel = target
        sink.put(rel, data)
    return changed


def _write_bytes(path: Path, data: bytes, mode: int | None = None) -> bool:
    try:
        if path.read_bytes() == data and (mode is None or path.stat().st_mode & 0o777 == mode):
            return False
    except FileNotFoundError:
        pass
    with unwritable_is_infrastructure(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o7777
            except FileNotFoundError:
                mode = _NEW_FILE_MODE
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # gone already, or the folder no longer allows it: a hidden .tmp file, the real one whole
            raise
    return True


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> bool:
    """UTF-8 text through :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def dumps_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def atomic_write_json(path: Path, data: Any) -> bool:
    return atomic_write_text(path, dumps_json(data))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def remove(path: Path, *, missing_ok: bool = False, mirror: bool = True) -> None:
    """Delete ``path`` (as ``Path.unlink``); under a mirrored folder its sink forgets it too, so the
    other copies of the folder lose it when they are next filled."""
    with unwritable_is_infrastructure(path):
        path.unlink(missing_ok=missing_ok)
    target = mirror_of(path) if mirror else None
    if target is not None:
        sink, rel = target
        sink.remove(rel)


_process_locks: PerProcess[str, threading.Lock] = PerProcess()


def _process_lock(path: Path) -> threading.Lock:
    """This process's lock for ``path`` (one per real path, kept for the life of the process: a few files)."""
    return _process_locks.get(os.path.realpath(path), threading.Lock)


def lock_for(path: Path, timeout_s: float) -> FileLock:
    return FileLock(str(path) + ".lock", timeout=timeout_s)


def locked_update(path: Path, update: Callable[[str | None], str], timeout_s: float) -> str:
    """Read ``path`` (None when missing), apply ``update``, write the result atomically,
    all while holding the file's lock. Returns the written text.

    Under a mirrored folder the sink's copy is the one read and updated, under the sink's
    lock (a file lock serialises only the writers of one disk); the local file is written
    while that lock is held, so it never goes back to an older text."""
    target = mirror_of(path)
    if target is not None:
        sink, rel = target

        def update_and_write(current: str | None) -> str:
            new = update(current)
            _write_bytes(path, new.encode("utf-8"))
            return new

        return sink.locked_update(rel, update_and_write, timeout_s)
    # Threads of one process (a threads pool) queue on a lock of the process first: a thread lock is handed
    # over the moment it is released, where waiters on the file lock poll for it. The file lock then only
    # decides between processes.
    in_process = _process_lock(path)
    began = time.monotonic()
    try:
        if not in_process.acquire(timeout=timeout_s):
            raise Timeout(str(path))
        try:
            with unwritable_is_infrastructure(path):  # taking the lock creates a .lock file
                lock = lock_for(path, max(0.0, timeout_s - (time.monotonic() - began)))
                lock.acquire()
            try:
                try:
                    current: str | None = path.read_text(encoding="utf-8")
                except FileNotFoundError:
                    current = None
                new = update(current)
                atomic_write_text(path, new)
                return new
            finally:
                lock.release()
        finally:
            in_process.release()
    except Timeout:
        raise InfrastructureError(
            f"timed out after {timeout_s:.0f}s waiting for the lock on {path}",
            hint=f"another process holds {path}.lock; if none is running, delete the lock file",
        ) from None
