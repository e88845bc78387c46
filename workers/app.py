"""The worker entry point: ``celery -A workers.app worker`` (or ``wfqueue worker``).

Settings are built here, once per worker, and handed to the task modules.
"""

from __future__ import annotations

# Providers are loaded before the prefork pool forks, not per task.
import wfqueue.providers.anthropic
import wfqueue.providers.offline.provider
import wfqueue.providers.scripted  # noqa: F401
from beat import tasks as beat_tasks
from wfqueue.celery_app import create_app
from wfqueue.settings import load_settings
from workers import collab, execute, lite, workflow_session
from workers.context import StateFactory, broker_patient_task

settings = load_settings()
app = create_app(settings, task_cls=broker_patient_task(settings, StateFactory(settings)))
collab.register(app, settings)
lite.register(app, settings)
workflow_session.register(app, settings)
execute.register(app, settings)
beat_tasks.register(app, settings)
