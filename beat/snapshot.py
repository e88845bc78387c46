"""Reading what the maintenance tasks decide on: sessions, agent records, repositories.

Everything here only reads Redis, except two bookkeeping writes that must be
shared by every beat and worker: the watchdog's record of when a session's
agent records last changed, and the set of repositories sessions named. The
action guards (``guard``) live here too so every task takes them the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import redis

from beat.names import REPOS_KEY, WATCHDOG_FINALIZED, WATCHDOG_PROGRESS, WATCHDOG_REENQUEUED
from beat.timing import AgentSnapshot, SessionSnapshot, progress_fingerprint, should_forget_repo
from wfqueue import keys
from wfqueue.errors import DamagedStateError
from wfqueue.sessions import SESSION_ID_PATTERN
from wfqueue.state import SessionState, as_text, raw_reply

log = logging.getLogger("wfqueue.beat")

META_SUFFIX = ":" + keys.META


def guard(client: redis.Redis, key: str, ttl_s: float, value: str = "1") -> bool:
    """True for the one caller that takes ``key`` within ``ttl_s``: two beats, or a task
    delivered twice, never perform the same action twice."""
    return bool(client.set(key, value, nx=True, ex=max(1, int(ttl_s))))


def session_ids(client: redis.Redis) -> list[str]:
    """Every session with a meta hash. Ids are checked: ``wfq:*:meta`` also matches
    e.g. an agent named "meta" (``wfq:{sid}:agent:meta``), whose "id" has a colon."""
    found = set()
    cursor: bytes | int = 0
    while True:  # raw replies: a key name that is not UTF-8 (no session's) failed every pass in the client's decoding
        cursor, names = raw_reply(client, "SCAN", str(int(cursor)), "MATCH", keys.KEY_ROOT + "*" + META_SUFFIX,
                                  "COUNT", "500")
        for name in names:
            sid = name.decode("utf-8", "replace")[len(keys.KEY_ROOT):-len(META_SUFFIX)]
            if SESSION_ID_PATTERN.match(sid):
                found.add(sid)
        if int(cursor) == 0:
            return sorted(found)


def iter_metas(client: redis.Redis, ttl_s: int) -> Iterator[tuple[SessionState, dict[str, Any]]]:
    for sid in session_ids(client):
        state = SessionState(client, sid, ttl_s)
        try:
            meta = state.meta()
        except (DamagedStateError, ValueError, redis.ResponseError) as exc:  # a hand-written or foreign key: skip
            log.warning("session %s: unreadable meta (%s), skipped", sid, exc)
            continue
        if meta:
            yield state, meta


def _float(value: str | bytes | float | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def iso_to_ts(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def agent_areas(state: SessionState) -> list[str]:
    """Areas (collab) or angles (lite, workflow) that have an agent record."""
    prefix = state.prefix + keys.AGENT_PREFIX
    return sorted(key[len(prefix):] for key in state.client.scan_iter(match=prefix + "*", count=500))


def collab_areas(state: SessionState) -> list[str] | None:
    """The sub-domains of a collab session's stored analysis, or None before the understanding step."""
    raw = state.recall(keys.ANALYSIS)
    if raw is None:
        return None
    try:
        return [sub["focus_area"] for sub in json.loads(raw)["sub_domains"]]
    except (ValueError, KeyError, TypeError):
        return None


def agent_snapshots(state: SessionState, areas: list[str]) -> list[AgentSnapshot]:
    """Agent records of ``areas``; an area without a record has not been enqueued and is left out."""
    agents = []
    for area, record in state.agents(areas).items():
        if not record:
            continue
        agents.append(AgentSnapshot(area=area, state=str(record.get("state") or "unknown"),
                                    started_at=_float(record.get("started_at")),
                                    finished_at=_float(record.get("finished_at")),
                                    alive_at=_float(record.get("alive_at")),
                                    beat_every_s=_float(record.get("beat_every_s"))))
    return agents


def observe_progress(state: SessionState, agents: list[AgentSnapshot], now: float) -> float | None:
    """When the agent records last changed, as this watchdog saw it (stored in Redis, shared by every beat).

    Agent records carry times only when a worker starts or finishes; a retry, a
    re-enqueue or a resume changes a record without one. Comparing a digest of
    the records with the last pass catches those, and gives a session whose
    header messages were lost before any agent started a time to measure from."""
    if not agents:
        return None
    fingerprint = progress_fingerprint(agents)
    raw = state.recall(WATCHDOG_PROGRESS)
    try:
        seen = json.loads(raw) if raw else None
    except ValueError:
        seen = None
    if isinstance(seen, dict) and seen.get("fingerprint") == fingerprint and _float(seen.get("since")) is not None:
        return _float(seen["since"])
    mark_progress(state, agents, now)
    return now


def mark_progress(state: SessionState, agents: list[AgentSnapshot], since: float) -> None:
    """Record ``agents`` as seen, with their last progress at ``since``."""
    state.store(WATCHDOG_PROGRESS, json.dumps({"fingerprint": progress_fingerprint(agents), "since": since}))


def session_snapshot(state: SessionState, meta: dict[str, Any], now: float) -> SessionSnapshot:
    areas = collab_areas(state) if meta.get("kind") == "collab" else None
    agents = agent_snapshots(state, areas if areas is not None else agent_areas(state))
    return SessionSnapshot(
        session_id=state.session_id,
        kind=meta.get("kind"),
        status=meta.get("status"),
        agents=agents,
        observed_since=observe_progress(state, agents, now),
        reenqueued_at=_float(state.recall(WATCHDOG_REENQUEUED)),
        finalized_at=_float(state.recall(WATCHDOG_FINALIZED)),
    )


def last_activity(state: SessionState) -> float | None:
    """The latest time anything recorded for the session (agent times, stored timestamps, the watchdog's)."""
    times = [t for a in agent_snapshots(state, agent_areas(state)) for t in (a.started_at, a.finished_at) if t]
    times += [t for t in (iso_to_ts(state.recall(name)) for name in keys.ACTIVITY_KEYS) if t is not None]
    raw = state.recall(WATCHDOG_PROGRESS)
    if raw:
        try:
            since = _float(json.loads(raw).get("since"))
        except (ValueError, AttributeError):
            since = None
        if since is not None:
            times.append(since)
    return max(times) if times else None


def known_repos(client: redis.Redis, ttl_s: int, now: float, keep_days: float,
                extra: list[str] | None = None) -> list[Path]:
    """Repositories to look after: those session metas name now, and those they named in the
    last ``keep_days`` (metas expire long before a session is old enough to archive)."""
    seen = {str(meta["repo"]) for _, meta in iter_metas(client, ttl_s) if meta.get("repo")}
    if client.type(REPOS_KEY) not in ("hash", b"hash", "none", b"none"):
        # Not the hash beat writes (set by hand, or by another program): every hourly pass failed on it with
        # WRONGTYPE, for good. What it remembered is lost; the repositories of live sessions are known again now.
        log.warning("%s is not a hash: replaced (repositories of sessions that expired are forgotten)", REPOS_KEY)
        client.delete(REPOS_KEY)
    if seen:
        client.hset(REPOS_KEY, mapping={repo: repr(now) for repo in seen})
    repos = set(extra or [])
    for repo, raw in client.hgetall(REPOS_KEY).items():
        last = _float(raw)
        if last is None or should_forget_repo(last, now, keep_days):
            client.hdel(REPOS_KEY, repo)
            continue
        repos.add(as_text(repo))
    return [Path(r) for r in sorted(repos) if Path(r).is_dir()]
