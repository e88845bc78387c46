"""Redis restarted mid-plan (same data directory, append-only file on): the plan completes by itself and no
finished area is planned or written again; a broker that stays away ends the plan with exit 3, and
`wfqueue resume` completes it once Redis is back."""

from __future__ import annotations

import json
import re
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery
from faults_support import (
    Worker,
    areas_retried_on_broker_loss,
    attempts,
    check_collab_session,
    group_members,
    running_agents,
    start_coordinator,
    start_worker,
    stop_group,
    stop_plan,
    wait_ready,
    write_report,
)
from support import FOUR_AREAS, run_cli, wait_until, wfqueue_env, write_script

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.embedded import EmbeddedRedis
from wfqueue.payloads import CollabUnderstand
from wfqueue.settings import load_settings
from wfqueue.state import BROKER_AWAY, redis_client
from wfqueue.task_names import QUEUE_PLAN

pytestmark = pytest.mark.integration
REQUIREMENT = FOUR_AREAS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tcp_redis(folder: Path) -> EmbeddedRedis:
    """A TCP port keeps the URL the same across the restart (a unix socket may move to a new temp dir)."""
    server = EmbeddedRedis(folder, port=free_port(), password=secrets.token_hex(12))
    server.start()
    return server


@pytest.mark.parametrize("release_at", ["after", "during"])
@pytest.mark.long
def test_a_redis_restart_mid_plan_is_completed_without_redoing_finished_areas(release_at: str, sample_repo: Path,
                                                                              tmp_path: Path) -> None:
    """Redis stops (SIGTERM: it flushes the append-only file) and starts again on the same data directory and
    port while two agents are mid-plan. ``after``: they finish once Redis is back. ``during``: they finish while
    it is down (2 s), so saving their results meets a missing broker and they retry. Either way the
    coordinator, which waits out outages up to WFQUEUE_BROKER_OUTAGE_GRACE_S, completes the plan by itself,
    no worker exits, and nothing finished before the restart is planned or written again."""
    redis = tcp_redis(tmp_path / "broker")
    url = redis.tcp_url("127.0.0.1")
    workers: list[Worker] = [start_worker(url, name, tmp_path / name) for name in ("restart-a", "restart-b")]
    coordinator = None
    try:
        wait_ready(workers)
        # api and auth finish; storage and notes-api are held mid-plan (their messages unacked) until the
        # release file appears, whatever the load on the machine.
        release = tmp_path / "release"
        provider = write_script(tmp_path / "script.json", latency_s=0.3,
                                hold={"plan_area:storage": str(release), "plan_area:notes-api": str(release)})
        logs = tmp_path / "coordinator"
        coordinator = start_coordinator(url, REQUIREMENT, sample_repo, provider, logs)
        planning = sample_repo / ".workflow" / ".planning"
        finished = lambda: {p.parent.name for p in planning.glob("*/agents/*/plan.json")}  # noqa: E731
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not {"api", "auth"} <= finished():
            time.sleep(0.05)
        assert finished() == {"api", "auth"}, f"planned before the restart: {finished()}"
        folder = next(planning.iterdir())
        client = redis_client(url, 5)
        held = {"storage", "notes-api"}
        while time.monotonic() < deadline and {a["area"] for a in running_agents(client, folder.name)} != held:
            time.sleep(0.05)
        assert {a["area"] for a in running_agents(client, folder.name)} == held, "the held agents never ran"
        done_before = {p.parent.name: p.read_bytes() for p in planning.glob("*/agents/*/plan.json")}

        redis.stop()
        if release_at == "during":
            release.touch()
            # The outage lasts 2 s; the held agents, released at once, finish their step inside it and meet
            # the missing broker when they save (the retries asserted below prove that they did).
            time.sleep(2)
        redis.start()  # same data directory, same port, same password
        release.touch()
        coordinator.wait(timeout=90)
        coordinator_err = (logs / "stderr").read_text()
        coordinator_out = (logs / "stdout").read_text()
        check = check_collab_session(folder)
        tries = attempts(redis_client(url, 5), folder.name)
        exited = [w.name for w in workers if w.proc.poll() is not None]
        write_report(f"redis_restart_{release_at}", {
            "coordinator_exit_code": coordinator.returncode,
            "coordinator_error": next((line for line in coordinator_err.splitlines() if line.startswith("error:")),
                                      None),
            "workers_exited": exited,
            "areas_done_before_restart": sorted(done_before),
            "attempts": tries,
            "sections_lost": len(check.sections_lost),
            "duplicate_tasks": len(check.duplicate_tasks),
            "note_problems": len(check.problems),
        })
        assert coordinator.returncode == 0, coordinator_err[-2000:]
        assert json.loads(coordinator_out)["status"] == "completed"
        assert "Traceback" not in coordinator_err
        assert exited == [], "a worker exited with the broker connection"
        assert check.sections_lost == [] and check.duplicate_tasks == [] and check.problems == [], check
        after = {area: (folder / "agents" / area / "plan.json").read_bytes() for area in done_before}
        assert after == done_before, "an area finished before the restart was written again"
        if release_at == "during":
            retried = areas_retried_on_broker_loss([w.log for w in workers])
            assert retried == held, f"the held agents did not meet the outage: retried {retried}"
        assert all(tries[area] == 1 for area in done_before), f"a finished area was planned again: {tries}"
        note = (folder / "plan-note.md").read_text()
        assert all(note.count(f"## 任务池 - {title}") == 1 for title in ("Api", "Auth", "Storage", "Notes Api"))
    finally:
        stop_plan(coordinator, workers, redis)
    assert [pid for w in workers for pid in group_members(w.pid)] == []


