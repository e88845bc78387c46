"""The node's event dispatcher (workers/task_events.py): no task event lost to threads or to a broker away.

Celery's own lost the started and succeeded events a threads pool's agents appended while the loop sent the
buffer (Flower then showed tasks that had succeeded as RECEIVED or STARTED for ever), and cleared a batch that
failed to publish twice."""

from __future__ import annotations

import os
import threading
from typing import Any

from celery import Celery

from workers.task_events import ThreadSafeEventDispatcher


class Producer:
    """Records what is published; raises while ``down``."""

    def __init__(self) -> None:
        self.down = False
        self.events: list[Any] = []

    def publish(self, event: Any, **_options: Any) -> None:
        if self.down:
            raise ConnectionError("broker away")
        batch = list(event) if isinstance(event, list) else [event]
        # A publish is a round trip, during which the agents' threads run: yielding to them is enough (with it
        # Celery's own dispatcher lost events in 5 runs of 5, without it in none), and no delay is timed.
        os.sched_yield()
        self.events += batch


def dispatcher(producer: Producer) -> ThreadSafeEventDispatcher:
    app = Celery(broker="memory://", set_as_current=False)
    found = ThreadSafeEventDispatcher(app=app, connection=app.connection_for_write(), hostname="node@test",
                                      buffer_group=["task"], buffer_limit=10_000, enabled=True)
    found.producer = producer
    return found


def test_events_appended_by_many_threads_while_the_loop_flushes_are_all_published() -> None:
    producer = Producer()
    events = dispatcher(producer)
    threads, per_thread = 8, 400
    done = threading.Event()

    def agent(n: int) -> None:
        for i in range(per_thread):
            events.send("task-started", uuid=f"{n}-{i}")

    def loop() -> None:  # the event loop's periodic flush
        while not done.is_set():
            events.flush()

    flusher = threading.Thread(target=loop)
    flusher.start()
    agents = [threading.Thread(target=agent, args=(n,)) for n in range(threads)]
    for thread in agents:
        thread.start()
    for thread in agents:
        thread.join()
    done.set()
    flusher.join()
    events.flush()
    sent = [e["uuid"] for e in producer.events]
    assert len(sent) == len(set(sent)) == threads * per_thread


def test_a_batch_that_fails_to_publish_twice_is_sent_when_the_broker_is_back() -> None:
    producer = Producer()
    events = dispatcher(producer)
    for i in range(3):
        events.send("task-succeeded", uuid=str(i))
    producer.down = True
    events.flush()
    events.flush()
    producer.down = False
    events.flush()
    assert sorted(e["uuid"] for e in producer.events) == ["0", "1", "2"]
