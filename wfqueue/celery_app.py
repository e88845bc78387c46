"""The Celery application, configured from Settings. Shared by coordinator and workers.

The coordinator builds this app only to send tasks by name and read results;
the task code lives in workers/ and is imported by worker processes alone.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from celery import Celery, Task
from celery.app import backends
from kombu import Queue

from wfqueue.errors import ConfigError
from wfqueue.settings import REDIS_SCHEMES, Settings
from wfqueue.task_names import ALL_QUEUES, QUEUE_CONTROL, ROUTES

# The longest pause between two scans for unacknowledged messages whose visibility timeout has passed.
MAX_UNACKED_SCAN_INTERVAL_S = 30
UNACKED_LOCK_MIN_S = 5  # the unacknowledged-message scan's lock (see unacked_scan_options)


def broker_url(settings: Settings) -> str:
    if settings.broker_url is None:
        raise ConfigError("no broker URL: embedded mode sets one when it starts Redis")
    url = settings.broker_url.get_secret_value()
    if urlsplit(url).scheme not in REDIS_SCHEMES:
        raise ConfigError(
            f"unsupported broker URL scheme in {url.split('://', 1)[0]}://...",
            hint="use redis://, rediss:// or redis+socket:///path/to/redis.sock",
        )
    return celery_form(url)


def backend_url(settings: Settings) -> str:
    if settings.result_backend_url:
        return celery_form(settings.result_backend_url.get_secret_value())
    return broker_url(settings)


def celery_form(url: str) -> str:
    """``url`` as Celery and kombu read it: redis-py's ``unix://`` socket form is their ``redis+socket://`` (they
    have no ``unix`` transport or backend: the first task sent ended in a traceback)."""
    scheme, _, rest = url.partition("://")
    return f"redis+socket://{rest}" if scheme.lower() == "unix" else url


_BACKEND_LOOKUP = threading.Lock()


class WfqueueCelery(Celery):
    """Celery, with its result backend's class looked up once per app.

    Celery gives every thread a backend of its own (the Redis backend is not thread-safe) and looks its
    class up again each time, through every installed package's entry points (about 2 ms). In a threads
    pool of 100 agents that was 100 look-ups under the interpreter lock the agents share. Kept for the app's
    life: ``create_app`` sets the backend URL once and nothing changes it afterwards."""

    _backend_class: tuple[Any, str | None] | None = None

    def _get_backend(self) -> Any:
        with _BACKEND_LOOKUP:  # threads starting together would each look it up
            if self._backend_class is None:
                found: Any = backends.by_url(self.backend_cls or self.conf.result_backend, self.loader)  # (class, url)
                self._backend_class = found
            backend, url = self._backend_class
        return backend(app=self, url=url)


def create_app(settings: Settings, task_cls: type[Task[Any, Any]] | None = None) -> Celery:
    """The app; workers pass their own ``task_cls`` (the coordinator only sends tasks by name)."""
    # Celery reads task_cls=None as its default Task class.
    app = WfqueueCelery("wfqueue", broker=broker_url(settings), backend=backend_url(settings), set_as_current=False,
                        task_cls=task_cls)
    transport = {"visibility_timeout": settings.visibility_timeout_s}
    app.conf.update(
        # JSON only: a pickled message is refused by the worker, never executed.
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        # A task is acknowledged after it finished, and requeued if its process dies.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_transport_options={**transport, **unacked_scan_options(settings.visibility_timeout_s)},
        result_backend_transport_options=transport,
        broker_connection_retry_on_startup=True,
        # A worker (and beat) whose Redis is not up yet, or is restarted, keeps trying, as OPERATIONS says: Celery's
        # default gives up after 100 tries (about 46 minutes at its 30 s cap) and the process exits. Only the
        # consumer and beat read it; a command's own sends and waits have their own limits.
        broker_connection_max_retries=None,
        broker_connection_timeout=settings.broker_connect_timeout_s,
        redis_socket_connect_timeout=settings.broker_connect_timeout_s,
        result_expires=settings.result_expires_s,
        task_soft_time_limit=settings.agent_soft_time_limit_s,
        task_time_limit=settings.agent_time_limit_s,
        # Events so Flower sees every task, from SENT to SUCCESS.
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_track_started=True,
        task_queues=[Queue(name) for name in ALL_QUEUES],
        task_default_queue=QUEUE_CONTROL,
        task_routes={name: {"queue": queue} for name, queue in ROUTES.items()},
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    return app


def unacked_scan_options(visibility_timeout_s: int) -> dict[str, int]:
    """How often workers look for a dead worker's unacknowledged messages.

    kombu scans only every ``interval x throttle`` seconds (10 x 10 by default),
    so a dead worker's tasks would wait up to ~100 s past the visibility timeout.
    One scan is a single sorted-set range query, cheap enough to run every few
    seconds; a quarter of the visibility timeout keeps the delay proportional.

    A scan holds a Redis lock that expires after 300 s by default: a worker killed during its scan (SIGKILL,
    the out-of-memory killer) kept every other worker from restoring anything for five minutes, its own tasks
    included. The scan takes milliseconds, so the lock expires after a few scan intervals instead; two
    overlapping scans at worst deliver a message twice, which every task tolerates (it is idempotent)."""
    interval = max(1, min(MAX_UNACKED_SCAN_INTERVAL_S, visibility_timeout_s // 4))
    return {"unacked_restore_interval": interval, "unacked_restore_throttle": 1,
            "unacked_mutex_expire": max(UNACKED_LOCK_MIN_S, 3 * interval)}


def release_result_subscriptions(app: Celery) -> None:
    """Drop the result backend's pub/sub subscriptions while Redis is still up.

    Every task sent subscribes to its result channel; the AsyncResult finalisers
    would otherwise unsubscribe at interpreter exit, retrying for many seconds
    (and printing a traceback) against a Redis that has been stopped or lost."""
    # Only the Redis result backend has a result consumer; celery-types does not declare it.
    consumer: Any = getattr(app.backend, "result_consumer", None)
    subscribed = getattr(consumer, "subscribed_to", None)
    if consumer is None or subscribed is None:
        return
    subscribed.clear()
    try:
        consumer.stop()
    except Exception:  # noqa: BLE001 - closing a connection to a broker that is gone
        pass
    # With no pub/sub connection left, a late finaliser has nothing to unsubscribe from.
    consumer._pubsub = None


def drop_leftover_messages(app: Celery) -> int:
    """Empty the task queues of a broker only this process's command will use, and forget the deliveries its
    earlier workers left unacknowledged; return how many waiting tasks were dropped.

    For an embedded Redis just started by a command (its data survives in the append-only file): whatever an
    earlier command there sent and never saw run (it failed, was interrupted or killed) is sent again by
    `wfqueue resume`, and a copy left here would run beside it."""
    with app.connection_for_write() as connection:
        dropped = int(app.control.purge(connection=connection) or 0)
        channel: Any = connection.default_channel  # kombu's Redis channel: where it keeps unacknowledged deliveries
        channel.client.delete(channel.unacked_key, channel.unacked_index_key)
    return dropped
