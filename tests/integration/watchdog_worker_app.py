"""The worker app of the watchdog test: ``celery -A watchdog_worker_app worker`` (tests/integration on PYTHONPATH).

The production worker app (workers/app.py), which registers beat's maintenance tasks beside the planning tasks.
"""

from __future__ import annotations

from workers.app import app as app
