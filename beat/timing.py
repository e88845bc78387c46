"""Every timing decision of the maintenance tasks, as pure functions.

No Redis, no files, no clock: the tasks gather a snapshot, pass ``now`` in,
and act on the answer. That keeps each rule testable on its own and makes two
beats (or a redelivered task) that look at the same snapshot decide the same.
All times are POSIX seconds (floats); durations say their unit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Re-exported: session statuses after which nothing more happens to a session by itself, and
# the agent states after which an agent does nothing more (both defined in wfqueue.keys).
from wfqueue.keys import FINISHED_STATUSES as FINISHED_STATUSES
from wfqueue.keys import TERMINAL_AGENT_STATES as TERMINAL_AGENT_STATES
from wfqueue.keys import SessionStatus

DAY_S = 86_400.0

WatchdogAction = Literal["wait", "reenqueue", "finalize", "done"]


class AgentSnapshot(BaseModel):
    """One agent record of a session as Redis holds it (``wfq:{sid}:agent:{area}``)."""

    model_config = ConfigDict(frozen=True)

    area: str
    state: str = Field(description="queued | running | done | failed; anything else counts as not finished")
    started_at: float | None = None
    finished_at: float | None = None
    alive_at: float | None = None  # the last heartbeat of a running agent (workers/header.heartbeat)
    # How often that agent's worker beats: its own settings', which may differ from the watchdog's worker's.
    beat_every_s: float | None = None


class SessionSnapshot(BaseModel):
    """What the watchdog knows about one session at one moment."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    kind: str | None = None
    status: str | None = None
    agents: list[AgentSnapshot] = Field(default_factory=list)
    observed_since: float | None = Field(
        default=None, description="When the watchdog last saw the agent records change (its own clock)"
    )
    reenqueued_at: float | None = Field(default=None, description="When the watchdog re-enqueued the missing work")
    finalized_at: float | None = Field(default=None, description="When the watchdog finalised the session")


def is_finished(status: str | None) -> bool:
    return status in FINISHED_STATUSES


def unfinished_areas(snapshot: SessionSnapshot) -> list[str]:
    return [a.area for a in snapshot.agents if a.state not in TERMINAL_AGENT_STATES]


def last_progress(snapshot: SessionSnapshot) -> float | None:
    """The latest sign of work: an agent starting, beating while it runs, or finishing, or its record changing."""
    times = [t for a in snapshot.agents for t in (a.started_at, a.finished_at, a.alive_at) if t is not None]
    if snapshot.observed_since is not None:
        times.append(snapshot.observed_since)
    return max(times) if times else None


def stalled_for(snapshot: SessionSnapshot, now: float) -> float:
    """Seconds since the last progress (0 when there never was any to measure from)."""
    last = last_progress(snapshot)
    return max(0.0, now - last) if last is not None else 0.0


def watchdog_action(snapshot: SessionSnapshot, now: float, deadline_s: float, grace_s: float) -> WatchdogAction:
    """What to do about one session.

    ``reenqueue`` once when no progress was seen for ``deadline_s``; after that,
    ``finalize`` when nothing progressed for ``grace_s`` since the re-enqueue (or
    since the last progress the re-enqueued work made). Sessions without agent
    records are not watched: they are still being understood or wait for the
    user to confirm the split, and a re-enqueue there would start a plan behind
    the user's back.
    """
    if is_finished(snapshot.status) or snapshot.finalized_at is not None:
        return "done"
    if not snapshot.agents:
        return "wait"
    # An agent beating less often than this worker's deadline expects (its worker has settings of its own) is
    # not stalled before it has missed beats: three of them, as heartbeat_every_s allows for.
    slowest = max((a.beat_every_s or 0.0 for a in snapshot.agents if a.state not in TERMINAL_AGENT_STATES),
                  default=0.0)
    deadline_s, grace_s = max(deadline_s, 3 * slowest), max(grace_s, 3 * slowest)
    last = last_progress(snapshot)
    if last is None:
        return "wait"  # nothing to measure from yet: the task records ``observed_since`` first
    if snapshot.reenqueued_at is None:
        return "reenqueue" if now - last >= deadline_s else "wait"
    quiet_since = max(last, snapshot.reenqueued_at)
    return "finalize" if now - quiet_since >= grace_s else "wait"


def progress_fingerprint(agents: list[AgentSnapshot]) -> str:
    """A digest of the agent records: when it changes, something happened (a retry, a start, a finish)."""
    rows = sorted((a.area, a.state, a.started_at, a.finished_at) for a in agents)
    return hashlib.sha1(json.dumps(rows).encode("utf-8")).hexdigest()


def stalled_reason(seconds: float) -> str:
    """The error recorded for an agent the watchdog gave up on (plan.md shows it)."""
    return f"stalled: no progress for {int(seconds)} s (watchdog)"


def is_stale_lock(mtime: float, now: float, max_age_s: float) -> bool:
    """A lock file untouched for ``max_age_s`` (the caller still checks nobody holds it)."""
    return now - mtime >= max_age_s


def should_archive(status: str | None, finished_at: float | None, now: float, days: int) -> bool:
    """A completed workflow session whose last update is ``days`` old."""
    return status == SessionStatus.COMPLETED and finished_at is not None and now - finished_at >= days * DAY_S


def should_purge_session(status: str | None, last_activity: float | None, now: float, ttl_s: float) -> bool:
    """A finished session whose last activity is older than the state TTL: its keys should be gone already."""
    return is_finished(status) and last_activity is not None and now - last_activity >= ttl_s


def remaining_ttl(last_activity: float | None, now: float, ttl_s: float) -> int:
    """The TTL (seconds, at least 1) to give a finished session's key that has none."""
    if last_activity is None:
        return max(1, int(ttl_s))
    return max(1, int(ttl_s - max(0.0, now - last_activity)))


def should_purge_file(mtime: float, now: float, max_age_days: int) -> bool:
    """An embedded-mode log not written for ``max_age_days``."""
    return now - mtime >= max_age_days * DAY_S


def should_forget_repo(last_seen: float, now: float, keep_days: float) -> bool:
    """A repository no session meta named for ``keep_days``: beat stops looking after it."""
    return now - last_seen >= keep_days * DAY_S


def repo_keep_days(archive_after_days: int, embedded_data_max_age_days: int) -> float:
    """How long beat remembers a repository: past the longest file rule, so its last sessions still get archived."""
    return float(max(archive_after_days, embedded_data_max_age_days) + 1)
