"""Whether anyone consumes the queues a command's tasks wait on, on a shared broker it runs no worker of.

With no worker, or none on the queue a task went to, the task waits and the command says nothing until its
plan timeout (an hour by default). So while it waits, the command looks now and then at the queues that hold
messages and asks the workers which queues they consume (Celery's ``active_queues``), and says once which
waiting queues nobody consumes, and how to start a worker for them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery

from wfqueue.task_names import ALL_QUEUES

LOOK_EVERY_S = 60.0  # after the first look: each look without replies blocks the wait this long
ANSWER_WITHIN_S = 1.0  # how long workers have to say what they consume


class QueueWatch:
    """``check`` is called on every poll of a wait (Runtime.workers_alive): it looks first ``first_look_s``
    after it was made, then every LOOK_EVERY_S."""

    def __init__(self, app: Celery, client: redis.Redis, say: Callable[[str], None], broker: str, first_look_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app, self.client, self.say, self.broker = app, client, say, broker
        self.clock = clock
        self.next_look = clock() + first_look_s
        self.said: list[str] = []

    def check(self) -> None:
        if self.clock() < self.next_look:
            return
        self.next_look = self.clock() + LOOK_EVERY_S
        try:
            waiting = [queue for queue in ALL_QUEUES if self.client.llen(queue)]
            if not waiting:
                self.said = []
                return
            replies: dict[str, Any] = self.app.control.inspect(timeout=ANSWER_WITHIN_S).active_queues() or {}
        except (redis.RedisError, OSError):
            return  # the wait's own broker handling says what is wrong with the broker
        consumed = {queue.get("name") for queues in replies.values() for queue in queues or []}
        missing = [queue for queue in waiting if queue not in consumed]
        if not missing:
            self.said = []  # consumed again: a gap that comes back later is said again
        elif missing != self.said:
            self.said = missing
            # A worker busy on a long task in a solo pool cannot answer: "absent" is not certain.
            who = (f"{len(replies)} worker(s) answered, none on it" if replies else
                   f"no worker answered within {ANSWER_WITHIN_S:g}s (none runs, or all are too busy to)")
            self.say(f"tasks wait on the queue(s) {', '.join(missing)} of the broker at {self.broker} and {who}: "
                     f"start one there (`wfqueue worker -Q {','.join(missing)}`, or `wfqueue worker` for every queue); "
                     "the plan goes on when it runs")
