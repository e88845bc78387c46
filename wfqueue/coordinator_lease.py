"""One coordinator per session: its claim in Redis, who holds it, and whether a new session may take an id.

A coordinator (a plan command, a resume) claims its session's id with a key that expires unless refreshed, so a
coordinator that dies frees its session for `wfqueue resume` within the lease's time.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from pathlib import Path

import redis

from wfqueue.errors import SessionBusyError, SessionIdTakenError, WfqueueError
from wfqueue.pids import died_here
from wfqueue.settings import Settings
from wfqueue.state import RELEASE_IF_OWNER, SessionState, connect, maybe_text


def holder_is_dead(holder: str) -> bool:
    """A coordinator claim left by a crashed coordinator on this host (same hostname, pid gone)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    return pid.isdigit() and died_here(host, int(pid))


def live_holder(state: SessionState) -> str | None:
    """The coordinator that claims ``state``'s session now, unless its claim expired or it died on this host."""
    holder = maybe_text(state.client.get(state.coordinator_key()))
    return holder if holder and not holder_is_dead(holder) else None


def coordinator_gone(settings: Settings, session_id: str) -> bool:
    """Whether no live coordinator holds ``session_id`` on the configured broker: its claim expired, or its holder
    on this host died. False when the broker cannot be asked (nothing is claimed that is not known)."""
    try:
        return live_holder(SessionState(connect(settings), session_id, settings.state_ttl_s)) is None
    except (WfqueueError, redis.RedisError):
        return False


def taken_by_another(state: SessionState, session_dir: str | None) -> str | None:
    """Why a new session in ``session_dir`` may not take ``state``'s id on this broker (ids are unique per
    repository only), or None. Taken: a live coordinator holds it, or, with none left, it is another folder's
    session (another repository's, on a shared broker), whose agents may still run and write there and whose
    resume and status read it, until WFQUEUE_STATE_TTL_S forgets it."""
    holder = live_holder(state)
    if holder is not None:
        return f"the session id {state.session_id} is in use on this broker by {holder}; nothing of that " \
               "session was touched"
    recorded = state.session_meta().session_dir
    if recorded is not None and session_dir is not None and recorded != session_dir:
        return f"the session id {state.session_id} belongs on this broker to {recorded}; nothing of that " \
               "session was touched"
    return None


class CoordinatorLease:
    """One coordinator per session: a claim in Redis, kept alive while the coordinator runs.

    A second coordinator (a `resume` while the plan still runs, two `plan --session`)
    is refused with the holder's name. A coordinator that dies stops refreshing,
    so its claim expires after ``ttl_s`` and the session can be resumed."""

    def __init__(self, state: SessionState, ttl_s: float = 30.0, fresh: bool = False,
                 session_dir: str | None = None) -> None:
        self.state = state
        self.ttl_s = ttl_s
        self.fresh = fresh  # a new session: forget what Redis holds under its id, then claim it
        self.session_dir = session_dir  # a new session's folder: Redis's state of another folder is not its
        self.key = state.coordinator_key()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CoordinatorLease:
        if self.fresh:
            # Ids are unique per repository only: on a shared broker another repository's live session may
            # have this id. Its keys must not be reset; the caller picks another id.
            taken = taken_by_another(self.state, self.session_dir)
            if taken is not None:
                raise SessionIdTakenError(taken, hint="run the command again: it takes the next id")
            self.state.reset()  # before the claim: reset deletes every key of the session
        else:
            # Going on with a session whose id another folder's session holds here (a copy of the repository, or
            # another one that planned the same words): it would write into that session's state.
            recorded = self.state.session_meta().session_dir
            if recorded is not None and self.session_dir is not None and recorded != self.session_dir \
                    and Path(recorded).is_dir():
                raise SessionIdTakenError(
                    f"the session id {self.state.session_id} belongs on this broker to {recorded}; "
                    f"{self.session_dir} cannot go on under it without taking that session over",
                    hint="plan the requirement again here (it takes another id), or go on with the session where "
                         "it lives")
        claimed = self.state.client.set(self.key, self.owner, nx=True, px=int(self.ttl_s * 1000))
        holder = "" if claimed else (maybe_text(self.state.client.get(self.key)) or "")
        if not claimed and holder and holder_is_dead(holder):
            self.state.client.eval(RELEASE_IF_OWNER, 1, self.key, holder)
            claimed = self.state.client.set(self.key, self.owner, nx=True, px=int(self.ttl_s * 1000))
        if not claimed:
            holder = maybe_text(self.state.client.get(self.key)) or "another coordinator"
            raise SessionBusyError(
                f"session {self.state.session_id} is already being driven by {holder}",
                hint=f"wait for that command to finish; if it crashed, its claim expires within {self.ttl_s:.0f}s",
            )
        self._thread = threading.Thread(target=self._refresh, name="wfq-lease", daemon=True)
        self._thread.start()
        return self

    def _refresh(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if self.state.client.get(self.key) == self.owner:
                    self.state.client.pexpire(self.key, int(self.ttl_s * 1000))
                    # The meta lives as long as the session is driven: its TTL ran from its last write, and a
                    # long execution outlived it (the coordinator then took the session for lost).
                    self.state.keep_meta()
            except redis.RedisError:
                pass  # a broker hiccup: the next refresh tries again

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        try:
            self.state.client.eval(RELEASE_IF_OWNER, 1, self.key, self.owner)
        except redis.RedisError:
            pass  # the claim expires on its own
