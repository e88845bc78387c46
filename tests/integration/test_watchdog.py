"""Beat with real Redis and real processes: a plan whose header messages were lost is finished by the
watchdog, and a second beat on the same broker refuses to start."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from filelock import FileLock
from support import wait_until, wfqueue_env

from beat.housekeeping import archive_sessions, purge_files, purge_redis, remove_stale_locks
from beat.lock import SingleInstanceLock
from beat.names import (
    BEAT_ARCHIVE,
    BEAT_LOCK_KEY,
    BEAT_LOCKS,
    BEAT_PURGE,
    BEAT_WATCHDOG,
    REPOS_KEY,
    WATCHDOG_REENQUEUED,
)
from beat.snapshot import known_repos
from beat.watchdog import watch_all
from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.child_process import stop_process_group
from wfqueue.collab.coordinator import COLLAB_IDS
from wfqueue.collab.note import parse_note
from wfqueue.collab.recovery import enqueue_missing
from wfqueue.collab.steps import run_area, run_understanding
from wfqueue.coordinator_lease import CoordinatorLease
from wfqueue.embedded import EmbeddedRedis
from wfqueue.pids import pid_namespace
from wfqueue.providers import make_provider
from wfqueue.redis_owner import RedisOwnership
from wfqueue.sessions import planning_root
from wfqueue.settings import load_settings
from wfqueue.state import SessionState, redis_client

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
REQUIREMENT = "Add per-user rate limiting to the API"
DEADLINE_S = 2.0
GRACE_S = 2.0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    server = EmbeddedRedis(tmp_path / "broker")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def start_control_worker(url: str, hostname: str, log: Path) -> subprocess.Popen:
    """A worker on the control queue only: chord headers (queue plan) are never consumed."""
    env = wfqueue_env(WFQUEUE_BROKER_URL=url, WFQUEUE_WATCHDOG_DEADLINE_S=str(DEADLINE_S),
                      WFQUEUE_WATCHDOG_GRACE_S=str(GRACE_S),
                      PYTHONPATH=os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p))
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "watchdog_worker_app", "worker", "--queues", "control",
         "--concurrency", "2", "--pool", "prefork", "--hostname", hostname, "--without-gossip", "--without-mingle",
         "--loglevel", "INFO", "--logfile", str(log)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_ready(app: object, proc: subprocess.Popen, hostname: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"worker exited:\n{log.read_text() if log.exists() else ''}"
        if app.control.ping(destination=[hostname], timeout=0.5):  # type: ignore[attr-defined]
            return
    raise AssertionError(f"worker not ready:\n{log.read_text() if log.exists() else ''}")


def test_lost_header_messages_are_reenqueued_once_then_the_plan_is_finalised_partial(
    broker: str, sample_repo: Path, tmp_path: Path
) -> None:
    settings = load_settings(broker_url=broker)
    client = redis_client(broker, 5.0)
    app = create_app(settings)
    hostname = f"watchdog-{secrets.token_hex(3)}@{os.uname().nodename}"
    log = tmp_path / "worker.log"
    worker = start_control_worker(broker, hostname, log)
    try:
        wait_ready(app, worker, hostname, log)
        # A collab session started as the coordinator starts it, understood in-process (offline provider).
        sid = COLLAB_IDS.new(REQUIREMENT, datetime.now(UTC), set())
        session_dir = planning_root(sample_repo) / sid
        session_dir.mkdir(parents=True)
        state = SessionState(client, sid, settings.state_ttl_s)
        state.reset()
        state.set_meta(kind="collab", repo=str(sample_repo), session_dir=str(session_dir), requirement=REQUIREMENT,
                       provider="offline", status="planning")
        provider = make_provider("offline", settings)
        analysis = run_understanding(state, provider, session_dir, str(sample_repo), REQUIREMENT, 4)
        areas = [s.focus_area for s in analysis.sub_domains]
        assert len(areas) >= 2
        chord_result = enqueue_missing(app, state, session_dir, analysis, "offline")
        state.set_meta(chord_id=chord_result.id)
        # Mid-plan: one agent finished (as a worker would record it), then every header message is lost.
        done_area, stalled = areas[0], areas[1:]
        started = time.time()
        artifacts = run_area(state, provider, settings, session_dir, str(sample_repo), done_area, "elsewhere@host")
        state.set_agent(done_area, state="done", started_at=started, finished_at=time.time(),
                        tasks=artifacts.plan["task_count"])
        assert client.llen("plan") == len(areas)
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge("plan")
        assert client.llen("plan") == 0
        lost_at = time.monotonic()

        # The watchdog as beat sends it, two at a time (a second beat, or a redelivered message).
        reports: list[dict] = []
        while time.monotonic() - lost_at < DEADLINE_S + GRACE_S + 30:
            sent = [app.send_task(BEAT_WATCHDOG, queue="control") for _ in range(2)]
            reports += [r.get(timeout=30)["sessions"].get(sid) or {} for r in sent]
            if state.meta().get("status") == "partial":
                break
            time.sleep(0.3)
        finalised_after = time.monotonic() - lost_at
        assert state.meta().get("status") == "partial", reports[-4:]
        assert finalised_after <= DEADLINE_S + GRACE_S + 8, finalised_after

        acted = [r["decision"] for r in reports if r.get("acted")]
        assert acted == ["reenqueue", "finalize"], reports
        assert state.recall(WATCHDOG_REENQUEUED) is not None
        assert client.llen("plan") == len(stalled), "the missing areas were re-enqueued exactly once"
        assert state.recall("watchdog_finalized") is not None  # what the coordinator waits on

        note = parse_note((session_dir / "plan-note.md").read_text(encoding="utf-8"))
        assert note.front_matter["status"] == "partial"
        assert note.front_matter["contributors"] == [done_area]
        plan_md = (session_dir / "plan.md").read_text(encoding="utf-8")
        for area in stalled:
            assert f"`{area}`: stalled: no progress for" in plan_md
            assert state.agent(area)["state"] == "failed"
        assert "(watchdog)" in plan_md
        assert state.agent(done_area)["state"] == "done"

        # Later passes leave the finished session alone.
        again = app.send_task(BEAT_WATCHDOG, queue="control").get(timeout=30)
        assert sid not in again["sessions"]

        # The other maintenance tasks run on the same worker (their bodies load beat.housekeeping when they
        # first run): this repository is known, its fresh session is neither purged nor archived.
        repos = [str(sample_repo)]
        assert app.send_task(BEAT_PURGE, args=[repos], queue="control").get(timeout=30)["deleted_sessions"] == []
        assert "removed" in app.send_task(BEAT_LOCKS, args=[repos], queue="control").get(timeout=30)
        assert app.send_task(BEAT_ARCHIVE, args=[repos], queue="control").get(timeout=30)["archived"] == []
        assert session_dir.is_dir()
    finally:
        stop_process_group(worker, grace_s=20)
        release_result_subscriptions(app)


def start_beat(url: str, schedule: Path, log: Path, cwd: Path) -> subprocess.Popen:
    env = wfqueue_env(WFQUEUE_BROKER_URL=url, WFQUEUE_BEAT_SCHEDULE_FILE=str(schedule),
                      WFQUEUE_WATCHDOG_INTERVAL_S="0.5")
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen([sys.executable, "-m", "celery", "-A", "beat.app", "beat", "--loglevel", "INFO"],
                                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=cwd)


def test_one_beat_per_broker_and_it_sends_the_watchdog_to_control(broker: str, tmp_path: Path) -> None:
    client = redis_client(broker, 5.0)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    first = start_beat(broker, tmp_path / "one" / "schedule", tmp_path / "one.log", workdir)
    second: subprocess.Popen | None = None
    try:
        deadline = time.monotonic() + 30
        while client.get(BEAT_LOCK_KEY) is None and time.monotonic() < deadline:
            assert first.poll() is None, (tmp_path / "one.log").read_text()
            time.sleep(0.1)
        holder = client.get(BEAT_LOCK_KEY)
        assert holder is not None and f"pid {first.pid}" in holder
        wait_until(lambda: "Sending due task" in (tmp_path / "one.log").read_text(), 30, "the first beat ticking")
        schedule = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "one").glob("schedule*")}
        # The same schedule file, as two beats of one broker have by default: the refused one must not write it
        # (it did, on its way out: the running beat's entries, read back as never run).
        second = start_beat(broker, tmp_path / "one" / "schedule", tmp_path / "two.log", workdir)
        assert second.wait(timeout=30) == 3
        assert {p.name: (p.stat().st_mtime_ns, p.read_bytes())
                for p in (tmp_path / "one").glob("schedule*")} == schedule
        refusal = (tmp_path / "two.log").read_text()
        assert "another beat already schedules" in refusal and f"pid {first.pid}" in refusal
        # The first one runs on: the watchdog reaches the control queue (no worker consumes it here).
        deadline = time.monotonic() + 15
        while client.llen("control") == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.llen("control") >= 1
        assert list(workdir.iterdir()) == [], "nothing written into the current directory"
        assert list((tmp_path / "one").glob("schedule*")), "the schedule file goes where it was told"
    finally:
        for proc in (second, first):
            if proc is not None:
                stop_process_group(proc, grace_s=20)
    assert client.get(BEAT_LOCK_KEY) is None, "a stopped beat releases its lock"


def write_wfs(folder: Path, status: str, updated_at: str) -> None:
    folder.mkdir(parents=True)
    (folder / "workflow-session.json").write_text(json.dumps({
        "session_id": folder.name, "project": "sample", "description": "x", "type": "workflow", "status": status,
        "created_at": updated_at, "updated_at": updated_at, "custom_field": "kept"}), encoding="utf-8")


def test_purge_locks_and_archive_act_once_on_real_redis_and_files(broker: str, sample_repo: Path) -> None:
    settings = load_settings(broker_url=broker)
    client = redis_client(broker, 5.0)
    now = time.time()
    old, day = now - 40 * 86_400, 86_400
    old_iso = datetime.fromtimestamp(old, UTC).isoformat(timespec="seconds")

    # Redis: a long-finished session whose keys lost their TTL, a recent finished one, a running one.
    stale, recent, running = (SessionState(client, sid, settings.state_ttl_s) for sid in ("CPLAN-old", "CPLAN-new",
                                                                                           "CPLAN-run"))
    for state, status in ((stale, "partial"), (recent, "completed"), (running, "planning")):
        state.set_meta(kind="collab", repo=str(sample_repo), status=status)
        state.set_agent("api", state="done", started_at=old if state is stale else now - 60,
                        finished_at=old if state is stale else now - 30)
        client.persist(state.prefix + "meta")
    client.set(stale.prefix + "created_at", old_iso)  # written without a TTL
    # Beat's own record of repositories, damaged (a string, set by hand): every hourly pass failed on WRONGTYPE.
    client.set(REPOS_KEY, "x")
    assert known_repos(client, settings.state_ttl_s, now, 31) == [sample_repo]
    first = purge_redis(client, settings, now)
    assert first["deleted_sessions"] == ["CPLAN-old"]
    assert not list(client.scan_iter(match=stale.prefix + "*"))
    assert 0 < client.ttl(recent.prefix + "meta") <= settings.state_ttl_s  # given the rest of its TTL
    assert client.ttl(running.prefix + "meta") == -1  # running sessions are the watchdog's
    assert purge_redis(client, settings, now)["deleted_sessions"] == []

    # In use, however long ago its agents last started: an execution under way (its meta said "active", which
    # purge took for finished: the running `execute` then lost its state and ended with exit 3), and a finished
    # plan a command drives again (`resume`), holding the coordinator's claim.
    executing, resumed = (SessionState(client, sid, settings.state_ttl_s) for sid in ("EXEC-long", "CPLAN-again"))
    executing.set_meta(kind="execute", repo=str(sample_repo), status="running")
    resumed.set_meta(kind="collab", repo=str(sample_repo), status="partial")
    for state in (executing, resumed):
        state.set_agent("TASK-001", state="running", started_at=old)
    with CoordinatorLease(resumed):
        assert purge_redis(client, settings, now)["deleted_sessions"] == []
    assert executing.meta() and resumed.meta()
    app = create_app(settings)
    assert watch_all(app, client, settings, now)["sessions"]["EXEC-long"]["decision"] == "wait"  # first seen
    watched = watch_all(app, client, settings, now + settings.watchdog_deadline_s + 1)["sessions"]
    assert watched["EXEC-long"]["decision"] == "report" and "CPLAN-again" not in watched  # executions: reported
    assert purge_redis(client, settings, now)["deleted_sessions"] == ["CPLAN-again"]  # no one drives it now

    # Embedded logs: only old ones go.
    queue = sample_repo / ".workflow" / ".queue"
    (queue / "redis").mkdir(parents=True)
    for name in ("worker.log", "redis/redis.log", "beat-flower.log"):
        (queue / name).write_text("log\n")
    os.utime(queue / "worker.log", (old, old))
    os.utime(queue / "redis" / "redis.log", (old, old))
    # While a command (a plan, `wfqueue up`) owns the repository's Redis its processes write these logs: kept.
    owner = RedisOwnership(queue / "redis")
    owner.acquire()
    try:
        assert purge_files([sample_repo], settings, now) == []
    finally:
        owner.release()
    assert sorted(Path(p).name for p in purge_files([sample_repo], settings, now)) == ["redis.log", "worker.log"]
    assert [p.name for p in queue.glob("*.log")] == ["beat-flower.log"]

    # Lock files: old and free -> removed; old but held -> kept; fresh -> kept.
    planning = sample_repo / ".workflow" / ".planning" / "CPLAN-x"
    planning.mkdir(parents=True)
    free, held, fresh = (planning / f"{n}.md.lock" for n in ("free", "held", "fresh"))
    for path in (free, held, fresh):
        path.write_text("")
    for path in (free, held):
        os.utime(path, (now - 2 * settings.stale_lock_age_s,) * 2)
    # The embedded Redis's owner lock is a plain flock its command holds without touching the file: it looks as
    # old as the command, and unlinked, a second command would take a new file and think itself the owner.
    owner = RedisOwnership(queue / "redis")
    owner.acquire()
    redis_lock = next((queue / "redis").glob("*.lock"))
    os.utime(redis_lock, (now - 2 * settings.stale_lock_age_s,) * 2)
    try:
        with FileLock(str(held)):
            result = remove_stale_locks(client, [sample_repo], settings, now)
    finally:
        owner.release()
    assert result == {"removed": [str(free)], "held": [str(held)]}
    assert not free.exists() and held.exists() and fresh.exists() and redis_lock.exists()

    # Archive: a completed session idle past archive_after_days moves, with one manifest entry.
    active = sample_repo / ".workflow" / "active"
    write_wfs(active / "WFS-done", "completed", old_iso)
    write_wfs(active / "WFS-live", "active", old_iso)
    write_wfs(active / "WFS-fresh", "completed", datetime.fromtimestamp(now - day, UTC).isoformat())
    # An archive interrupted between the move and the manifest is completed too.
    write_wfs(sample_repo / ".workflow" / "archives" / "WFS-moved", "completed", old_iso)
    assert archive_sessions(client, [sample_repo], settings, now)["archived"] == ["WFS-done"]
    assert sorted(p.name for p in active.iterdir()) == ["WFS-fresh", "WFS-live"]
    archives = sample_repo / ".workflow" / "archives"
    manifest = json.loads((archives / "manifest.json").read_text())
    entries = {e["session_id"]: e for e in manifest["archives"]}
    assert set(entries) == {"WFS-done", "WFS-moved"}
    assert entries["WFS-done"]["status"] == "completed"
    assert entries["WFS-done"]["path"] == ".workflow/archives/WFS-done"
    moved = json.loads((archives / "WFS-done" / "workflow-session.json").read_text())
    assert moved["status"] == "archived" and moved["custom_field"] == "kept"
    # A second pass (another beat, or a redelivery) changes nothing.
    client.delete(*client.keys("wfq:beat:guard:*"))
    before = (archives / "manifest.json").read_bytes()
    assert archive_sessions(client, [sample_repo], settings, now) == {"archived": [], "problems": []}
    assert (archives / "manifest.json").read_bytes() == before


def test_watchdog_only_reports_other_kinds_and_leaves_unstarted_plans_alone(broker: str) -> None:
    settings = load_settings(broker_url=broker, watchdog_deadline_s=10, watchdog_grace_s=10)
    client = redis_client(broker, 5.0)
    app = create_app(settings)  # nothing is sent: no worker needed
    lite = SessionState(client, "lite-x-2025-01-01", settings.state_ttl_s)
    lite.set_meta(kind="lite", repo="/nowhere", session_dir="/nowhere/s", status="planning")
    lite.set_agent("patterns", state="queued")
    waiting = SessionState(client, "CPLAN-confirm", settings.state_ttl_s)  # split shown, user not answered yet
    waiting.set_meta(kind="collab", repo="/nowhere", session_dir="/nowhere/c", status="planning")
    done = SessionState(client, "CPLAN-done", settings.state_ttl_s)
    done.set_meta(kind="collab", status="completed")
    now = time.time()
    try:
        first = watch_all(app, client, settings, now)["sessions"]
        assert first[lite.session_id]["decision"] == "wait" and first[waiting.session_id]["decision"] == "wait"
        assert done.session_id not in first
        later = [watch_all(app, client, settings, now + 11)["sessions"] for _ in range(2)]
        assert [p[lite.session_id]["decision"] for p in later] == ["report", "report"]
        assert [p[lite.session_id]["acted"] for p in later] == [True, False]  # logged once per deadline
        # The lite kind says what is not done (nothing assessed yet), through the registry.
        assert later[0][lite.session_id]["note"] == "missing: assessment, planning"
        assert later[0][waiting.session_id]["decision"] == "wait"
        assert watch_all(app, client, settings, now + 1000)["sessions"][waiting.session_id]["decision"] == "wait"
        assert lite.agent("patterns")["state"] == "queued"  # a report changes nothing
    finally:
        release_result_subscriptions(app)


def test_beat_lock_refresh_and_release_only_by_its_holder(broker: str) -> None:
    client = redis_client(broker, 5.0)
    mine = SingleInstanceLock(client, BEAT_LOCK_KEY, 5, holder="beat A")
    other = SingleInstanceLock(client, BEAT_LOCK_KEY, 5, holder="beat B")
    assert mine.acquire() is None
    assert other.acquire() == "beat A"
    assert not other.refresh()
    other.release()  # not its lock: nothing happens
    assert client.get(BEAT_LOCK_KEY) == "beat A"
    client.expire(BEAT_LOCK_KEY, 2)
    assert mine.refresh() and client.ttl(BEAT_LOCK_KEY) > 2
    mine.release()
    assert client.get(BEAT_LOCK_KEY) is None
    assert other.acquire() is None
    other.release()
    # A holder whose key expired while nobody else took it gets it back; one that lost it to another stops.
    mine.acquire()
    lost: list[bool] = []
    client.delete(BEAT_LOCK_KEY)
    mine.ttl_s = 3
    mine.keep_alive(on_lost=lambda: lost.append(True))
    wait_until(lambda: client.get(BEAT_LOCK_KEY) == "beat A", 15, "the holder takes its expired lock back")
    assert not lost
    client.set(BEAT_LOCK_KEY, "beat B")
    wait_until(lambda: lost, 15, "the holder notices another beat took its lock")
    assert lost == [True]
    mine.release()
    assert client.get(BEAT_LOCK_KEY) == "beat B"


def test_a_beat_that_died_on_this_host_leaves_its_lock_to_the_next_one(broker: str) -> None:
    """`wfqueue up` whose Redis was killed says to run it again; the new up's beat found the dead beat's lock,
    kept in the append-only file, and exited 3 for the rest of its TTL."""
    client = redis_client(broker, 5.0)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    started = "2026-01-01T00:00:00+00:00 [0badbeef]"
    here = f"{socket.gethostname()} pid {{pid}} ns {pid_namespace()}"
    dead = f"beat on {here.format(pid=gone.pid)} since {started}"
    client.set(BEAT_LOCK_KEY, dead, ex=30)
    new = SingleInstanceLock(client, BEAT_LOCK_KEY, 30)
    assert new.acquire() == dead  # a running beat that lost its key never takes another's
    assert new.acquire(take_over_dead=True) is None and client.get(BEAT_LOCK_KEY) == new.holder
    # A beat still running here, one on another host or in another pid namespace (a container sharing the host
    # name: its pids are not ours to judge) keeps its lock.
    for alive in (f"beat on {here.format(pid=os.getpid())} since {started}",
                  f"beat on elsewhere.example pid {gone.pid} ns {pid_namespace()} since {started}",
                  f"beat on {socket.gethostname()} pid {gone.pid} ns 1 since {started}"):
        client.set(BEAT_LOCK_KEY, alive, ex=30)
        assert SingleInstanceLock(client, BEAT_LOCK_KEY, 30).acquire(take_over_dead=True) == alive
    client.delete(BEAT_LOCK_KEY)
