"""Celery's own command line for one of wfqueue's apps, started without the current folder on the module path.

``celery -A beat.app beat`` imports ``beat.app`` with the current folder first on ``sys.path``
(celery.utils.imports.cwd_in_path), so a repository with a ``beat`` or ``workers`` package of its own, run
from its root, would have Celery import that instead of wfqueue's. Here the interpreter starts with ``-P``
(no current folder) and imports the app module itself first; Celery's ``-A`` then finds it already loaded.
Worker nodes do without Celery's command line altogether (workers.serve, wfqueue.prestart.WORKER_MODULE).
"""

from __future__ import annotations

import importlib
import signal
import sys

from wfqueue import lifeline
from wfqueue.errors import ConfigError

MODULE = "wfqueue.celery_command"


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")


def checked_loglevel(value: str) -> str:
    """``value`` as Celery's --loglevel takes it (a level's name, or its number), or ConfigError (exit 2): Celery's
    own refusal was a KeyError traceback from a worker node, or a usage text naming a command the user never
    typed."""
    if value.strip().isdigit():
        return value.strip()
    if value.upper() not in LOG_LEVELS:
        raise ConfigError(f"unknown log level {value!r}", hint=f"choose {', '.join(LOG_LEVELS)}, or a number")
    return value.upper()


def celery_argv(app_module: str, *args: str) -> list[str]:
    """The command that runs ``celery -A app_module ARGS`` this way."""
    return [sys.executable, "-P", "-m", MODULE, app_module, *args]


def main(argv: list[str]) -> None:
    app_module, *args = argv
    # Started by `wfqueue up`: end with it. Flower keeps nothing worth a clean stop, and is slow to take SIGTERM.
    lifeline.hold(signal.SIGKILL if "flower" in args else signal.SIGTERM)
    importlib.import_module(app_module)  # the app wfqueue installed, before Celery puts the folder on the path
    from celery.__main__ import main as celery

    sys.argv = ["celery", "-A", app_module, *args]
    celery()


if __name__ == "__main__":
    main(sys.argv[1:])
