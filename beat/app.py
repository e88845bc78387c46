"""The beat entry point: ``celery -A beat.app beat`` (or ``wfqueue beat``).

Builds the settings and the shared Celery app, installs the maintenance
schedule, and refuses to run next to another beat on the same broker: before
its scheduler opens the schedule file it takes ``wfq:beat:lock`` (SET NX EX,
refreshed by a thread) or exits naming the holder. The tasks themselves run on workers
(``beat.tasks.register``); beat only sends them, by name, to ``control``.

The schedule file (when each entry last ran) goes to
``WFQUEUE_BEAT_SCHEDULE_FILE`` (the ``beat_schedule_file`` setting) or, by default, a private folder under the
system temp dir, never into the current directory.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

import redis
from celery import Celery
from celery.beat import PersistentScheduler

from beat.lock import SingleInstanceLock
from beat.names import BEAT_LOCK_KEY
from beat.schedule import beat_schedule
from wfqueue import beat_schedule_file
from wfqueue.celery_app import broker_url, create_app
from wfqueue.errors import ConfigError
from wfqueue.settings import Settings, load_settings
from wfqueue.settings_checks import mask_url
from wfqueue.state import redis_client

log = logging.getLogger("wfqueue.beat")

LOCK_TTL_S = 30  # a beat killed with SIGKILL blocks a new one for at most this long
EXIT_LOCK_HELD = 3  # infrastructure: the broker has a scheduler already, or cannot be asked
EXIT_BAD_SETTING = 2  # as the wfqueue commands exit on a bad setting


def schedule_file(settings: Settings) -> Path:
    """Where beat keeps its schedule state (wfqueue.beat_schedule); a folder unfit for it ends beat (exit 2)."""
    try:
        return beat_schedule_file.schedule_file(settings.beat_schedule_file, broker_url(settings))
    except ConfigError as exc:  # `wfqueue beat` and `wfqueue up` said so before starting beat; `celery beat` not
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_SETTING) from None


class SingleScheduler(PersistentScheduler):
    """Celery's file-backed scheduler that takes the one-beat-per-broker lock before it opens its schedule file.

    Taken on ``beat_init`` instead, a second beat was refused only after Celery had opened the file, and wrote
    it on its way out: the running beat's entries, read back as never run. The banner's lazy scheduler opens
    nothing and takes nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("lazy"):
            hold_beat_lock(settings)
        super().__init__(*args, **kwargs)


def build_app(settings: Settings) -> Celery:
    celery_app = create_app(settings)
    celery_app.conf.beat_schedule = beat_schedule(settings)
    celery_app.conf.beat_scheduler = f"{__name__}:SingleScheduler"
    celery_app.conf.beat_schedule_filename = str(schedule_file(settings))
    return celery_app


def _refuse(message: str) -> NoReturn:
    if logging.getLogger().handlers:  # beat has set up logging by now; print only if something went wrong there
        log.critical(message)
    else:
        print(f"error: {message}", file=sys.stderr, flush=True)
    # SystemExit is not an Exception: it leaves Celery's beat service before the scheduler opens its file.
    raise SystemExit(EXIT_LOCK_HELD)


def take_beat_lock(settings: Settings) -> SingleInstanceLock:
    """Take the single-scheduler lock or exit (code 3) with a message naming the holder."""
    url = broker_url(settings)
    client = redis_client(url, settings.broker_connect_timeout_s)
    lock = SingleInstanceLock(client, BEAT_LOCK_KEY, LOCK_TTL_S)
    try:
        other = lock.acquire(take_over_dead=True)
        if other is not None:
            _refuse(f"another beat already schedules on {mask_url(url)}: {other} holds {BEAT_LOCK_KEY} "
                    f"(if that beat is gone, the lock expires in {lock.seconds_left()} s); "
                    "run only one `wfqueue beat` per broker")
    except redis.RedisError as exc:  # running on without the lock is not an option
        _refuse(f"cannot take {BEAT_LOCK_KEY} on {mask_url(url)}: {exc}")
    log.info("beat: holding %s as %s", BEAT_LOCK_KEY, lock.holder)
    atexit.register(lock.release)
    # Losing the lock means another beat runs: stop through beat's own SIGTERM handling (syncs the schedule).
    lock.keep_alive(on_lost=lambda: os.kill(os.getpid(), signal.SIGTERM))
    return lock


_held: list[SingleInstanceLock] = []  # this process's lock, once taken


def hold_beat_lock(settings: Settings) -> None:
    """Take the lock once per process (Celery may build the scheduler more than once)."""
    if not _held:
        _held.append(take_beat_lock(settings))


settings = load_settings()
app = build_app(settings)
