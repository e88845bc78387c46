"""Task events a threads-pool node sends are published when they happen, not buffered.

Celery buffers a node's task events (received, started, succeeded) when the node runs an event loop, and
publishes the buffer from the loop's thread. Its buffer is not safe across threads (celery/celery#10434, in
the 5.6 series wfqueue pins): with the threads pool, the agents' threads append their started and succeeded
events while the loop publishes and empties the same list, and the events appended in between are lost. In
Flower a task that succeeded then stays RECEIVED or STARTED for ever, or shows no start. On a threads node
(the default for remote-model agents), six collab plans lost the started or succeeded event of 31 of their
36 tasks; none with this step (tests/integration/test_flower.py).

Without the buffer each event is published at once, under the dispatcher's own lock. That costs one Redis
write per event, next to an agent's model calls nothing. Prefork nodes keep the buffer: their events come from
the loop's thread alone.
"""

from __future__ import annotations

from typing import Any

from celery import Celery, bootsteps
from celery.concurrency.thread import TaskPool as ThreadsPool


class PublishTaskEventsAtOnce(bootsteps.StartStopStep):
    """Runs after the consumer's Events step, each time it (re)creates the node's event dispatcher."""

    requires = ("celery.worker.consumer.events:Events",)

    def start(self, c: Any) -> None:
        dispatcher = c.event_dispatcher
        if dispatcher is not None and isinstance(c.pool, ThreadsPool):
            dispatcher.buffer_group = frozenset()
            dispatcher.on_send_buffered = None
            # After a reconnection agents were already running: what they buffered meanwhile goes out now.
            dispatcher.flush(errors=False)


def register(app: Celery) -> None:
    app.steps["consumer"].add(PublishTaskEventsAtOnce)
