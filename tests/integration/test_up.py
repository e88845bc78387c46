"""`wfqueue up`: Redis, workers, beat and Flower in the foreground; plans use it; Ctrl-C stops it all."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from support import processes_mentioning, run_cli, session_dir, wait_until, wfqueue_env

from wfqueue.task_names import BEAT_WATCHDOG

pytestmark = pytest.mark.integration
CREDENTIALS = "ops:up-secret"


def with_environment(value: str) -> list[int]:
    """Processes whose environment carries ``value`` (beat and Flower inherit this test's settings)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if value.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def stop_if_running(proc: subprocess.Popen[str]) -> None:
    """After a failed check: up stops its children on SIGINT (SIGKILL would orphan them)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def flower_get(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    request.add_header("Authorization", "Basic " + base64.b64encode(CREDENTIALS.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:  # not listening yet
        return 0, b""


def test_up_serves_plans_flower_and_beat_until_interrupted(sample_repo: Path, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = wfqueue_env(WFQUEUE_FLOWER_BASIC_AUTH=CREDENTIALS, WFQUEUE_BEAT_SCHEDULE_FILE=str(tmp_path / "beat"),
                      WFQUEUE_WATCHDOG_INTERVAL_S="1")
    # Run from a project with ``beat`` and ``workers`` packages of its own: Celery must still load wfqueue's.
    project = tmp_path / "user-project"
    for package in ("beat", "workers"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(f'raise ImportError("the project\'s own {package}")\n')
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "up", "--repo", str(sample_repo), "--workers",
                             "2", "--flower-port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=project)
    marker = str(sample_repo / ".workflow" / ".queue")
    worker_log = sample_repo / ".workflow" / ".queue" / "worker.log"
    control_log = sample_repo / ".workflow" / ".queue" / "worker-control.log"
    base = f"http://127.0.0.1:{port}"
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("Ctrl-C") or not line:
                break
        text = "".join(lines)
        url = re.search(r"broker:  (\S+)", text)
        assert url and f"flower:  {base}/" in text, text
        announced = json.loads((sample_repo / ".workflow" / ".queue" / "up.json").read_text())
        assert announced["pid"] == proc.pid and announced["broker_url"] == url.group(1)
        # Flower watches task events only once it runs: the plan starts after it answers.
        wait_until(lambda: flower_get(f"{base}/healthcheck")[0] == 200, 90, "Flower answers")
        # No broker URL: the plan finds up's cluster in the repository and starts no Redis or workers of its own.
        run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo),
                      "--max-agents", "2", "-y", "--json", env=wfqueue_env())
        assert run.code == 0, run.stderr
        assert f"using the `wfqueue up` of this repository (pid {proc.pid}" in run.stderr, run.stderr
        assert "local worker process" not in run.stderr, run.stderr
        session = session_dir(run).name

        def plan_tasks_in_flower() -> set[str]:
            status, body = flower_get(f"{base}/api/tasks?limit=200")
            if status != 200:
                return set()
            return {t["name"] for t in json.loads(body).values()
                    if session in str(t.get("kwargs", "")) + str(t.get("args", "")) and t["state"] == "SUCCESS"}

        # With credentials, Flower lists the plan's tasks: it watches up's broker.
        wait_until(lambda: {"wfqueue.collab.understand", "wfqueue.collab.plan_area"} <= plan_tasks_in_flower(), 60,
                   "Flower lists the plan's tasks")
        # Beat schedules the watchdog (every second here) and up's control node runs it.
        wait_until(lambda: watchdog_ran(control_log), 60, "a watchdog pass sent by beat succeeds")
        assert not watchdog_ran(worker_log), "maintenance ran on the agents' node"
        assert processes_mentioning(marker), "up's processes should be running"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        assert proc.returncode == 0
        assert processes_mentioning(marker) == []
        assert not (sample_repo / ".workflow" / ".queue" / "up.json").exists(), "up's announcement outlived it"
        assert with_environment(str(tmp_path / "beat")) == [], "beat or Flower outlived `wfqueue up`"
    finally:
        stop_if_running(proc)


def watchdog_ran(log: Path) -> bool:
    return log.is_file() and re.search(rf"{re.escape(BEAT_WATCHDOG)}\[[0-9a-f-]+\] succeeded",
                                       log.read_text(errors="replace")) is not None


def child_running(parent: int, marker: str) -> int | None:
    """The pid of ``parent``'s child whose command line holds ``marker``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and marker in command:
            return int(entry.name)
    return None


@pytest.mark.long
def test_up_replaces_a_killed_worker_node_and_stops_when_its_redis_dies(sample_repo: Path, tmp_path: Path) -> None:
    """Nothing but `wfqueue up` watches its node and its Redis: a node killed by the out-of-memory killer left
    plan commands waiting an hour, and a dead Redis left up running with nothing behind it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = wfqueue_env(WFQUEUE_FLOWER_BASIC_AUTH=CREDENTIALS, WFQUEUE_BEAT_SCHEDULE_FILE=str(tmp_path / "beat"),
                      WFQUEUE_WATCHDOG_INTERVAL_S="1")
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "up", "--repo", str(sample_repo), "--workers",
                             "2", "--flower-port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    control_log = sample_repo / ".workflow" / ".queue" / "worker-control.log"
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    marker = str(sample_repo / ".workflow" / ".queue")
    try:
        wait_until(lambda: any(line.startswith("Ctrl-C") for line in lines), 90, "up running")
        again = run_cli("up", "--repo", str(sample_repo), "--flower-port", str(port), env=env, timeout=60)
        assert again.code == 3 and f"(pid {proc.pid}) already runs" in again.stderr, again.stderr
        # `wfqueue status` of a plan up runs reads the agents' live records in up's Redis (it read files only:
        # every running agent showed as pending, with no worker).
        # The agents are held until the release file appears: seen running however slow the machine is.
        release = tmp_path / "release"
        script = tmp_path / "held.json"
        script.write_text(json.dumps({"hold": {"plan_area:*": str(release)}}), encoding="utf-8")
        plan = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", "Add per-user rate "
                                 "limiting to the API", "--repo", str(sample_repo), "--max-agents", "2", "-y",
                                 "--provider", f"scripted:{script}", "--json"], env=wfqueue_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        planning = sample_repo / ".workflow" / ".planning"

        def a_running_agent() -> dict | None:
            sessions = list(planning.glob("CPLAN-*")) if planning.is_dir() else []
            if not sessions:
                return None
            shown = run_cli("status", sessions[0].name, "--repo", str(sample_repo), "--json", env=wfqueue_env())
            agents = json.loads(shown.stdout).get("agents", []) if shown.code == 0 else []
            return next((a for a in agents if a["state"] == "running"), None)

        running = wait_until(a_running_agent, 60, "an agent shown running")
        assert running["worker"] and isinstance(running["pid"], int), running
        # Both agents fill both slots of the main node; the watchdog runs beside them on the control node.
        control_log.write_text("")
        wait_until(lambda: watchdog_ran(control_log), 30, "a watchdog pass while the agents run")
        assert plan.poll() is None, "the plan ended before the watchdog could be seen running beside it"
        release.touch()
        assert plan.wait(timeout=120) == 0, plan.stderr.read()  # type: ignore[union-attr]
        node = child_running(proc.pid, "/worker.log")  # the agents' node, not the control node
        assert node is not None
        os.kill(node, signal.SIGKILL)
        wait_until(lambda: any("started a new one" in line for line in lines), 30, "a new node")
        assert "the local worker node exited (killed by SIGKILL)" in "".join(lines)
        run = run_cli("lite-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo), "-y",
                      "--json", env=wfqueue_env(), timeout=120)
        assert run.code == 0, run.stderr
        assert "using the `wfqueue up` of this repository" in run.stderr, run.stderr
        # Up's workers started without an API key: a key in this shell would not reach them.
        keyed = run_cli("lite-plan", "Add response caching", "--repo", str(sample_repo), "-y", "--provider",
                        "anthropic", env=wfqueue_env(ANTHROPIC_API_KEY="sk-only-here"), timeout=120)
        assert keyed.code == 2, keyed.stderr
        assert f"the workers of the `wfqueue up` of this repository (pid {proc.pid}) have none" in keyed.stderr
        assert not list((sample_repo / ".workflow" / ".lite-plan").glob("add-response-caching*"))

        redis_server = child_running(proc.pid, "redis-server")
        assert redis_server is not None
        os.kill(redis_server, signal.SIGKILL)
        assert proc.wait(timeout=60) == 3
        err = proc.stderr.read()  # type: ignore[union-attr]
        assert "the embedded Redis exited (killed by SIGKILL)" in err, err
        wait_until(lambda: processes_mentioning(marker) == [], 30, "up's workers, beat and Flower gone")
        assert with_environment(str(tmp_path / "beat")) == [], "beat or Flower outlived `wfqueue up`"
        assert not (sample_repo / ".workflow" / ".queue" / "up.json").exists(), "up's announcement outlived it"
    finally:
        stop_if_running(proc)


class _HealthyElsewhere(BaseHTTPRequestHandler):
    """Another program on the port that answers every request with 200: another up's Flower."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *_: object) -> None: ...


def test_up_whose_flower_port_is_taken_says_so_and_leaves_nothing_running(sample_repo: Path, tmp_path: Path) -> None:
    """The port held by another up's Flower (every up starts its Flower on the same default port): that Flower
    answered the new up's health check, so its banner named the other repository's Flower, and its up.json sent
    plan commands to it for a second before it failed with only 'flower exited (code 1)'."""
    other = HTTPServer(("127.0.0.1", 0), _HealthyElsewhere)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    port = other.server_address[1]
    try:
        env = wfqueue_env(WFQUEUE_FLOWER_BASIC_AUTH=CREDENTIALS, WFQUEUE_BEAT_SCHEDULE_FILE=str(tmp_path / "beat"))
        run = run_cli("up", "--repo", str(sample_repo), "--workers", "1", "--flower-port", str(port), env=env,
                      timeout=120)
    finally:
        other.shutdown()
        other.server_close()
    assert run.code == 2, run.stderr
    assert f"Flower's port {port} is in use" in run.stderr and "--flower-port" in run.stderr, run.stderr
    assert "flower:" not in run.stdout and "Ctrl-C stops" not in run.stdout, "the banner said everything was up"
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []
    assert not (sample_repo / ".workflow" / ".queue" / "up.json").exists()
