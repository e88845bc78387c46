"""The maintenance tasks beat schedules, registered on a worker app.

Thin on purpose: take the time once, gather, decide with beat.timing, act
(beat.watchdog, beat.housekeeping). None of them retries: each runs again at
its next interval, and every action is guarded so a second beat or a
redelivered message does nothing twice. Wire into a worker with
``beat.tasks.register(app, settings)``; they run on the ``control`` queue.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from celery import Celery

from beat.names import BEAT_ARCHIVE, BEAT_LOCKS, BEAT_PURGE, BEAT_WATCHDOG
from beat.snapshot import known_repos
from beat.timing import repo_keep_days
from wfqueue.settings import Settings
from wfqueue.state import StateFactory

__all__ = ["BEAT_ARCHIVE", "BEAT_LOCKS", "BEAT_PURGE", "BEAT_WATCHDOG", "register"]


def register(app: Celery, settings: Settings) -> None:
    # The task bodies import beat.watchdog and beat.housekeeping when they first run: those load every plan
    # kind's coordinator (38 modules, about 35 ms of CPU), and each worker node, which registers these tasks,
    # imports them on its way to its first planning task, where they would only delay it.
    states = StateFactory(settings)  # one Redis client per pool process, made after the fork
    keep_days = repo_keep_days(settings.archive_after_days, settings.embedded_data_max_age_days)

    def repos_for(now: float, extra: list[str] | None) -> list[Path]:
        return known_repos(states.client(), settings.state_ttl_s, now, keep_days, extra)

    @app.task(name=BEAT_WATCHDOG)
    def watchdog() -> dict[str, Any]:
        """Re-enqueue, then finalise as partial, collab sessions whose work stopped progressing."""
        from beat.watchdog import watch_all

        return watch_all(app, states.client(), settings)

    @app.task(name=BEAT_PURGE)
    def purge(repos: list[str] | None = None) -> dict[str, Any]:
        """Keys of long-finished sessions, and old embedded-mode logs of known repositories."""
        from beat.housekeeping import purge_files, purge_redis

        now = time.time()
        report = purge_redis(states.client(), settings, now)
        report["logs_removed"] = purge_files(repos_for(now, repos), settings, now)
        return report

    @app.task(name=BEAT_LOCKS)
    def locks(repos: list[str] | None = None) -> dict[str, Any]:
        """Lock files under known repositories' .workflow/ that are old and not held."""
        from beat.housekeeping import remove_stale_locks

        now = time.time()
        return remove_stale_locks(states.client(), repos_for(now, repos), settings, now)

    @app.task(name=BEAT_ARCHIVE)
    def archive(repos: list[str] | None = None) -> dict[str, Any]:
        """Completed workflow sessions idle for archive_after_days move to .workflow/archives/."""
        from beat.housekeeping import archive_sessions

        now = time.time()
        return archive_sessions(states.client(), repos_for(now, repos), settings, now)
