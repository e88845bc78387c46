"""The one seam where wfqueue writes files.

Every artifact is written atomically (a temporary file in the same folder, then
``os.replace``) so a reader never sees half a file, and writes that several
processes make to one file go through :func:`locked_update`, a read-modify-write
under a file lock. File locks only serialise writers that share a local disk;
across hosts the callback rebuilds shared files from Redis (see collab/finalize).
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from wfqueue.errors import InfrastructureError

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
        if exc.errno in _NOT_WRITABLE:
            raise InfrastructureError(
                f"cannot write {path}: {_NOT_WRITABLE[exc.errno]} on {path.parent}",
                hint="make the session folder writable again, then `wfqueue resume` the session",
            ) from None
        if exc.errno in _FULL:
            raise InfrastructureError(
                f"cannot write {path}: {_FULL[exc.errno]} ({path.parent})",
                hint="free some space there, then `wfqueue resume` the session",
            ) from None
        raise


def atomic_write_bytes(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically; returns False when the file already held it.

    Skipping identical content keeps redelivered tasks from touching mtimes. On
    failure the old file (if any) is intact and the temporary file removed, when
    the folder still allows it."""
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    with unwritable_is_infrastructure(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
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


def atomic_write_text(path: Path, text: str) -> bool:
    """UTF-8 text through :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def atomic_write_json(path: Path, data: Any) -> bool:
    return atomic_write_text(path, dumps_json(data))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def lock_for(path: Path, timeout_s: float) -> FileLock:
    return FileLock(str(path) + ".lock", timeout=timeout_s)


def locked_update(path: Path, update: Callable[[str | None], str], timeout_s: float) -> str:
    """Read ``path`` (None when missing), apply ``update``, write the result atomically,
    all while holding the file's lock. Returns the written text."""
    try:
        with unwritable_is_infrastructure(path):  # taking the lock creates a .lock file
            lock = lock_for(path, timeout_s)
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
    except Timeout:
        raise InfrastructureError(
            f"timed out after {timeout_s:.0f}s waiting for the lock on {path}",
            hint=f"another process holds {path}.lock; if none is running, delete the lock file",
        ) from None
