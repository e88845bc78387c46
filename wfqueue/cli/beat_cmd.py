"""`wfqueue beat`: the scheduler of the maintenance tasks (watchdog, purge, locks, archive).

Run exactly one per broker; a second one exits naming the first (see beat/app.py).
The tasks run on workers consuming the `control` queue.
"""

from __future__ import annotations

import os
import sys

import typer

from wfqueue.beat_schedule_file import schedule_folder
from wfqueue.celery_command import celery_argv, checked_loglevel
from wfqueue.errors import ConfigError
from wfqueue.settings import Settings, load_settings
from wfqueue.settings_checks import before_exec


def beat_argv(settings: Settings, loglevel: str) -> list[str]:
    """The command that runs beat for these settings (a broker URL is required)."""
    if settings.broker_url is None:
        raise ConfigError(
            "WFQUEUE_BROKER_URL is not set: beat schedules maintenance on a shared broker",
            hint="export WFQUEUE_BROKER_URL=redis://HOST:6379/0, or use `wfqueue up` to run everything locally",
        )
    schedule_folder(settings.beat_schedule_file)  # refused here, before beat starts, rather than in its log
    return celery_argv("beat.app", "beat", "--loglevel", checked_loglevel(loglevel))


def register(app: typer.Typer) -> None:
    @app.command("beat")
    def beat(
        loglevel: str = typer.Option("INFO", "--loglevel", "-l", help="DEBUG, INFO, WARNING, ERROR."),
    ) -> None:
        """Run the maintenance scheduler against WFQUEUE_BROKER_URL (same as `celery -A beat.app beat`).

        The schedule file goes to WFQUEUE_BEAT_SCHEDULE_FILE, else a private folder in the temp dir."""
        argv = beat_argv(load_settings(), loglevel)
        before_exec()
        os.execv(sys.executable, argv)  # beat replaces this process: signals reach Celery directly
