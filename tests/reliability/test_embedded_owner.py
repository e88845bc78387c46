"""One embedded Redis per repository: two commands started at once, and a Redis a killed command left behind.

Before the lock (wfqueue/redis_owner.py), two commands started at the same moment both found no Redis in the
repository's pid file and started two servers on one socket and one append-only file: one command failed
after 35 s with a lost broker, or both did after 60 s. A Redis left by a command killed without unwinding
(SIGKILL) blocked every later command in that repository until a person found and killed it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from execute_support import EXECUTOR_COMMAND, git, make_repo, snapshot
from support import processes_mentioning, run_cli, wait_until, wfqueue_env, write_script

from wfqueue.embedded import EmbeddedRedis, redis_server_binary
from wfqueue.errors import WorkerStartError
from wfqueue.sessions import queue_dir

pytestmark = pytest.mark.integration

REFUSED = "another wfqueue command runs the embedded Redis"


def start_plan(repo: Path, requirement: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "lite-plan", requirement, "--repo", str(repo),
                             "-y", "--json"], env=wfqueue_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)


def test_two_commands_started_at_once_in_one_repository_never_share_a_redis(sample_repo: Path) -> None:
    plans = [start_plan(sample_repo, "Add per-user rate limiting"), start_plan(sample_repo, "Add response caching")]
    outcomes = [(p.wait(timeout=180), p.stdout.read() if p.stdout else "", p.stderr.read() if p.stderr else "")
                for p in plans]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes in ([0, 0], [0, 3]), outcomes  # one waits its turn, or is refused at once: never both broken
    for code, out, err in outcomes:
        if code == 3:
            assert REFUSED in err and "wfqueue up" in err, err
        else:
            assert (Path(json.loads(out)["session_dir"]) / "tasks.jsonl").is_file(), err
    assert processes_mentioning(str(queue_dir(sample_repo))) == []


def test_a_redis_left_by_a_killed_command_is_stopped_by_the_next_one(tmp_path: Path) -> None:
    folder = tmp_path / "repo" / ".workflow" / ".queue" / "redis"
    folder.mkdir(parents=True)
    # What a SIGKILLed command leaves: its redis-server, running in the folder, named by the pid file.
    left = subprocess.Popen([redis_server_binary(), "--port", "0", "--unixsocket", str(folder / "redis.sock"),
                             "--dir", str(folder), "--pidfile", str(folder / "redis.pid")],
                            stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: (folder / "redis.pid").is_file(), 30, "the left-over Redis's pid file")
        redis = EmbeddedRedis(folder)
        redis.start()
        try:
            assert left.wait(timeout=10) == 0, "the left-over Redis was not stopped (SIGTERM: a clean exit)"
            assert redis.proc is not None and int((folder / "redis.pid").read_text()) == redis.proc.pid
            second = EmbeddedRedis(folder)  # a live owner is never stopped: the next command is refused
            with pytest.raises(WorkerStartError, match=REFUSED):
                second.start()
            assert redis.proc.poll() is None
        finally:
            redis.stop()
        started = time.monotonic()
        again = EmbeddedRedis(folder)  # the folder is free once its owner stopped
        again.start()
        again.stop()
        assert time.monotonic() - started < 30
    finally:
        if left.poll() is None:
            left.kill()
            left.wait()


def test_a_redis_port_another_program_holds_is_named_not_an_old_log(tmp_path: Path) -> None:
    """WFQUEUE_EMBEDDED_REDIS_PORT on a busy port showed the last 15 lines of redis.log, earlier commands'
    shutdowns among them, and a hint that another wfqueue may use the folder."""
    folder = tmp_path / "redis"
    folder.mkdir()
    (folder / "redis.log").write_text("1:M 01 Jan 2026 00:00:00.000 # Redis is now ready to exit, bye bye...\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        redis = EmbeddedRedis(folder, port=port)
        with pytest.raises(WorkerStartError) as caught:
            redis.start()
    assert caught.value.message == f"embedded Redis cannot listen on port {port}: another program uses it"
    assert "WFQUEUE_EMBEDDED_REDIS_PORT" in caught.value.hint and "bye bye" not in caught.value.message
    assert processes_mentioning(str(folder)) == []  # nothing left running


def helpers_of(marker: str) -> list[str]:
    """The command lines of the processes whose environment holds ``marker`` (up's worker node, beat and Flower
    inherit its settings), Redis left out: a killed command's Redis is the next command's to stop."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if "redis-server" not in args and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(args)
        except (OSError, IndexError):
            continue
    return found


