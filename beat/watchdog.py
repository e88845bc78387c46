"""The stalled-session watchdog: gather a snapshot, ask beat.timing, act at most once.

Why it exists: a chord whose header message is lost (or whose Redis counter
overshoots after a redelivery) never fires its callback, and the coordinator
would wait until its plan timeout. The watchdog re-enqueues the missing work
once; if that does not progress either, it marks what is left failed and runs
the callback alone, so the plan completes as ``partial`` and says why. Whether
and how a session may be recovered is its kind's ``recovery``
(``wfqueue.workflow.registry``); a kind without one is only reported.

Each action is taken under a ``SET NX EX`` key of the session (the key also
records when), so two beats or a redelivered watchdog task act once.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from pydantic import BaseModel

from beat.names import (
    WATCHDOG_FINALIZED,
    WATCHDOG_FINALIZED_ISO,
    WATCHDOG_REENQUEUED,
    WATCHDOG_REPORTED,
)
from beat.snapshot import agent_snapshots, guard, iter_metas, mark_progress, session_snapshot
from beat.timing import (
    TERMINAL_AGENT_STATES,
    SessionSnapshot,
    is_finished,
    last_progress,
    stalled_for,
    stalled_reason,
    unfinished_areas,
    watchdog_action,
)
from wfqueue import keys
from wfqueue.errors import BadInputError
from wfqueue.keys import AgentState
from wfqueue.settings import Settings
from wfqueue.state import SessionState
from wfqueue.workflow.kind import WatchdogRecovery, WorkflowKind
from wfqueue.workflow.registry import kind_named

log = logging.getLogger("wfqueue.beat.watchdog")


class WatchReport(BaseModel):
    """What the watchdog decided for one session and whether this run performed it."""

    kind: str | None
    decision: str
    acted: bool = False
    stalled_s: float = 0.0
    note: str = ""


def watch_all(app: Celery, client: redis.Redis, settings: Settings, now: float | None = None) -> dict[str, Any]:
    """One watchdog pass over every session; returns {session_id: report} for sessions not finished."""
    reports: dict[str, Any] = {}
    checked = 0
    for state, meta in iter_metas(client, settings.state_ttl_s):
        checked += 1
        if is_finished(meta.get("status")):
            continue  # the common case, decided without reading the agent records
        at = time.time() if now is None else now
        try:
            report = watch_one(app, state, meta, settings, at)
        except Exception as exc:  # one broken session must not stop the pass over the others
            log.exception("watchdog: session %s skipped after an error", state.session_id)
            report = WatchReport(kind=meta.get("kind"), decision="error", note=f"{type(exc).__name__}: {exc}")
        reports[state.session_id] = report.model_dump()
    return {"checked": checked, "sessions": reports}


def watch_one(app: Celery, state: SessionState, meta: dict[str, Any], settings: Settings, now: float) -> WatchReport:
    snapshot = session_snapshot(state, meta, now)
    decision = watchdog_action(snapshot, now, settings.watchdog_deadline_s, settings.watchdog_grace_s)
    report = WatchReport(kind=snapshot.kind, decision=decision, stalled_s=round(stalled_for(snapshot, now), 3))
    if decision in ("wait", "done"):
        return report
    session_dir = meta.get("session_dir")
    kind = kind_named(snapshot.kind)
    if kind is None or kind.recovery is None or not session_dir:
        # A kind without recovery waits on its coordinator (often on a person answering
        # questions), so the watchdog only says what it sees.
        return _report_only(state, snapshot, report, settings, now, _missing(kind, state, session_dir))
    if decision == "reenqueue":
        return _reenqueue(app, kind.recovery, state, snapshot, meta, Path(session_dir), report, settings, now)
    return _finalize(app, kind.recovery, state, snapshot, Path(session_dir), report, now)


def _missing(kind: WorkflowKind | None, state: SessionState, session_dir: str | None) -> str:
    """What the session's kind says is not done yet, for the report ('' when it cannot tell)."""
    if kind is None or not session_dir:
        return ""
    try:
        missing = kind.missing_work(state, Path(session_dir))
    except (OSError, ValueError, BadInputError):  # its folder is gone or unreadable: the agent records still tell
        return ""
    return f"missing: {', '.join(missing)}" if missing else ""


def _report_only(state: SessionState, snapshot: SessionSnapshot, report: WatchReport, settings: Settings,
                 now: float, note: str = "") -> WatchReport:
    # Logged once per deadline window, not on every pass.
    acted = guard(state.client, state.prefix + WATCHDOG_REPORTED, settings.watchdog_deadline_s, repr(now))
    if acted:
        log.warning("session %s (%s) looks stalled: no progress for %.0f s; unfinished: %s%s",
                    snapshot.session_id, snapshot.kind or "unknown kind", report.stalled_s,
                    ", ".join(unfinished_areas(snapshot)) or "none (waiting for its coordinator)",
                    f" ({note})" if note else "")
    return report.model_copy(update={"decision": "report", "acted": acted, "note": note})


def _reenqueue(app: Celery, recovery: WatchdogRecovery, state: SessionState, snapshot: SessionSnapshot,
               meta: dict[str, Any], session_dir: Path, report: WatchReport, settings: Settings,
               now: float) -> WatchReport:
    watched = recovery.watched(state, session_dir)
    if watched is None:
        return _report_only(state, snapshot, report, settings, now, "nothing recorded to re-enqueue from")
    # The key is the guard and the record of when: only its first writer re-enqueues.
    if not guard(state.client, state.prefix + WATCHDOG_REENQUEUED, state.ttl_s, repr(now)):
        return report.model_copy(update={"note": "already re-enqueued"})
    missing, result = recovery.reenqueue(app, state, session_dir, str(meta.get("provider") or "offline"))
    state.set_meta(chord_id=result.id)
    # Re-enqueueing rewrote the agent records; that change is the watchdog's own doing, not
    # progress, so the last progress stays where it was (the grace is counted from the re-enqueue).
    quiet_since = last_progress(snapshot)
    mark_progress(state, agent_snapshots(state, watched), now if quiet_since is None else quiet_since)
    log.warning("session %s: no progress for %.0f s, re-enqueued %s", state.session_id, report.stalled_s,
                ", ".join(missing) if missing else "the callback alone")
    return report.model_copy(update={"acted": True, "note": f"re-enqueued: {', '.join(missing) or 'callback'}"})


def _finalize(app: Celery, recovery: WatchdogRecovery, state: SessionState, snapshot: SessionSnapshot,
              session_dir: Path, report: WatchReport, now: float) -> WatchReport:
    if not guard(state.client, state.prefix + WATCHDOG_FINALIZED, state.ttl_s, repr(now)):
        return report.model_copy(update={"note": "already finalised"})
    reason = stalled_reason(report.stalled_s)
    failed = []
    for area in unfinished_areas(snapshot):
        # Re-read just before writing: an agent that finished since the snapshot keeps its result.
        if state.agent(area).get("state") in TERMINAL_AGENT_STATES or state.recall(keys.result_key(area)) is not None:
            continue
        state.set_agent(area, state=AgentState.FAILED, error=reason, finished_at=now)
        failed.append(area)
    # The coordinator stops waiting for the chord once this and the final result exist.
    state.store(WATCHDOG_FINALIZED_ISO, datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"))
    recovery.finalize(app, state, session_dir)
    log.warning("session %s: no progress for %.0f s, re-enqueued work included; finalising as partial (stalled: %s)",
                state.session_id, report.stalled_s, ", ".join(failed) or "none")
    return report.model_copy(update={"acted": True, "note": f"stalled: {', '.join(failed) or 'none'}"})
