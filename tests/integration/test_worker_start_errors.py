"""A local worker that fails before it logs (an import error, a bad option): the error the user reads
names the real cause, taken from the worker's own stderr, instead of an empty log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, wfqueue_env

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.embedded import EmbeddedRedis
from wfqueue.errors import WorkerStartError
from wfqueue.local_workers import LocalWorkers
from wfqueue.settings import load_settings

pytestmark = pytest.mark.integration
CAUSE = "the workers package of this test cannot be imported"


def broken_worker_env(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH puts a ``workers`` package that fails to import ahead of the real one: only the worker
    imports it (`celery -A workers.app`), so the command itself starts normally."""
    shadow = tmp_path / "shadow" / "workers"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(f"raise ImportError({CAUSE!r})\n", encoding="utf-8")
    return wfqueue_env(PYTHONPATH=str(shadow.parent))


def test_a_plan_whose_workers_cannot_import_says_why(sample_repo: Path, tmp_path: Path) -> None:
    run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo), "-y",
                  env=broken_worker_env(tmp_path), cwd=tmp_path, timeout=120)
    assert run.code == 3, run.stderr
    assert "the worker exited at start" in run.stderr, run.stderr
    assert CAUSE in run.stderr and "ImportError" in run.stderr, run.stderr
    assert "(no log)" not in run.stderr
    assert "worker.stderr" in run.stderr, "the hint names the file that keeps the worker's stderr"


def test_up_whose_workers_cannot_import_says_why(sample_repo: Path, tmp_path: Path) -> None:
    env = broken_worker_env(tmp_path)
    env.update(WFQUEUE_BEAT_SCHEDULE_FILE=str(tmp_path / "beat"), WFQUEUE_FLOWER_BASIC_AUTH="ops:start-secret")
    proc = subprocess.run([sys.executable, "-m", "wfqueue.cli.main", "up", "--repo", str(sample_repo), "--workers",
                           "1"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 3, proc.stderr
    assert CAUSE in proc.stderr and "(no log)" not in proc.stderr, proc.stderr


class BadPoolWorkers(LocalWorkers):
    """The local worker node started with a pool Celery does not know."""

    def options(self) -> list[str]:
        return [*super().options(), "--pool", "no-such-pool"]


def test_a_worker_refusing_its_options_says_which(tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    app = create_app(load_settings(broker_url=redis.url))
    workers = BadPoolWorkers(redis.url, 1, tmp_path / "queue", start_timeout_s=60)
    workers.log_path.parent.mkdir()
    workers.log_path.write_text("[earlier] celery@host ready.\n")  # the log a previous run appended to
    try:
        workers.start()
        with pytest.raises(WorkerStartError) as caught:
            workers.wait_ready(app)
    finally:
        workers.stop()
        release_result_subscriptions(app)
        redis.stop()
    message = caught.value.message
    assert "the worker exited at start (code 2)" in message, message
    assert "no-such-pool" in message and "--pool" in message, message
    assert "[earlier]" not in message, "only what this start wrote is quoted"
    assert os.fspath(workers.stderr_path) in caught.value.hint


def test_a_standalone_worker_whose_broker_refuses_its_password_stops_at_once(tmp_path: Path) -> None:
    """It retried every ten seconds, a hundred times, for a password that stays wrong; an unreachable broker is
    still waited for (a worker may start before its Redis)."""
    redis = EmbeddedRedis(tmp_path / "broker", password="right-password")
    redis.start()
    try:
        wrong = redis.url.replace(":right-password@", ":wrong-password@")
        assert wrong != redis.url
        run = run_cli("worker", "--concurrency", "1", env=wfqueue_env(WFQUEUE_BROKER_URL=wrong), timeout=60)
        assert run.code == 3, run.stderr
        assert "refused the credentials" in run.stderr and "wrong-password" not in run.stderr, run.stderr
        # Flower retried the same password for ever, its API up and watching nothing.
        flower = run_cli("flower", "--port", "1", env=wfqueue_env(WFQUEUE_BROKER_URL=wrong,
                                                                  WFQUEUE_FLOWER_BASIC_AUTH="ops:secret"), timeout=60)
        assert flower.code == 3 and "refused the credentials" in flower.stderr, flower.stderr
        # The listing read the files alone, without a word: stale states behind a password that stays wrong.
        listed = run_cli("status", "--repo", str(tmp_path), env=wfqueue_env(WFQUEUE_BROKER_URL=wrong), timeout=60)
        assert listed.code == 0 and "warning: the broker at" in listed.stderr, listed.stderr
        assert "refused the credentials" in listed.stderr and "what the session files say" in listed.stderr
        # A database the server does not have (`/99` of 16): retried for ever as "not reachable yet", and named
        # "does not answer as Redis" by the plan commands.
        no_such_db = f"{redis.url}?virtual_host=99"
        run = run_cli("worker", "--concurrency", "1", env=wfqueue_env(WFQUEUE_BROKER_URL=no_such_db), timeout=60)
        assert run.code == 3 and "has no database 99: DB index is out of range" in run.stderr, run.stderr
        assert "does not answer as Redis" not in run.stderr and "right-password" not in run.stderr
    finally:
        redis.stop()
