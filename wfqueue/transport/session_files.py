"""A session folder's files in Redis, for workers that share no disk with the coordinator.

Each copy of a session folder (a worker's own, the coordinator's real one) is
filled from the session's files hash (:func:`hydrate`) and, while
:func:`mirrored`, sends every write and removal under it back there through
``wfqueue.fsio``. A removal leaves a marker rather than nothing, so copies that
still hold the file lose it when they are next filled. Updates that several
hosts make to one file (the sections of plan-note.md) take a lock in Redis in
place of the file lock, which serialises only the writers of one disk.

Hash fields are POSIX paths relative to the folder; a field that would leave the
folder is refused when stored and skipped when filling a folder. Values are the
file's bytes behind a one-byte marker: ``f`` for a file, ``r`` for a removed one.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, cast

import redis

from wfqueue import fsio, keys
from wfqueue.errors import InfrastructureError
from wfqueue.state import RELEASE_IF_OWNER, as_text, raw_reply

log = logging.getLogger(__name__)

_FILE = b"f"
_REMOVED = b"r"
# How long a lock outlives a holder that died: the holder needs it for one read and one write (milliseconds),
# and its write is refused once the lock is no longer its own, so a short lease cannot lose an update.
LOCK_LEASE_S = 30.0
_POLL_S = 0.02

# The write of a locked update lands only while the lock is still the writer's own, and releases it.
_COMMIT = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('hset', KEYS[2], ARGV[2], ARGV[3])
redis.call('expire', KEYS[2], ARGV[4])
redis.call('del', KEYS[1])
return 1
"""


def checked_rel(rel: str) -> str:
    """``rel`` when it names a file inside a folder (relative, POSIX, no ``..``, ``.`` or empty part),
    else an InfrastructureError: such a name must never be written or read as a session file."""
    parts = rel.split("/")
    if not rel or PurePosixPath(rel).is_absolute() or "\x00" in rel or any(p in ("", ".", "..") for p in parts):
        raise InfrastructureError(
            f"refusing the session file path {rel!r}: not a relative path inside the session folder",
            hint="session files are named by their path inside the session folder; such a field in the "
                 "session's files in Redis was not written by wfqueue: delete it",
        )
    return rel


