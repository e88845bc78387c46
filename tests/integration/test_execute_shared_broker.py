"""`execute` on a shared broker: the workers' executor configuration decides, not the coordinator's.

The coordinator checked its own environment, which the workers never read: with the executor command set on
the workers only, `execute --executor command` was refused (exit 2); with it set on the coordinator only, every
task failed with "no executor command is configured", naming no worker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, wait_until
from test_execute_run import SUB, env_for, lite_plan, lite_task, project

from wfqueue.child_process import stop_process_group
from wfqueue.embedded import EmbeddedRedis
from wfqueue.state import redis_client

pytestmark = pytest.mark.integration


def start_worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "worker", "--hostname", f"{name}@%h",
                             "--concurrency", "1"], env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                            start_new_session=True)
    wait_until(lambda: " ready." in log.read_text(errors="replace") or proc.poll() is not None, 60, f"{name} ready")
    assert proc.poll() is None, log.read_text(errors="replace")
    return proc



def execute_killed_while_running(tasks_file: Path, repo: Path, env: dict[str, str], what: str) -> Path:
    """`wfqueue execute` of ``tasks_file``, SIGKILLed once `wfqueue status` shows its TASK-001 running (``what``
    names that wait); the folder of the repository's executions."""
    command = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "execute", str(tasks_file), "-y"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    executions = repo / ".workflow" / ".execution"

    def task_running() -> bool:
        shown = run_cli("status", next(executions.iterdir()).name, "--repo", str(repo), "--json", env=env)
        return shown.code == 0 and shown.json()["tasks"]["TASK-001"]["state"] == "running"

    try:
        wait_until(lambda: executions.is_dir() and any(executions.iterdir()) and task_running(), 120, what)
    finally:
        command.kill()
        command.wait()
    return executions

def test_the_workers_executor_configuration_decides_on_a_shared_broker(tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    configured = {**env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB}}), "WFQUEUE_BROKER_URL": redis.url}
    bare = {k: v for k, v in configured.items() if k != "WFQUEUE_EXECUTOR_COMMAND"}
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"])])
    try:
        worker = start_worker("with-agent", configured, tmp_path / "with-agent.log")
        try:
            # The executor is configured where the tasks run: asked for by name, the execution completes.
            done = run_cli("execute", str(tasks_file), "--executor", "command", "-y", "--json", env=bare)
            assert done.code == 0, done.stderr
            assert done.json()["status"] == "completed"
            # Without a name, this machine cannot tell: the refusal says to name it.
            refused = run_cli("execute", str(tasks_file), "-y", env=bare)
            assert refused.code == 2
            assert "pass --executor command or --executor claude" in " ".join(refused.stderr.split())
        finally:
            stop_process_group(worker, grace_s=20)
        worker = start_worker("without-agent", bare, tmp_path / "without-agent.log")
        try:
            # Configured here only: the task fails on the worker, which says it is the one lacking it.
            other_plan = lite_plan(project(tmp_path / "second"), [lite_task(1, "Add sub", ["calc/ops.py"])])
            failed = run_cli("execute", str(other_plan), "-y", "--json", env=configured)
            assert failed.code == 1, failed.stderr
            shown = json.dumps(failed.json()) + failed.stderr
            assert "on worker without-agent@" in shown and "no executor command is configured" in shown, shown
        finally:
            stop_process_group(worker, grace_s=20)
    finally:
        redis.stop()


def test_an_execution_whose_command_was_killed_reads_interrupted_not_running_for_ever(tmp_path: Path) -> None:
    """Beside `wfqueue up` (a shared broker), a SIGKILLed `execute` stayed "running" in `wfqueue status EXEC-ID`
    and execution.json for good, with no word of `--continue` (embedded mode said interrupted)."""
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    release = tmp_path / "release"
    env = {**env_for(tmp_path, {"TASK-001": {"edits": {"calc/ops.py": SUB}, "wait_for": str(release)}}),
           "WFQUEUE_BROKER_URL": redis.url}
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"])])
    try:
        worker = start_worker("remote", env, tmp_path / "remote.log")
        try:
            executions = execute_killed_while_running(tasks_file, repo, env, "TASK-001 running on the worker")
            (exec_dir,) = executions.iterdir()
            shown = run_cli("status", exec_dir.name, "--repo", str(repo), "--json", env=env)
            assert shown.code == 0 and shown.json()["status"] == "interrupted", shown.stdout
            release.touch()
            done = run_cli("execute", "--continue", exec_dir.name, "--repo", str(repo), "--json", env=env,
                           timeout=240)
            assert done.code == 0 and done.json()["status"] == "completed", done.stderr
        finally:
            stop_process_group(worker, grace_s=20)
    finally:
        redis.stop()


@pytest.mark.parametrize("sent", [True, False], ids=["commit-in-redis", "commit-lost"])
def test_continue_finishes_a_task_whose_result_another_worker_remembered(tmp_path: Path, sent: bool) -> None:
    """Workers without the coordinator's disk: a task finished on host A after its `execute` was killed; A
    left, C joined, and `--continue` sent the task again. C answered with A's remembered result, whose commit
    its own repository never had, and failed in sending it: every `--continue` exited 3, for good. Now the
    commit A sent is taken from Redis; where it is gone (expired), the task fails saying so, and the next
    `--continue` runs it again."""
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    release = tmp_path / "release"
    env = {**env_for(tmp_path, {"TASK-001": {"edits": {"calc/ops.py": SUB}, "wait_for": str(release)}}),
           "WFQUEUE_BROKER_URL": redis.url}
    env.pop("WFQUEUE_SHARED_DISK")  # the repository travels to the workers through Redis, and commits back
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"])])
    client = redis_client(redis.url, 5.0)
    try:
        host_a = start_worker("host-a", {**env, "WFQUEUE_WORKER_CACHE_DIR": str(tmp_path / "a-cache")},
                              tmp_path / "host-a.log")
        try:
            executions = execute_killed_while_running(tasks_file, repo, env, "TASK-001 running on host A")
            release.touch()
            wait_until(lambda: bool(client.keys("wfq:commits:*:meta")), 120, "host A sending TASK-001's commit")
        finally:
            stop_process_group(host_a, grace_s=20)
        host_c = start_worker("host-c", {**env, "WFQUEUE_WORKER_CACHE_DIR": str(tmp_path / "c-cache")},
                              tmp_path / "host-c.log")
        try:
            (exec_dir,) = executions.iterdir()
            again = ["execute", "--continue", exec_dir.name, "--repo", str(repo), "--json"]
            if not sent:
                client.delete(*client.keys("wfq:commits:*"))
                failed = run_cli(*again, env=env, timeout=240)
                assert failed.code == 1 and failed.json()["tasks"]["failed"] == ["TASK-001"], failed.stderr
                assert "made on another worker" in failed.stderr, failed.stderr
            done = run_cli(*again, env=env, timeout=240)
            assert done.code == 0 and done.json()["status"] == "completed", done.stdout + done.stderr
            execution = json.loads((exec_dir / "execution.json").read_text())
            # A's run where its commit came back; else a new attempt, run on C.
            assert execution["tasks"]["TASK-001"]["worker"].startswith("host-a@" if sent else "host-c@")
            assert "def sub" in subprocess.run(["git", "-C", str(repo), "show", f"{execution['branch']}:calc/ops.py"],
                                               capture_output=True, text=True, check=True).stdout
        finally:
            stop_process_group(host_c, grace_s=20)
    finally:
        redis.stop()
