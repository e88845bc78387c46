"""Celery task code that wfqueue worker processes run (``celery -A workers.app worker``)."""