class SessionFiles:
    """One session's files in Redis (the hash ``keys.FILES`` of the session), as bytes.

    wfqueue's clients decode replies; the reads here ask the client for the raw bytes,
    so any client of the broker works and a file's bytes come back unchanged."""

    def __init__(self, client: redis.Redis, session_id: str, ttl_s: int) -> None:
        self.client = client
        self.session_id = session_id
        self.ttl_s = ttl_s
        self.prefix = keys.session_prefix(session_id)
        self.key = self.prefix + keys.FILES

    # -- plain reads and writes ---------------------------------------------------------------

    def put(self, rel: str, data: bytes) -> None:
        self._store(checked_rel(rel), _FILE + data)

    def remove(self, rel: str) -> None:
        """Forget the file, leaving the marker that makes every copy of the folder delete it."""
        self._store(checked_rel(rel), _REMOVED)

    def get(self, rel: str) -> bytes | None:
        return _content(cast(bytes | None, raw_reply(self.client, "HGET", self.key, checked_rel(rel))))

    def get_all(self) -> dict[str, bytes]:
        """Every file stored (removed ones and fields with an unsafe name left out), by relative path."""
        found = {}
        for rel, content in self.entries().items():
            try:
                checked_rel(rel)
            except InfrastructureError as exc:
                log.error("session %s: %s", self.session_id, exc.message)
                continue
            if content is not None:
                found[rel] = content
        return found

    def entries(self) -> dict[str, bytes | None]:
        """Every field as stored, names unchecked: the content, or None for a removed file."""
        raw = cast(dict[Any, bytes], raw_reply(self.client, "HGETALL", self.key))
        found = {}
        for name, value in raw.items():
            try:
                found[as_text(name)] = _content(value)
            except InfrastructureError as exc:  # one unreadable field must not hide the others
                log.error("session %s: %s: %s (skipped)", self.session_id, as_text(name), exc.message)
        return found

    def _store(self, rel: str, value: bytes) -> None:
        pipe = self.client.pipeline()  # MULTI: the field and the TTL land together
        pipe.hset(self.key, rel, value)
        pipe.expire(self.key, self.ttl_s)
        pipe.srem(self.prefix + keys.FILES_SYNCED, rel)  # newer than what the coordinator's folder last took
        pipe.execute()

    # -- the lock that stands in for a file lock --------------------------------------------------

    def locked_update(self, rel: str, update: Callable[[str | None], str], timeout_s: float) -> str:
        """Read the file (None when missing), apply ``update``, store the result, all under the file's
        lock in Redis; returns the stored text. ``update`` may run more than once (a lock whose lease ran
        out before the write is taken again), so it must depend only on the text it is given."""
        rel = checked_rel(rel)
        lock_key = self.prefix + keys.FILES_LOCK_PREFIX + rel
        token = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        deadline = time.monotonic() + timeout_s
        while True:
            if self.client.set(lock_key, token, nx=True, px=int(LOCK_LEASE_S * 1000)):
                try:
                    current = self.get(rel)
                    new = update(None if current is None else current.decode("utf-8"))
                    if self.client.eval(_COMMIT, 2, lock_key, self.key, token, rel, _FILE + new.encode("utf-8"),
                                        self.ttl_s):
                        self.client.srem(self.prefix + keys.FILES_SYNCED, rel)  # as _store
                        return new
                finally:
                    self.client.eval(RELEASE_IF_OWNER, 1, lock_key, token)  # a no-op once committed
                continue  # the lease ran out before the write: take the lock again, read again
            if time.monotonic() >= deadline:
                holder = self.client.get(lock_key)
                raise InfrastructureError(
                    f"timed out after {timeout_s:.0f}s waiting for the lock on {rel} of session {self.session_id}",
                    hint=f"{as_text(holder) if holder else 'another worker'} holds the Redis key {lock_key}; "
                         f"if that process is gone, the lock expires within {LOCK_LEASE_S:.0f}s: "
                         "then `wfqueue resume` the session",
                )
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))


def _content(value: bytes | None) -> bytes | None:
    """A stored value's file content; None for a removed file (or no value)."""
    if value is None or value == _REMOVED:
        return None
    if not value.startswith(_FILE):
        raise InfrastructureError(f"a session file in Redis is not in wfqueue's format (starts {value[:8]!r})",
                                  hint="a different wfqueue version wrote it: use one version for every host")
    return value[len(_FILE):]


def hydrate(files: SessionFiles, root: Path, only: Callable[[str], bool] | None = None) -> int:
    """Write every file the session has in Redis into ``root`` and delete the ones removed there (with
    ``only``: the paths it accepts); returns how many files changed. Identical files are not rewritten, and
    nothing written here goes back to Redis even when ``root`` is mirrored. A field whose name would leave
    ``root`` is skipped, logged."""
    real_root = Path(os.path.realpath(root))
    changed = 0
    for rel, content in sorted(files.entries().items()):
        if only is not None and not only(rel):
            continue
        try:
            path = root / checked_rel(rel)
            if not Path(os.path.realpath(path)).is_relative_to(real_root):  # through a symlink in the folder
                raise InfrastructureError(f"refusing the session file path {rel!r}: it leads out of {root}",
                                          hint=f"remove the symlink on the way in {root}")
        except InfrastructureError as exc:
            log.error("session %s: %s (skipped)", files.session_id, exc.message)
            continue
        if content is None:
            if path.exists():
                fsio.remove(path, missing_ok=True, mirror=False)
                changed += 1
        elif fsio.atomic_write_bytes(path, content, mirror=False):
            changed += 1
    return changed


@contextmanager
def mirrored(root: Path, files: SessionFiles) -> Iterator[SessionFiles]:
    """While inside, every fsio write and removal under ``root`` also goes to ``files``, and
    ``fsio.locked_update`` there takes the file's lock in Redis (see ``wfqueue.fsio.mirroring``)."""
    with fsio.mirroring(root, files):
        yield files
