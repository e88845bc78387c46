"""One coordinator per session: a second one is refused with the reason."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import run_cli, wfqueue_env, write_script

from wfqueue.embedded import EmbeddedRedis

pytestmark = pytest.mark.integration


def test_a_second_coordinator_on_a_running_session_is_refused(sample_repo: Path, tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    env = wfqueue_env(WFQUEUE_BROKER_URL=redis.url)
    script = tmp_path / "script.json"
    provider = write_script(script, hang={"plan_area:storage": 8})
    worker = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "worker", "--concurrency", "4",
                               "--hostname", "two@%h", "--loglevel", "WARNING"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan",
                              "Add per-user rate limiting to the API", "--repo", str(sample_repo), "--max-agents", "4",
                              "-y", "--provider", provider, "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        planning = sample_repo / ".workflow" / ".planning"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(planning.glob("*/agents/api/plan.json")):
            time.sleep(0.2)
        session = next(planning.iterdir()).name
        second = run_cli("resume", session, "--repo", str(sample_repo), env=env)
        assert second.code == 2, second.stderr
        assert f"session {session} is already being driven by" in second.stderr
        _out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
    finally:
        for proc in (first, worker):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
        redis.stop()