def active_task_ids(app: Celery, hostname: str) -> set[str]:
    """The ids of the tasks ``hostname`` is running now, as it answers itself. Each question goes on a
    connection of its own: one the restart cut is then never asked to carry the next."""
    try:
        with app.connection_for_write() as connection:
            replies = app.control.inspect(destination=[hostname], timeout=1, connection=connection).active() or {}
    except BROKER_AWAY:
        return set()
    return {task["id"] for task in replies.get(hostname, [])}


def test_a_worker_with_a_task_in_flight_survives_a_redis_restart(tmp_path: Path, sample_repo: Path) -> None:
    redis = tcp_redis(tmp_path / "broker")
    url = redis.tcp_url("127.0.0.1")
    worker = start_worker(url, "survivor", tmp_path / "survivor", concurrency=2)
    hostname = f"survivor@{socket.gethostname()}"
    app = None
    try:
        wait_ready([worker])
        # The understanding step is held (its message unacked, acks_late) until the release file appears,
        # so the task is in flight for the whole restart; the free pool slot waits in BRPOP meanwhile.
        release = tmp_path / "release"
        provider = write_script(tmp_path / "script.json", hold={"understand": str(release)})
        app = create_app(load_settings(broker_url=url))
        sent = CollabUnderstand(session_id="CPLAN-restart", session_dir=str(tmp_path / "session"),
                                repo=str(sample_repo), requirement=REQUIREMENT, max_agents=2,
                                provider=provider).send(app)
        wait_until(lambda: sent.id in active_task_ids(app, hostname), 30, "the worker runs the task")
        # Held, not only started: "active" comes before the step's own Redis writes (its records, the index), and
        # a restart then failed the task on a refused connection (a CI failure, twice, on a loaded machine).
        wait_until(Path(f"{release}.understand.held").exists, 60, "the step waits for its release")
        stopped = time.monotonic()
        redis.stop()
        redis.start()
        restarted_s = time.monotonic() - stopped
        try:
            # The worker tries again 2, 4, 6, ... s apart (kombu's back-off): a Redis slow to come back on a
            # loaded machine can cost it a few of those steps. 60 s only bounds a broken run.
            wait_until(lambda: sent.id in active_task_ids(app, hostname), 60,
                       "after the restart the worker answers, still running the task")
        except AssertionError as lost:
            said = worker.log.read_text()
            first = max(0, said.find("Traceback") - 500) if "Traceback" in said else max(0, len(said) - 3000)
            raise AssertionError(f"{lost} (Redis took {restarted_s:.1f}s to stop and start again); the worker's "
                                 f"log from its first error:\n{said[first:first + 6000]}") from None
        release.touch()
        wait_until(lambda: f"[{sent.id}] succeeded" in worker.log.read_text(), 60, "the task finishes")
        wait_until(lambda: app.control.ping(destination=[hostname], timeout=1), 30, "the worker answers a ping")
        log = worker.log.read_text()
        assert "Unrecoverable error" not in log and worker.proc.poll() is None, f"the worker exited:\n{log[-1500:]}"
    finally:
        if app is not None:
            release_result_subscriptions(app)
        stop_group(worker.proc)
        redis.stop()


