"""The worker app: started by ``python -m workers.serve`` (embedded mode, ``wfqueue up``, ``wfqueue worker``)
or ``celery -A workers.app worker``.

Settings are built here, once per worker, and handed to the task modules.
"""

from __future__ import annotations

import importlib

# Providers are loaded before the prefork pool forks, not per task.
import wfqueue.providers.offline.provider
import wfqueue.providers.scripted  # noqa: F401
from beat import tasks as beat_tasks
from wfqueue.celery_app import create_app
from wfqueue.settings import load_settings
from workers import collab, execute, lite, task_events, workflow_session
from workers.context import StateFactory, broker_patient_task
from workers.preload import SDK_MODULES

settings = load_settings()
if settings.anthropic_api_key is not None:
    # The SDK is most of a worker's start-up; without a key no task of this worker can call the API, so a
    # worker for offline plans (embedded mode on a laptop, CI) starts without it.
    for module in SDK_MODULES:
        importlib.import_module(module)
app = create_app(settings, task_cls=broker_patient_task(settings, StateFactory(settings)))
collab.register(app, settings)
lite.register(app, settings)
workflow_session.register(app, settings)
execute.register(app, settings)
beat_tasks.register(app, settings)
task_events.register(app)
