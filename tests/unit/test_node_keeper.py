"""wfqueue.node_keeper without a broker: how a node's death is described, and where restarting stops."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery

from wfqueue.embedded import EmbeddedCluster
from wfqueue.errors import WorkerStartError
from wfqueue.local_workers import LocalWorkers
from wfqueue.node_keeper import NodeKeeper, exit_described


class Notes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(message)


def test_exit_codes_read_as_a_person_reads_them() -> None:
    assert exit_described(-9) == "killed by SIGKILL"
    assert exit_described(3) == "exit code 3"
    assert exit_described(-200) == "killed by signal 200"


def cluster_with_node(tmp_path: Path, code: int) -> EmbeddedCluster:
    cluster = EmbeddedCluster(tmp_path / "queue", concurrency=1)
    workers = LocalWorkers("redis+socket:///nowhere", 1, tmp_path / "queue")
    workers.proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    workers.proc.wait()
    cluster.workers = workers
    return cluster


def test_a_node_that_keeps_dying_ends_the_command_naming_its_log(tmp_path: Path) -> None:
    cluster = cluster_with_node(tmp_path, 3)
    keeper = NodeKeeper(cluster, Celery("unused"), Notes(), max_restarts=2, window_s=600)
    keeper.deaths = [time.monotonic() - 60, time.monotonic() - 30]  # replaced twice in the last minute
    with pytest.raises(WorkerStartError, match=r"exited \(exit code 3\), 3 times within 10 minutes") as raised:
        keeper.check()
    assert str(tmp_path / "queue" / "worker.log") in (raised.value.hint or "")


def test_deaths_long_ago_do_not_count(tmp_path: Path) -> None:
    """Under a `wfqueue up` that runs for weeks, deaths days apart are no crash loop."""
    keeper = NodeKeeper(cluster_with_node(tmp_path, 3), Celery("unused"), Notes(), max_restarts=0, window_s=600)
    keeper.deaths = [time.monotonic() - 5000] * 5
    with pytest.raises(WorkerStartError, match=r"1 time within"):  # only this one is recent
        keeper.check()


def test_a_running_node_is_left_alone(tmp_path: Path) -> None:
    cluster = EmbeddedCluster(tmp_path / "queue", concurrency=1)
    workers = LocalWorkers("redis+socket:///nowhere", 1, tmp_path / "queue")
    workers.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    cluster.workers = workers
    notes = Notes()
    try:
        NodeKeeper(cluster, Celery("unused"), notes).check()
        assert workers.proc.poll() is None and notes.lines == []
    finally:
        workers.proc.kill()
        workers.proc.wait()
