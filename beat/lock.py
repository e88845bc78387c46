"""The single-scheduler lock: one beat per broker, or periodic tasks run twice.

A Redis key taken with ``SET NX EX`` whose value names the holder (host, pid,
start time, a random token), kept alive by a small thread. Refresh and release
compare the value first (in a Lua script, atomically), so a beat that lost the
key to another one after a pause never extends or deletes the other's lock.

A beat starting finds the key held by a beat that died without releasing it (killed, or its Redis killed
under it, with the key kept in the append-only file): when that beat ran on this host, in this pid namespace
(containers sharing a host name have their own), and its process is gone, the key is taken over at once
instead of after its TTL. `wfqueue up`'s hint after its Redis died says to run it again, and its new beat
found the dead one's lock. Only at start: a running beat that cannot refresh its key never takes another's.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import redis

from wfqueue.pids import died_here, pid_namespace
from wfqueue.state import RELEASE_IF_OWNER

log = logging.getLogger("wfqueue.beat")

_REFRESH = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) end return 0"
# Replace the value ARGV[1] (a dead holder's) with ARGV[2] for ARGV[3] seconds; 0 if the key holds anything else.
_TAKE_OVER = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
              "return redis.call('set', KEYS[1], ARGV[2], 'EX', ARGV[3]) and 1 end return 0")
_HOLDER = re.compile(r"^beat on (?P<host>\S+) pid (?P<pid>\d+) ns (?P<ns>\S+) since ")


def holder_description() -> str:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return (f"beat on {socket.gethostname()} pid {os.getpid()} ns {pid_namespace()} since {started} "
            f"[{secrets.token_hex(4)}]")


def holder_died(holder: str) -> bool:
    """Whether ``holder`` (a lock's value) names a beat of this host and pid namespace whose process is gone."""
    found = _HOLDER.match(holder)
    return found is not None and died_here(found["host"], int(found["pid"]), found["ns"])


class SingleInstanceLock:
    def __init__(self, client: redis.Redis, key: str, ttl_s: int, holder: str | None = None) -> None:
        self.client = client
        self.key = key
        self.ttl_s = max(3, int(ttl_s))
        self.holder = holder or holder_description()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, take_over_dead: bool = False) -> str | None:
        """None when taken; otherwise who holds it (for the refusal message). With ``take_over_dead`` (a beat
        starting), a holder that :func:`holder_died` is replaced."""
        if self.client.set(self.key, self.holder, nx=True, ex=self.ttl_s):
            return None
        other = self.client.get(self.key)
        if other is None:  # expired between the two calls: one more try
            return None if self.client.set(self.key, self.holder, nx=True, ex=self.ttl_s) else "unknown"
        if take_over_dead and holder_died(str(other)):
            if self.client.eval(_TAKE_OVER, 1, self.key, str(other), self.holder, self.ttl_s):
                log.warning("beat: took %s over from %s, which is no longer running", self.key, other)
                return None
            other = self.client.get(self.key) or "unknown"  # another beat took it first: name that one
        return str(other)

    def seconds_left(self) -> int:
        return int(self.client.ttl(self.key))

    def refresh(self) -> bool:
        """Extend our lock; False when it is no longer ours."""
        return bool(self.client.eval(_REFRESH, 1, self.key, self.holder, self.ttl_s))

    def release(self) -> None:
        self._stop.set()
        try:
            self.client.eval(RELEASE_IF_OWNER, 1, self.key, self.holder)
        except redis.RedisError as exc:  # it expires by itself within ttl_s
            log.warning("beat: could not release %s: %s", self.key, exc)

    def keep_alive(self, on_lost: Callable[[], None]) -> None:
        """Refresh every third of the TTL in a daemon thread; call ``on_lost`` once if the lock is gone."""

        def run() -> None:
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    # Gone but not taken (Redis was away longer than the TTL): take it back.
                    if self.refresh() or self.acquire() is None:
                        continue
                except redis.RedisError as exc:
                    # Redis unreachable: the key may still be ours; retry until its TTL tells.
                    log.warning("beat: could not refresh %s: %s", self.key, exc)
                    continue
                log.critical("beat: lost %s (another beat holds it now); stopping this one", self.key)
                on_lost()
                return

        self._stop.clear()  # a lock taken again after a release is kept alive again
        self._thread = threading.Thread(target=run, name="wfq-beat-lock", daemon=True)
        self._thread.start()
