"""What every coordinator needs: a broker (embedded or configured), a Celery app to
send tasks by name, and a way to wait for them.

``broker_runtime`` is a context manager: in embedded mode it starts Redis and a
local worker node and stops both on the way out, whatever happened; with a
broker URL it only connects (BrokerUnreachableError, exit 3, if it cannot).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import redis
from celery import Celery
from celery.result import AsyncResult
from pydantic import SecretStr

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.embedded import EmbeddedCluster
from wfqueue.errors import InfrastructureError, ProviderError, WfqueueError
from wfqueue.sessions import queue_dir
from wfqueue.settings import Settings
from wfqueue.state import connect


class Reporter(Protocol):
    def info(self, message: str) -> None: ...


@dataclass
class Runtime:
    settings: Settings  # with the broker URL filled in
    app: Celery
    client: redis.Redis


@contextmanager
def broker_runtime(settings: Settings, repo: Path, concurrency: int, ui: Reporter,
                   worker_env: dict[str, str] | None = None) -> Iterator[Runtime]:
    with ExitStack() as stack:
        cluster: EmbeddedCluster | None = None
        started = time.monotonic()
        if settings.embedded:
            cluster = stack.enter_context(
                EmbeddedCluster(queue_dir(repo), concurrency=concurrency, redis_port=settings.embedded_redis_port,
                                start_timeout_s=settings.embedded_start_timeout_s, worker_env=worker_env)
            )
            settings = settings.model_copy(update={"broker_url": SecretStr(cluster.start_redis())})
        client = connect(settings)
        app = create_app(settings)
        stack.callback(release_result_subscriptions, app)  # runs before the cluster stops
        if cluster is not None:
            ui.info(f"starting {cluster.concurrency} local worker process(es)")
            cluster.start_workers(app)
            ui.info(f"embedded Redis and workers ready in {time.monotonic() - started:.1f}s")
        yield Runtime(settings=settings, app=app, client=client)


def wait_for(result: AsyncResult, what: str, settings: Settings, tick: Callable[[], None] | None = None,
             settled: Callable[[], Any] | None = None) -> Any:
    """Poll ``result`` until it is ready; raise with the worker's error if it failed.

    ``settled`` may end the wait early with a value of its own: the watchdog can
    finalise a plan whose chord will never fire, and the coordinator must notice."""
    deadline = time.monotonic() + settings.plan_timeout_s
    while not result.ready():
        if settled is not None and (value := settled()) is not None:
            return value
        if time.monotonic() > deadline:
            raise InfrastructureError(
                f"{what} did not finish within {settings.plan_timeout_s:.0f}s",
                hint="check that workers consume the explore, plan and control queues (`wfqueue worker`)",
            )
        if tick is not None:
            tick()
        time.sleep(settings.poll_interval_s)
    if tick is not None:
        tick()
    if result.failed():
        error = result.result
        if isinstance(error, WfqueueError):  # a worker's own error keeps its message, hint and exit code
            raise error
        raise ProviderError(f"{what} failed: {type(error).__name__}: {error}",
                            hint="see the worker log (embedded mode: .workflow/.queue/worker.log)")
    return result.result
