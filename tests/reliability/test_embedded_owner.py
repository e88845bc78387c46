"""One embedded Redis per repository: two commands started at once, and a Redis a killed command left behind.

Before the lock (wfqueue/redis_owner.py), two commands started at the same moment both found no Redis in the
repository's pid file and started two servers on one socket and one append-only file: one command failed
after 35 s with a lost broker, or both did after 60 s. A Redis left by a command killed without unwinding
(SIGKILL) blocked every later command in that repository until a person found and killed it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import processes_mentioning, run_cli, wait_until, wfqueue_env

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
    """SIGKILL gives `wfqueue up` no chance to stop anything: its worker node, beat and Flower end with it (the
    kernel's parent-death signal, wfqueue/lifeline.py), and the next command stops the Redis it left."""
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

    plan = run_cli("lite-plan", "Add response caching", "--repo", str(sample_repo), "-y", "--json", env=wfqueue_env())
    assert plan.code == 0, plan.stderr
    assert plan.json()["status"] == "completed"
    assert processes_mentioning(str(queue)) == []  # the left-over Redis was stopped, and the plan's own too
