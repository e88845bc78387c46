"""A worker app for the watchdog test: ``celery -A watchdog_worker_app worker`` (tests/integration on PYTHONPATH).

Built like workers/app.py, plus the maintenance tasks of beat.tasks, which the
production worker app gets once beat is wired in there.
"""

from __future__ import annotations

import wfqueue.providers.offline.provider  # loaded before the prefork pool forks, as in workers/app.py
import wfqueue.providers.scripted  # noqa: F401
from beat import tasks as beat_tasks
from wfqueue.celery_app import create_app
from wfqueue.settings import load_settings
from workers import collab, lite, workflow_session

settings = load_settings()
app = create_app(settings)
collab.register(app, settings)
lite.register(app, settings)
workflow_session.register(app, settings)
beat_tasks.register(app, settings)
