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

from wfqueue.child_process import stop_process_group
from wfqueue.embedded import EmbeddedRedis

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


def wait_for_flower(base: str) -> None:
    def healthy() -> bool:
        try:
            return get(f"{base}/healthcheck")[0] == 200
        except OSError:
            return False

    wait_until(healthy, 60, "Flower")


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
        wait_for_flower(base)
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


def test_flower_sees_every_task_of_a_threads_node_start_and_succeed(sample_repo: Path, tmp_path: Path) -> None:
    """A threads-pool node (the default for remote-model agents) lost most of its tasks' started or succeeded
    events (Celery's event buffer is not thread-safe): Flower showed tasks that had succeeded as RECEIVED or
    STARTED for ever, or SUCCESS with no start time."""
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    port = free_port()
    env = wfqueue_env(WFQUEUE_BROKER_URL=redis.url, WFQUEUE_FLOWER_BASIC_AUTH=CREDENTIALS)
    procs = [start(["worker", "--hostname", "threads-test@%h", "--concurrency", "4", "--pool", "threads"], env),
             start(["flower", "--port", str(port)], env)]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_flower(base)
        sessions = []
        for n in range(3):
            run = run_cli("collab-plan", f"{FOUR_AREAS} (round {n})", "--repo", str(sample_repo), "--max-agents", "4",
                          "-y", "--json", env=env)
            assert run.code == 0, run.stderr
            sessions.append(session_dir(run).name)

        def plans_tasks() -> list[dict]:
            status, body = get(f"{base}/api/tasks?limit=500", CREDENTIALS)
            assert status == 200
            return [t for t in json.loads(body).values()
                    if any(s in str(t.get("kwargs", "")) + str(t.get("args", "")) for s in sessions)]

        def all_seen_through() -> list[dict] | None:
            tasks = plans_tasks()
            done = tasks and all(t["state"] == "SUCCESS" and t.get("started") for t in tasks)
            return tasks if done else None

        try:
            tasks = wait_until(all_seen_through, 30, "every task shown started and succeeded", interval_s=0.5)
        except AssertionError:
            stuck = [(t["name"], t["state"], t.get("started")) for t in plans_tasks()
                     if t["state"] != "SUCCESS" or not t.get("started")]
            pytest.fail(f"{len(stuck)} task(s) shown unfinished or never started: {stuck}")
        assert sum(t["name"] == "wfqueue.collab.plan_area" for t in tasks) >= 3 * 2  # each plan's agents are there
    finally:
        for proc in procs:
            stop_process_group(proc, grace_s=20)
        redis.stop()


def test_flower_refuses_to_start_without_credentials(tmp_path: Path) -> None:
    run = run_cli("flower", env=wfqueue_env(WFQUEUE_BROKER_URL="redis://127.0.0.1:1/0"))
    assert run.code == 2
    assert "refusing to start Flower without credentials" in run.stderr
