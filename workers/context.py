"""Per-process resources for tasks: the metered provider, the state factory (a Redis client made after
the pool forks; wfqueue.state.StateFactory), and the base class that lets every task outlive a broker restart."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celery import Task

from wfqueue.errors import TransientProviderError
from wfqueue.metering import TRANSCRIPT_DIR, MeteredProvider
from wfqueue.providers import make_provider
from wfqueue.retry import longest_countdown, retry_delay
from wfqueue.settings import Settings
from wfqueue.state import BROKER_AWAY, SessionState, StateFactory, wait_until_reachable
from wfqueue.usage import PriceTable

__all__ = ["StateFactory", "broker_patient_task", "may_retry", "metered_provider", "retry_later"]

if TYPE_CHECKING:
    _TaskBase = Task[Any, Any]
else:
    _TaskBase = Task  # celery's Task takes no type parameters at run time; celery-types adds them


def broker_patient_task(settings: Settings, states: StateFactory) -> type[Task[Any, Any]]:
    """The base class of every wfqueue task.

    A task that loses Redis mid-way (its result, a section, a progress record or a
    retry cannot be saved) would otherwise fail, and its chord with it. Instead it
    waits up to ``broker_outage_grace_s`` for Redis to answer again and retries:
    every task is idempotent, and what it saved before the loss is reused."""

    class BrokerPatientTask(_TaskBase):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().__call__(*args, **kwargs)
            except BROKER_AWAY as exc:
                if not wait_until_reachable(states.client(), settings.broker_outage_grace_s):
                    raise
                raise retry_later(self, exc, settings) from None

    return BrokerPatientTask


def metered_provider(spec: str, settings: Settings, state: SessionState, session_dir: str | Path) -> MeteredProvider:
    """The provider a task plans with: it stops at the session's budget, saves every turn and its usage in
    the session's journal, and keeps each step's transcript in the session folder's ``transcripts/`` (the
    task's own ``session_dir``: on a worker without the coordinator's disk, its copy of the folder)."""
    return MeteredProvider(make_provider(spec, settings), state, PriceTable(settings.price_table),
                           transcript_dir=Path(session_dir) / TRANSCRIPT_DIR)


def retry_delay_of(task: Task[Any, Any], exc: Exception, settings: Settings) -> float:
    """Seconds until ``task`` runs again after ``exc``: backoff with jitter, at least the provider's retry-after."""
    retry_after = exc.retry_after if isinstance(exc, TransientProviderError) else None
    delay = retry_delay(task.request.retries + 1, settings.retry_backoff_s, settings.retry_backoff_max_s,
                        random.random(), retry_after)
    return min(delay, longest_countdown(settings.visibility_timeout_s))


def retry_later(task: Task[Any, Any], exc: Exception, settings: Settings, delay: float | None = None) -> Exception:
    """The Retry to raise for ``exc``, ``delay`` seconds from now (default: ``retry_delay_of``)."""
    return task.retry(exc=exc, countdown=retry_delay_of(task, exc, settings) if delay is None else delay)


def when_retried(task: Task[Any, Any], delay: float) -> str:
    """When ``task`` runs again, as a person waiting for it reads it: "tried again in 600s (at 01:12:03; try 2
    of 4)". A wait the API asked for can be minutes, with nothing else to see meanwhile."""
    at = time.strftime("%H:%M:%S", time.localtime(time.time() + delay))
    tries = f"; try {task.request.retries + 2} of {task.max_retries + 1}" if task.max_retries is not None else ""
    return f"tried again in {delay:.0f}s (at {at}{tries})"


def may_retry(task: Task[Any, Any]) -> bool:
    """Whether ``task`` has a retry left (no ``max_retries``: retries are unbounded)."""
    return task.max_retries is None or task.request.retries < task.max_retries
