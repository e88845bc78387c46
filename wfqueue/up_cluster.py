"""A running `wfqueue up` announces itself in the repository, so plan commands there use it.

While `wfqueue up` runs, ``.workflow/.queue/up.json`` names its process and its
broker URL. A plan command in embedded mode (no broker URL) finds it and sends
its tasks there instead of starting a Redis and workers of its own: seconds of
start-up saved per plan, and Flower and beat see the plan. The file is only
trusted while its process is alive and its Redis answers; a stale one (a
`wfqueue up` killed with SIGKILL) is ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import redis
from pydantic import BaseModel, SecretStr, ValidationError

from wfqueue.errors import ConfigError
from wfqueue.fsio import atomic_write_text, dumps_json
from wfqueue.pids import process_exists
from wfqueue.planted import refuse_planted
from wfqueue.sessions import queue_dir
from wfqueue.settings import Settings
from wfqueue.state import redis_client

UP_FILE = "up.json"
# How long a plan command waits for up's Redis to answer before starting its own cluster.
PROBE_TIMEOUT_S = 1.0


class UpWorkerSettings(BaseModel):
    """What up's workers were started with that a command's own settings cannot tell: its workers read their
    settings once, from up's environment, not from the command's."""

    executor_command: str | None = None
    anthropic_key: bool = False  # whether they have one (never the key)


class UpCluster(BaseModel):
    """What `wfqueue up` writes about itself."""

    pid: int
    broker_url: str
    workers: int
    worker_settings: UpWorkerSettings | None = None  # None: an up of an older version, which did not say

    def broker_settings(self, settings: Settings) -> Settings:
        """``settings`` pointed at up's broker."""
        return settings.model_copy(update={"broker_url": SecretStr(self.broker_url)})

    def named(self) -> str:
        return f"the `wfqueue up` of this repository (pid {self.pid})"

    def running(self) -> bool:
        return process_exists(self.pid)

    def stopped(self) -> bool:
        """Its process is gone, and its Redis with it: a plan waiting on that Redis waits for nothing."""
        return not self.running()

    def refuse_without_key(self) -> None:
        """Refuse a plan for the Anthropic provider on workers that have no API key, before anything is sent."""
        if self.worker_settings is not None and not self.worker_settings.anthropic_key:
            raise ConfigError(f"the anthropic provider needs an API key, and the workers of {self.named()} have none",
                              hint="its workers read their settings when it started: stop it, set ANTHROPIC_API_KEY "
                                   "where it runs and start it again, or use --provider offline")


@contextmanager
def announced(repo: Path, cluster: UpCluster) -> Iterator[None]:
    """Name ``cluster`` in ``repo`` while the block runs; the file is removed on the way out (if still ours)."""
    path = queue_dir(repo) / UP_FILE
    # Private from the start: the broker URL carries the password of a Redis that listens on TCP.
    atomic_write_text(path, dumps_json(cluster.model_dump()), mode=0o600)
    try:
        yield
    finally:
        with suppress(OSError, ValueError):
            if json.loads(path.read_text(encoding="utf-8")).get("pid") == cluster.pid:
                path.unlink()


def serving_up(settings: Settings, repo: Path) -> UpCluster | None:
    """The `wfqueue up` a command with these settings uses for ``repo``: only in embedded mode (no broker URL)."""
    return running_up(repo) if settings.embedded else None


def running_up(repo: Path) -> UpCluster | None:
    """The `wfqueue up` serving ``repo``, if one runs and its Redis answers now. Refused (UnsafeRepositoryError)
    where the repository itself brings its runtime files: its `up.json` would name a broker of its choosing."""
    refuse_planted(repo)
    try:
        cluster = UpCluster.model_validate_json((queue_dir(repo) / UP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None
    if not process_exists(cluster.pid):
        return None
    client = redis_client(cluster.broker_url, PROBE_TIMEOUT_S, read_timeout_s=PROBE_TIMEOUT_S)
    try:
        client.ping()
    except redis.RedisError:  # away, refusing the password, or not Redis at all: start a cluster of its own
        return None
    finally:
        client.close()
    return cluster
