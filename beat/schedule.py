"""The beat schedule: which maintenance task runs how often. Pure."""

from __future__ import annotations

from typing import Any

from beat.names import BEAT_ARCHIVE, BEAT_LOCKS, BEAT_PURGE, BEAT_QUEUE, BEAT_WATCHDOG
from wfqueue.settings import Settings

MAINTENANCE_INTERVAL_S = 3600.0  # purge, locks, archive: their rules count in hours and days


def _options(interval_s: float) -> dict[str, Any]:
    return {
        "queue": BEAT_QUEUE,
        # A run nobody picked up before the next one is due is dropped, not piled up behind a
        # stopped worker; the next run does the same work.
        "expires": interval_s,
        # Nobody waits for these results: don't fill the result backend with one per minute.
        "ignore_result": True,
    }


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """``app.conf.beat_schedule`` for these settings: the watchdog every ``watchdog_interval_s``, the rest hourly."""
    intervals = {
        BEAT_WATCHDOG: settings.watchdog_interval_s,
        BEAT_PURGE: MAINTENANCE_INTERVAL_S,
        BEAT_LOCKS: MAINTENANCE_INTERVAL_S,
        BEAT_ARCHIVE: MAINTENANCE_INTERVAL_S,
    }
    return {name: {"task": name, "schedule": interval, "options": _options(interval)}
            for name, interval in intervals.items()}
