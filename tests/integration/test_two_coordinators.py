"""One coordinator per session: a second one is refused with the reason; a session of another repository
on the same broker that would get the same id (the same words, the same day) gets the next one instead."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import run_cli, wfqueue_env, write_script

from wfqueue.embedded import EmbeddedRedis
from wfqueue.state import redis_client

pytestmark = pytest.mark.integration


def test_a_second_coordinator_is_refused_and_another_repository_gets_the_next_id(sample_repo: Path,
                                                                                   tmp_path: Path) -> None:
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
        # Another repository on the same broker plans the same words the same day, while the first plan runs:
        # its session gets the next id, and the running one loses nothing.
        other_repo = tmp_path / "other" / sample_repo.name
        shutil.copytree(sample_repo, other_repo, ignore=shutil.ignore_patterns(".workflow"))
        other = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(other_repo),
                        "--max-agents", "4", "-y", "--provider", write_script(tmp_path / "quick.json"), "--json",
                        env=env)
        assert other.code == 0, other.stderr
        assert other.json()["session_id"] == f"{session}-2", other.stdout
        assert [p.name for p in (other_repo / ".workflow" / ".planning").iterdir()] == [f"{session}-2"]
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        result = json.loads(out)
        assert result["session_id"] == session and result["status"] == "completed", out
        # Once no coordinator holds them, the ids are still those sessions' on this broker (their agents may run
        # on, their resume and status read them): a third repository gets the next id again, not a reset one.
        third_repo = tmp_path / "third" / sample_repo.name
        shutil.copytree(sample_repo, third_repo, ignore=shutil.ignore_patterns(".workflow"))
        third = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(third_repo),
                        "--max-agents", "4", "-y", "--provider", write_script(tmp_path / "quick.json"), "--json",
                        env=env)
        assert third.code == 0 and third.json()["session_id"] == f"{session}-3", third.stdout + third.stderr
        meta = redis_client(redis.url, 5).hget(f"wfq:{session}:meta", "session_dir")
        assert meta is not None and json.loads(meta) == str(planning / session), meta
        # Workflow sessions (ids without a date) too: the second repository's was refused with exit 2.
        ids = []
        for repo in (sample_repo, other_repo):
            wfs = run_cli("plan", "Build JWT auth with refresh tokens", "--repo", str(repo), "-y", "--json",
                          "--provider", write_script(tmp_path / "quick.json"), env=env)
            assert wfs.code in (0, 1) and wfs.json()["status"] in ("completed", "partial"), wfs.stdout + wfs.stderr
            ids.append(wfs.json()["session_id"])
        assert ids[1] == f"{ids[0]}-2", ids
    finally:
        for proc in (first, worker):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
        redis.stop()
