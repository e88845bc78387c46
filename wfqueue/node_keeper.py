"""A local worker node that dies is replaced, and the tasks it held go back on their queues at once.

The embedded node of a plan command, and the node of `wfqueue up`, are this machine's only consumers of their
Redis. When one dies without a shutdown (the out-of-memory killer, a crash in a native library, a person's
`kill -9`), nothing else would notice: the tasks it had taken stay unacknowledged until the visibility timeout
(an hour by default), and a waiting command waits that long. ``NodeKeeper.check`` looks at the node's process
while a command waits (every poll interval) and while `wfqueue up` runs; on an exit it ends what is left of the
node (pool children), sends its deliveries back to their queues, and starts a new node. Every task is
idempotent, so running one again leaves the same files and pays for no model turn twice.

A node that keeps dying (a task that crashes it each time) is not restarted forever: past ``max_restarts`` deaths
within ``window_s`` the check raises WorkerStartError, exit 3, naming the worker's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import Any, Protocol

from celery import Celery

from wfqueue.embedded import EmbeddedCluster
from wfqueue.errors import WorkerStartError
from wfqueue.local_workers import LocalWorkers

# Replacements of a dead node within RESTART_WINDOW_S before the command gives up (each death is reported; a
# node that dies at every task is a crash to look at, not to retry; deaths days apart under `wfqueue up` are not).
MAX_NODE_RESTARTS = 3
RESTART_WINDOW_S = 600.0
# How long other nodes (workers of other machines joined to `wfqueue up`) get to answer the ping that decides
# whether the dead node's deliveries can be told apart from theirs. A node of the solo pool answers only between
# tasks: such workers must not join `wfqueue up` (docs/OPERATIONS.md).
OTHER_NODES_PING_S = 2.0


class Reporter(Protocol):
    def info(self, message: str) -> None: ...


def exit_described(code: int) -> str:
    """A process's exit code as a person reads it: "killed by SIGKILL" for -9."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def requeue_unacknowledged(app: Celery, queues: tuple[str, ...]) -> int:
    """Put every delivery from ``queues`` that no node has acknowledged back on its queue; return how many.

    Only for queues whose other consumers are known to be gone: a live node's running task would be delivered
    a second time."""
    with app.connection_for_write() as connection:
        channel: Any = connection.default_channel  # kombu's Redis channel, which keeps the unacknowledged deliveries
        client = channel.client
        count = 0
        for tag in client.zrange(channel.unacked_index_key, 0, -1):
            delivery = client.hget(channel.unacked_key, tag)
            try:
                _, exchange, routing_key = json.loads(delivery) if delivery else (None, None, None)
            except (ValueError, TypeError):
                continue  # not a delivery kombu wrote: the visibility timeout is its judge
            if not exchange and routing_key in queues:  # sent by queue name (Celery's direct route)
                channel.qos.restore_by_tag(tag, client)
                count += 1
    return count


def other_nodes(app: Celery, ours: set[str]) -> list[str]:
    """The worker nodes that answer a ping now and are not ``ours`` (workers of other machines joined to a
    `wfqueue up`)."""
    replies = app.control.ping(timeout=OTHER_NODES_PING_S) or []
    return sorted(name for reply in replies for name in reply if name not in ours)


class NodeKeeper:
    """Replaces one local worker node of ``cluster`` when it has died (see the module's docstring): its main node,
    or with ``control`` its control queue's own node."""

    def __init__(self, cluster: EmbeddedCluster, app: Celery, ui: Reporter, *, control: bool = False,
                 max_restarts: int = MAX_NODE_RESTARTS, window_s: float = RESTART_WINDOW_S) -> None:
        self.cluster, self.app, self.ui = cluster, app, ui
        self.control = control
        self.max_restarts = max_restarts
        self.window_s = window_s
        self.deaths: list[float] = []  # monotonic times of the deaths within the window

    @property
    def what(self) -> str:
        return "the control node" if self.control else "the local worker node"

    def _node(self) -> LocalWorkers | None:
        return self.cluster.control if self.control else self.cluster.workers

    def check(self) -> None:
        """Return at once while the node runs; replace it if it has exited."""
        workers = self._node()
        if workers is None or workers.proc is None:
            return
        code = workers.proc.poll()
        if code is None:
            return
        with contextlib.suppress(ProcessLookupError):  # its prefork children, had any outlived it
            os.killpg(workers.proc.pid, signal.SIGKILL)
        log, how, now = workers.log_path, exit_described(code), time.monotonic()
        self.deaths = [t for t in self.deaths if now - t < self.window_s] + [now]
        if len(self.deaths) > self.max_restarts:
            times = f"{len(self.deaths)} time{'s' if len(self.deaths) != 1 else ''}"
            raise WorkerStartError(f"{self.what} exited ({how}), {times} within {self.window_s / 60:.0f} minutes",
                                   hint=f"see {log} for what it was doing")
        try:
            back = self._requeue(workers)
        except Exception as exc:  # noqa: BLE001 - the broker did not answer: the new node matters more
            back = (f"its tasks come back after the visibility timeout (WFQUEUE_VISIBILITY_TIMEOUT_S): the broker "
                    f"did not answer ({type(exc).__name__})")
        finally:  # replaced whatever happened above: a node marked gone is never looked at again
            workers.proc = None
            workers.stop()  # what else it holds (the log's link folder)
            if self.control:
                self.cluster.launch_control()
            else:
                self.cluster.launch_workers()
        self.ui.info(f"{self.what} exited ({how}); started a new one; {back} (see {log})")

    def _requeue(self, dead: LocalWorkers) -> str:
        """Its deliveries back on their queues, unless nodes of other machines share them (a ping tells)."""
        ours = {n.hostname for n in (self.cluster.workers, self.cluster.control) if n is not None}
        others = other_nodes(self.app, ours)
        if others:
            return (f"its tasks are delivered again after the visibility timeout (WFQUEUE_VISIBILITY_TIMEOUT_S): "
                    f"{len(others)} node(s) of other machines take tasks here too")
        return f"{requeue_unacknowledged(self.app, dead.queues)} task(s) it had taken are queued again"
