"""Celery task code that wfqueue worker processes run (``python -m workers.serve``, or
``celery -A workers.app worker``)."""