def test_a_coordinator_that_loses_the_broker_exits_3_and_resume_completes_the_plan(sample_repo: Path,
                                                                                   tmp_path: Path) -> None:
    redis = tcp_redis(tmp_path / "broker")
    url = redis.tcp_url("127.0.0.1")
    password = redis.password or ""
    env = wfqueue_env(WFQUEUE_BROKER_URL=url, WFQUEUE_BROKER_OUTAGE_GRACE_S="3")
    proc = subprocess.Popen(  # no worker yet: the coordinator waits for the understanding step
        [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo", str(sample_repo), "-y",
         "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    worker = None
    try:
        planning = sample_repo / ".workflow" / ".planning"
        # The coordinator has sent the understanding step (no worker takes it) and waits for it.
        client = redis_client(url, 5)
        wait_until(lambda: client.llen(QUEUE_PLAN) == 1, 60, "the coordinator sends the understanding step")
        assert len(list(planning.iterdir())) == 1
        # Timed from before the stop: the coordinator may see the broker gone while stop() still waits for the
        # server's exit (a wait timed from after it measured 2.99 s of a 3 s grace).
        lost = time.monotonic()
        redis.stop()
        out, err = proc.communicate(timeout=90)
        waited_s = time.monotonic() - lost
        session = next(planning.iterdir()).name
        assert proc.returncode == 3, err[-2000:]
        assert "Traceback" not in err and password not in err + out
        assert re.search(rf"error: lost the broker at redis://:\*\*\*@127\.0\.0\.1:\d+/0 while {session} ran",
                         err), err
        assert f"wfqueue resume {session}" in err
        # --json: the error object names the session to resume (only the hint's words did).
        said = json.loads(out)
        assert (said["status"], said["exit_code"], said["session_id"]) == ("error", 3, session), out
        assert 3 <= waited_s < 15, f"gave up after {waited_s:.1f}s with a 3 s grace"

        redis.start()  # the broker is back: resume finishes the plan the coordinator started
        worker = start_worker(url, "resumer", tmp_path / "resumer")
        wait_ready([worker])
        resumed = run_cli("resume", session, "--repo", str(sample_repo), "--json", env=env, timeout=120)
        assert resumed.code == 0, resumed.stderr
        assert resumed.json()["status"] == "completed"
        check = check_collab_session(planning / session)
        assert check.sections_lost == [] and check.duplicate_tasks == [] and check.problems == [], check
    finally:
        if proc.poll() is None:
            stop_group(proc)
        if worker is not None:
            stop_group(worker.proc)
        redis.stop()


def test_a_redis_back_without_its_data_ends_the_wait_with_exit_3_and_resume_completes_the_plan(
        sample_repo: Path, tmp_path: Path) -> None:
    """Redis restarted without its data (no persistence) while the agents planned: the workers went on, the chord
    and every result were gone, and the command waited, saying nothing, for WFQUEUE_PLAN_TIMEOUT_S (an hour)."""
    redis = tcp_redis(tmp_path / "broker")
    url = redis.tcp_url("127.0.0.1")
    worker = start_worker(url, "survivor", tmp_path / "survivor")
    coordinator = None
    try:
        wait_ready([worker])
        provider = write_script(tmp_path / "slow.json", latency_s=3)
        coordinator = start_coordinator(url, REQUIREMENT, sample_repo, provider, tmp_path / "coordinator")
        planning = sample_repo / ".workflow" / ".planning"
        session = wait_until(lambda: planning.is_dir() and next((p.name for p in planning.iterdir()), None), 60,
                             "the session folder")
        client = redis_client(url, 5)
        wait_until(lambda: running_agents(client, session), 60, "an agent planning")
        client.flushall()
        coordinator.wait(timeout=60)
        err = (tmp_path / "coordinator" / "stderr").read_text()
        assert coordinator.returncode == 3, err[-2000:]
        assert f"the broker lost {session}'s state while the plan ran" in err and "Traceback" not in err, err
        assert f"wfqueue resume {session}" in err

        resumed = run_cli("resume", session, "--repo", str(sample_repo), "--json", env=wfqueue_env(
            WFQUEUE_BROKER_URL=url), timeout=120)
        assert resumed.code == 0, resumed.stderr
        assert resumed.json()["status"] == "completed"
        check = check_collab_session(planning / session)
        assert check.sections_lost == [] and check.duplicate_tasks == [] and check.problems == [], check
    finally:
        stop_plan(coordinator, [worker], redis)
