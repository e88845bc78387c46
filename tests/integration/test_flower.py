"""Flower on wfqueue's app: it sees a plan's tasks over its API with credentials, 401 without."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support import FOUR_AREAS, run_cli, session_dir, wait_until, wfqueue_env
from test_execute_run import OPS, SUB, env_for, lite_plan, lite_task, project

from wfqueue.embedded import EmbeddedRedis, stop_process_group

pytestmark = pytest.mark.integration
CREDENTIALS = "admin:s3cret-flower"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, credentials: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if credentials:
        request.add_header("Authorization", "Basic " + base64.b64encode(credentials.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def test_flower_lists_the_plans_tasks_with_credentials_and_refuses_without(sample_repo: Path, tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    port = free_port()
    # The worker also runs an execution's tasks, with the test executor program.
    env = {**env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB}}), "WFQUEUE_BROKER_URL": redis.url,
           "WFQUEUE_FLOWER_BASIC_AUTH": CREDENTIALS}
    procs = [start(["worker", "--hostname", "flower-test@%h", "--concurrency", "2"], env),
             start(["flower", "--port", str(port)], env)]
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if get(f"{base}/healthcheck")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        else:
            pytest.fail("Flower did not come up")
        assert get(f"{base}/api/tasks")[0] == 401
        assert get(f"{base}/api/tasks", "admin:wrong")[0] == 401
        run = run_cli("collab-plan", FOUR_AREAS, "--repo", str(sample_repo),
                      "--max-agents", "3", "-y", "--json", env=env)
        assert run.code == 0, run.stderr
        session = session_dir(run).name
        mine: list[dict] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, body = get(f"{base}/api/tasks?limit=200", CREDENTIALS)
            assert status == 200
            tasks = json.loads(body).values()
            mine = [t for t in tasks if session in str(t.get("kwargs", "")) + str(t.get("args", ""))]
            if {t["name"] for t in mine} >= {"wfqueue.collab.understand", "wfqueue.collab.plan_area",
                                             "wfqueue.collab.finalize"} and all(t["state"] == "SUCCESS" for t in mine):
                break
            time.sleep(0.5)
        areas = sorted(t["kwargs"] for t in mine if t["name"] == "wfqueue.collab.plan_area")
        assert len(areas) == 3 and all("focus_area" in k for k in areas), mine
        assert {t["state"] for t in mine} == {"SUCCESS"}

        # An execution's tasks, each named by its exec id and task id.
        repo = project(tmp_path)
        tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"])])
        executed = run_cli("execute", str(tasks_file), "-y", "--json", env=env)
        assert executed.code == 0, executed.stderr
        exec_id = executed.json()["exec_id"]
        assert (repo / "calc" / "ops.py").read_text(encoding="utf-8") == OPS  # the user's checkout is untouched

        def execute_tasks() -> list[dict]:
            status, body = get(f"{base}/api/tasks?taskname=wfqueue.execute.task&limit=50", CREDENTIALS)
            assert status == 200
            return [t for t in json.loads(body).values() if t["state"] == "SUCCESS"]

        shown = wait_until(execute_tasks, 30, "the execution's task in Flower")
        assert [t["kwargs"] for t in shown] == [f"exec_id={exec_id} task=TASK-001 attempt=1 executor=command"]
        status, metrics = get(f"{base}/metrics")
        assert status == 200 and b"flower_events_total" in metrics
    finally:
        for proc in procs:
            stop_process_group(proc, grace_s=20)
        redis.stop()


def test_flower_refuses_to_start_without_credentials(tmp_path: Path) -> None:
    run = run_cli("flower", env=wfqueue_env(WFQUEUE_BROKER_URL="redis://127.0.0.1:1/0"))
    assert run.code == 2
    assert "refusing to start Flower without credentials" in run.stderr