def test_a_killed_wfqueue_up_takes_its_helpers_with_it_and_the_next_plan_completes(sample_repo: Path,
                                                                                   tmp_path: Path) -> None:
    """SIGKILL gives `wfqueue up` no chance to stop anything: its worker node, beat, Flower and Redis end with it
    (the kernel's parent-death signal, wfqueue/lifeline.py; its Redis ran on for nobody until the next command
    in the repository), and the next plan completes."""
    schedule = tmp_path / "beat-schedule-of-this-test"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = wfqueue_env(WFQUEUE_FLOWER_BASIC_AUTH="ops:secret", WFQUEUE_FLOWER_PORT=str(port),
                      WFQUEUE_BEAT_SCHEDULE_FILE=str(schedule))
    queue = queue_dir(sample_repo)
    up = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "up", "--repo", str(sample_repo),
                           "--workers", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True)
    try:
        wait_until(lambda: (queue / "up.json").is_file() or up.poll() is not None, 60, "wfqueue up announcing itself")
        assert up.poll() is None, up.communicate()[1]
        wait_until(lambda: len([p for p in helpers_of(str(schedule)) if "celery_command" in p]) == 2, 30,
                   "beat and Flower running")
        assert any("workers.serve" in p for p in helpers_of(str(schedule)))
    finally:
        up.kill()
        up.wait()
    wait_until(lambda: helpers_of(str(schedule)) == [], 30, "up's worker, beat and Flower ending with it")
    wait_until(lambda: processes_mentioning(str(queue)) == [], 30, "up's Redis ending with it")

    plan = run_cli("lite-plan", "Add response caching", "--repo", str(sample_repo), "-y", "--json", env=wfqueue_env())
    assert plan.code == 0, plan.stderr
    assert plan.json()["status"] == "completed"
    assert processes_mentioning(str(queue)) == []  # the left-over Redis was stopped, and the plan's own too


@contextmanager
def redis_of_a_live_command(folder: Path) -> Iterator[int]:
    """A Redis in ``folder`` whose parent is a live command (named wfqueue.cli.main) that took no lock, as a
    command of an older version runs it; yields the Redis's pid."""
    folder.mkdir(parents=True)
    command = [redis_server_binary(), "--port", "0", "--unixsocket", str(folder / "redis.sock"), "--dir", str(folder),
               "--pidfile", str(folder / "redis.pid")]
    serve = f"import subprocess, time; subprocess.Popen({command!r}, stdout=subprocess.DEVNULL); time.sleep(120)"
    owner = subprocess.Popen([sys.executable, "-c", serve, "wfqueue.cli.main"], start_new_session=True)
    try:
        wait_until(lambda: (folder / "redis.pid").is_file(), 30, "the owned Redis's pid file")
        yield int((folder / "redis.pid").read_text())
    finally:
        os.killpg(owner.pid, signal.SIGKILL)
        owner.wait()


def test_a_redis_whose_wfqueue_parent_still_runs_is_refused_not_stopped(tmp_path: Path) -> None:
    """A command of an older version takes no lock: its Redis has a live owner and is not a left-over."""
    folder = tmp_path / "repo" / ".workflow" / ".queue" / "redis"
    with redis_of_a_live_command(folder) as pid:
        second = EmbeddedRedis(folder)
        try:
            with pytest.raises(WorkerStartError, match=f"an embedded Redis \\(pid {pid}\\) already runs"):
                second.start()
        finally:
            second.stop()  # had it started (the test failing), its Redis would outlive the test
        assert Path(f"/proc/{pid}").is_dir(), "the Redis of a live command was stopped"


def test_an_execution_refused_the_redis_leaves_no_branch_and_no_folder(tmp_path: Path) -> None:
    """Refused at start (another command runs the repository's Redis): the user's repository is as it was, and
    no execution is left for `--continue` or `status` to find."""
    repo = make_repo(tmp_path)
    tasks = {"id": "TASK-001", "title": "Add sub", "description": "Add sub.", "type": "feature", "depends_on": [],
             "files": [{"path": "calc/ops.py", "action": "modify"}],
             "convergence": {"criteria": ["sub works"], "verification": "python -m pytest -q tests",
                             "definition_of_done": "sub is done"}}
    plan = repo / ".workflow" / ".lite-plan" / "calc-2026-01-01" / "tasks.jsonl"
    plan.parent.mkdir(parents=True)
    plan.write_text(json.dumps(tasks) + "\n", encoding="utf-8")
    before = snapshot(repo)
    with redis_of_a_live_command(queue_dir(repo) / "redis"):
        done = run_cli("execute", str(plan), "-y", "--repo", str(repo),
                       env=wfqueue_env(WFQUEUE_EXECUTOR_COMMAND=EXECUTOR_COMMAND))
    assert done.code == 3, done.stderr
    assert "already runs" in done.stderr, done.stderr
    assert git(repo, "branch", "--list", "wfqueue/*") == ""
    assert not (repo / ".workflow" / ".execution").exists() or not any((repo / ".workflow" / ".execution").iterdir())
    assert snapshot(repo) == before


def test_under_nohup_a_hangup_does_not_stop_the_plan(sample_repo: Path, tmp_path: Path) -> None:
    """SIGHUP stops a command like SIGTERM, except where it is ignored on purpose (`nohup`)."""
    provider = write_script(tmp_path / "script.json", latency_s=1.0)
    ignored = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does before it runs the command
    try:
        plan = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", "Add per-user rate limiting",
                                 "--repo", str(sample_repo), "--max-agents", "2", "-y", "--provider", provider,
                                 "--json"], env=wfqueue_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, stdin=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGHUP, ignored)
    log = queue_dir(sample_repo) / "worker.log"
    wait_until(lambda: log.is_file() and "plan_area" in log.read_text(errors="replace"), 60, "agents running")
    plan.send_signal(signal.SIGHUP)
    out, err = plan.communicate(timeout=120)
    assert plan.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
