"""What a worker node imports: its task modules, the parts of Celery a node runs on, and the Anthropic SDK
when an API key is set.

``workers.app`` imports the same modules when it builds the app. A standby worker
(``python -m workers.serve --standby``, see wfqueue.prestart) imports them before its settings have arrived,
so the app it then builds finds them loaded. Importing here builds nothing: no settings, no app, no
connection.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from wfqueue.prestart import variable

TASK_MODULES = (
    "wfqueue.providers.offline.provider",
    "wfqueue.providers.scripted",
    "wfqueue.celery_app",
    "wfqueue.settings",
    "tomllib",  # the settings read config/wfqueue.toml with it
    "beat.tasks",
    "workers.collab",
    "workers.context",
    "workers.execute",
    "workers.lite",
    "workers.task_events",
    "workers.workflow_session",
)
# What a node loads between ``app.Worker(...)`` and its ``ready.`` line: the worker's bootsteps, both pools
# it may run, the Redis transport and the task tracer.
NODE_MODULES = (
    "celery.apps.worker",
    "celery.worker.components",
    "celery.worker.consumer",
    "celery.worker.control",
    "celery.worker.strategy",
    "celery.app.trace",
    "celery.concurrency.thread",
    "celery.concurrency.prefork",
    "celery.events.dispatcher",
    "celery.app.events",
    "celery.events.receiver",
    "celery.backends.redis",
    "kombu.transport.redis",
    "celery.utils.nodenames",
    "celery.fixups.django",  # looked for by every new app
)
# Most of a remote-model worker's start-up (0.8 s of its 1.2 s on a 2-core machine); a worker without a key
# never calls the API, so it goes without.
SDK_MODULES = ("wfqueue.providers.anthropic", "wfqueue.execute.claude_executor")
API_KEY_VARIABLES = ("WFQUEUE_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")  # wfqueue.settings.API_KEY_VARIABLES


def key_in(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` holds an API key, as Settings would read it (the settings file is
    wfqueue.prestart.early_setting's to read)."""
    return any(variable(environ, name) for name in API_KEY_VARIABLES)


def load(sdk: bool) -> list[str]:
    """Import the node's modules, each on its own; return those that failed, with why ("name: error")."""
    failed: list[str] = []
    for name in (*TASK_MODULES, *NODE_MODULES, *(SDK_MODULES if sdk else ())):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - reported by the caller; the node imports what it needs again
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    return failed
