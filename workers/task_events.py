"""A node's event dispatcher whose task-event buffer is safe to use from many threads.

Celery buffers a node's task events (received, started, succeeded) when the node runs an event loop, and
the loop publishes the buffer. Its buffer is not safe across threads (celery/celery#10434, in the 5.6 series
wfqueue pins): with the threads pool, the agents' threads append their started and succeeded events while
the loop publishes and empties the same list, and the events appended in between are lost. In Flower a task
that succeeded then stays RECEIVED or STARTED for ever, or shows no start. On a threads node (the default
for remote-model agents) six collab plans lost the started or succeeded event of 31 of their 36 tasks.

Here appending, flushing and closing take one lock, and a flush publishes what it has taken out of both
buffers, so nothing appended meanwhile is cleared unsent, and a batch that fails to publish, however often,
is kept whole for the next flush (Celery emptied the list it had just re-buffered, celery/celery#10417, and
clears its re-buffered batches after a second failure). Events are still
sent in batches by the loop, as before; prefork nodes, whose events all come from the loop's thread, lose
nothing either way.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Any

from celery import Celery
from celery.events.dispatcher import EventDispatcher

DISPATCHER = "workers.task_events:ThreadSafeEventDispatcher"


class ThreadSafeEventDispatcher(EventDispatcher):
    # What EventDispatcher sets up and uses, left out of its type stubs.
    _group_buffer: defaultdict[str, list[Any]]
    _outbound_buffer: deque[Any]
    mutex: threading.Lock
    producer: Any
    _publish: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Reentrant: a send that fills the buffer flushes it from inside the lock.
        self._buffer_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    def send(self, *args: Any, **kwargs: Any) -> Any:
        with self._buffer_lock:
            return super().send(*args, **kwargs)

    def flush(self, errors: bool = True, groups: bool = True) -> None:
        # Both buffers are taken out before publishing: what fails is buffered again by _publish into the fresh
        # outbound buffer, for the next flush (Celery's own flush clears that buffer after a second failure).
        with self._buffer_lock:
            outbound: list[Any] = []
            if errors:
                outbound, self._outbound_buffer = list(self._outbound_buffer), deque()
            taken: dict[str, list[Any]] = {}
            if groups:
                taken, self._group_buffer = self._group_buffer, defaultdict(list)
            with self.mutex:
                for event, routing_key, _ in outbound:
                    self._publish(event, self.producer, routing_key)
                for group, events in taken.items():
                    if events:
                        self._publish(events, self.producer, f"{group}.multi")

    def close(self) -> None:
        # Celery's close releases the publishing lock whoever holds it: wait for a flush in another thread.
        with self._buffer_lock:
            super().close()


def register(app: Celery) -> None:
    """Every event dispatcher of ``app``'s nodes is the thread-safe one (before the first is made)."""
    app.events.dispatcher_cls = DISPATCHER
