"""A shared broker: standalone workers, idempotent callback, sections merged from Redis, many writers."""

from __future__ import annotations

import json
import multiprocessing
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, session_dir, wfqueue_env, write_script

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.child_process import stop_process_group
from wfqueue.collab.note import parse_note, render_note, replace_section
from wfqueue.collab.note_blocks import note_tasks
from wfqueue.embedded import EmbeddedCluster, EmbeddedRedis
from wfqueue.fsio import locked_update
from wfqueue.payloads import CollabFinalize, CollabPlanArea
from wfqueue.samples import make_service_repo
from wfqueue.settings import load_settings

pytestmark = pytest.mark.integration
REQUIREMENT = "Add per-user rate limiting to the API"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture
def broker(tmp_path: Path):
    server = EmbeddedRedis(tmp_path / "broker")
    server.start()
    yield server.url
    server.stop()


def start_worker(url: str, name: str, concurrency: int = 2) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", "worker", "--hostname", f"{name}@%h", "--concurrency",
         str(concurrency), "--loglevel", "WARNING"],
        env=wfqueue_env(WFQUEUE_BROKER_URL=url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_coordinator_only_enqueues_and_standalone_workers_do_the_work(broker: str, sample_repo: Path,
                                                                      tmp_path: Path) -> None:
    workers = [start_worker(broker, "remote-a"), start_worker(broker, "remote-b")]
    try:
        provider = write_script(tmp_path / "script.json", latency_s=0.5)
        env = wfqueue_env(WFQUEUE_BROKER_URL=broker)
        run = run_cli("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "4", "-y",
                      "--provider", provider, "--json", env=env, timeout=240)
        assert run.code == 0, run.stderr
        folder = session_dir(run)
        names = {json.loads(p.read_text())["_metadata"]["worker"].split("@")[0]
                 for p in folder.glob("agents/*/plan.json")}
        assert names == {"remote-a", "remote-b"}
        assert not (sample_repo / ".workflow" / ".queue").exists(), "no embedded broker with a broker URL"
        live = json.loads(run_cli("status", folder.name, "--repo", str(sample_repo), "--json", env=env).stdout)
        assert {a["state"] for a in live["agents"]} == {"done"}
    finally:
        for proc in workers:
            stop_process_group(proc, grace_s=20)


def finalize(app, sid: str, folder: Path) -> object:
    """The chord callback run again on its own, as the late-area path and the watchdog send it."""
    return CollabFinalize(session_id=sid, session_dir=str(folder)).send_alone(app).get(timeout=60)


def test_callback_is_idempotent_and_rebuilds_sections_from_redis(sample_repo: Path) -> None:
    first = run_cli("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "4", "-y", "--json")
    assert first.code == 0, first.stderr
    folder = session_dir(first)
    sid = folder.name
    before = snapshot(folder)
    # Restart the embedded broker on the same data: the session's state survives in the append-only file.
    cluster = EmbeddedCluster(sample_repo / ".workflow" / ".queue", concurrency=2)
    with cluster:
        settings = load_settings(broker_url=cluster.start_redis())
        app = create_app(settings)
        cluster.start_workers(app)
        try:
            finalize(app, sid, folder)
            assert snapshot(folder) == before, "finalize twice changed the files"
            # A redelivered header task: the cached answer is reused, the files stay the same.
            outcome = CollabPlanArea(session_id=sid, session_dir=str(folder), repo=str(sample_repo), focus_area="api",
                                     provider="offline").send(app).get(timeout=60)
            assert outcome["status"] == "done"
            finalize(app, sid, folder)
            assert snapshot(folder) == before, "a redelivered header task changed the files"
            # Another host's disk: this one never saw the storage agent's files or section.
            (folder / "agents" / "storage" / "plan.json").unlink()
            note = parse_note((folder / "plan-note.md").read_text())
            note = replace_section(note, "任务池 - Storage", "\n_lost on this disk_\n\n")
            (folder / "plan-note.md").write_text(render_note(note))
            finalize(app, sid, folder)
            assert snapshot(folder) == before, "sections held in Redis were not restored"
        finally:
            release_result_subscriptions(app)


def _writer(note_path: str, heading: str, rounds: int) -> None:
    for n in range(rounds):
        def update(current: str | None, n: int = n) -> str:
            return render_note(replace_section(parse_note(current or ""), heading, f"\n{heading} round {n}\n\n"))
        locked_update(Path(note_path), update, timeout_s=60)


def test_twenty_concurrent_writer_processes_lose_no_section(tmp_path: Path) -> None:
    note_path = tmp_path / "plan-note.md"
    note_path.write_text("---\nsession_id: x\n---\n\n## 需求理解\n\nshared\n\n")
    headings = [f"任务池 - Area {n}" for n in range(20)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(note_path), h, 15)) for h in headings]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    note = parse_note(note_path.read_text())
    assert note.problems == []
    for heading in headings:
        assert note.section(heading).body == f"\n{heading} round 14\n\n"
    assert note.section("需求理解").body == "\nshared\n\n"


def test_twenty_agents_on_twenty_worker_processes(tmp_path: Path) -> None:
    repo = make_service_repo(tmp_path / "services", 20)
    provider = write_script(tmp_path / "script.json", latency_s=0.3)
    run = run_cli("collab-plan", "Add per-user rate limiting to every service API request", "--repo", str(repo),
                  "--max-agents", "20", "--workers", "20", "-y", "--provider", provider, "--json", timeout=300)
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    note = parse_note((folder / "plan-note.md").read_text())
    tasks, problems = note_tasks(note)
    assert problems == []
    areas = note.front_matter["sub_domains"]
    assert len(areas) == 20 and sorted(note.front_matter["contributors"]) == sorted(areas)
    assert {t.area for t in tasks} == set(areas)
    pids = {json.loads(p.read_text())["_metadata"]["pid"] for p in folder.glob("agents/*/plan.json")}
    assert len(pids) >= 5, pids


def test_a_plan_whose_command_died_before_sending_its_agents_reads_interrupted(broker: str, sample_repo: Path,
                                                                                tmp_path: Path) -> None:
    """The command was killed while a worker ran its understanding step; the worker finished it, and `status`
    then said "planning" for ever, its agents pending (never sent: only the command sends them), with no word
    of `wfqueue resume`."""
    from support import wait_until

    release = tmp_path / "release"
    provider = write_script(tmp_path / "script.json", hold={"understand": str(release)})
    env = wfqueue_env(WFQUEUE_BROKER_URL=broker)
    worker = start_worker(broker, "remote")
    try:
        command = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo",
                                    str(sample_repo), "--max-agents", "2", "-y", "--provider", provider],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        planning = sample_repo / ".workflow" / ".planning"
        wait_until(Path(f"{release}.understand.held").exists, 60, "the understanding under way on the worker")
        command.kill()
        command.wait()
        release.touch()
        (folder,) = planning.iterdir()

        def shown() -> dict | None:
            done = run_cli("status", folder.name, "--repo", str(sample_repo), "--json", env=env, timeout=60)
            status = json.loads(done.stdout)
            return status if status["agents"] else None  # the understanding's split is known

        status = wait_until(shown, 60, "the worker finishing the understanding")
        assert status["status"] == "interrupted", status
        assert {a["state"] for a in status["agents"]} == {"interrupted"}
        assert f"wfqueue resume {folder.name}" in status["hint"], status
    finally:
        stop_process_group(worker, grace_s=20)


def kill_the_command_once_its_agents_run(repo: Path, provider: str, env: dict[str, str], tmp_path: Path) -> None:
    """A 2-agent collab-plan on the shared broker, SIGKILLed once both agents are held on a worker (the scripted
    provider's ``hold``, released by tmp_path/release)."""
    from support import wait_until

    command = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo",
                                str(repo), "--max-agents", "2", "-y", "--provider", provider],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_until(lambda: len(list(tmp_path.glob("release.plan_area:*.held"))) == 2, 90, "both agents under way")
    command.kill()
    command.wait()


def test_a_plan_whose_command_died_while_its_agents_run_is_listed_as_planning_and_finishes_on_its_own(
        broker: str, sample_repo: Path, tmp_path: Path) -> None:
    """On a shared broker (or `wfqueue up`) the agents go on without their command, and the callback finishes the
    plan. `status SESSION` said so; the listing, from the files alone, called it interrupted and named a resume,
    which sent every agent again."""
    from support import wait_until

    release = tmp_path / "release"
    provider = write_script(tmp_path / "script.json", hold={"plan_area:*": str(release)})
    env = wfqueue_env(WFQUEUE_BROKER_URL=broker)
    worker = start_worker(broker, "remote", concurrency=2)
    try:
        kill_the_command_once_its_agents_run(sample_repo, provider, env, tmp_path)
        (folder,) = (sample_repo / ".workflow" / ".planning").iterdir()
        listed = run_cli("status", "--repo", str(sample_repo), "--json", env=env, timeout=60)
        assert [(row["session_id"], row["status"]) for row in listed.json()] == [(folder.name, "planning")]
        shown = run_cli("status", folder.name, "--repo", str(sample_repo), "--json", env=env, timeout=60).json()
        assert shown["status"] == "planning" and {a["state"] for a in shown["agents"]} == {"running"}
        release.touch()

        def finished() -> str | None:
            rows = run_cli("status", "--repo", str(sample_repo), "--json", env=env, timeout=60).json()
            return rows[0]["status"] if rows[0]["status"] != "planning" else None

        assert wait_until(finished, 90, "the callback on the worker") in ("completed", "conflicts_detected")
    finally:
        stop_process_group(worker, grace_s=20)


def test_agents_whose_worker_died_are_said_silent_not_running(broker: str, sample_repo: Path, tmp_path: Path) -> None:
    """`wfqueue up` killed outright and started again: `status SESSION` showed the agents "running" on a worker that
    no longer existed, for the hour until their messages came back, and the listing disagreed with it."""
    from support import wait_until

    release = tmp_path / "release"
    provider = write_script(tmp_path / "script.json", hold={"plan_area:*": str(release)})
    env = wfqueue_env(WFQUEUE_BROKER_URL=broker, WFQUEUE_AGENT_HEARTBEAT_S="0.2")
    worker = subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", "worker", "--hostname", "doomed@%h", "--concurrency", "2",
         "--loglevel", "WARNING"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        kill_the_command_once_its_agents_run(sample_repo, provider, env, tmp_path)
    finally:
        stop_process_group(worker, signal.SIGKILL, grace_s=0)  # killed outright, with its agents
        release.touch()
    (folder,) = (sample_repo / ".workflow" / ".planning").iterdir()

    def shown() -> dict | None:
        status = run_cli("status", folder.name, "--repo", str(sample_repo), "--json", env=env, timeout=60).json()
        return status if all(a.get("silent_s") for a in status["agents"]) else None

    status = wait_until(shown, 30, "three missed heartbeats")
    assert all("no heartbeat for" in a["note"] for a in status["agents"]), status["agents"]
    assert status["status"] == "interrupted" and f"wfqueue resume {folder.name}" in status["hint"]
    listed = run_cli("status", "--repo", str(sample_repo), "--json", env=env, timeout=60).json()
    assert [row["status"] for row in listed] == ["interrupted"]  # the two views agree


def test_a_plan_whose_queue_no_worker_consumes_says_so(broker: str, sample_repo: Path, tmp_path: Path) -> None:
    """With no worker, or none on the queue a task went to, the command waited silently until its plan timeout
    (an hour by default)."""
    env = wfqueue_env(WFQUEUE_BROKER_URL=broker, WFQUEUE_IDLE_QUEUE_WARNING_S="0.5", WFQUEUE_PLAN_TIMEOUT_S="6")
    alone = run_cli("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "-y", env=env, timeout=120)
    assert alone.code == 3, alone.stderr
    said = " ".join(alone.stderr.split())
    assert "tasks wait on the queue(s) plan of the broker at" in said and "no worker answered within 1s" in said, said
    assert "`wfqueue worker -Q plan`" in said
    explorer = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "worker", "--queues", "explore",
                                 "--concurrency", "1", "--loglevel", "WARNING"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        from support import wait_until

        app = create_app(load_settings(broker_url=broker))  # the worker answers before the command asks
        try:
            wait_until(lambda: app.control.inspect(timeout=0.5).active_queues(), 60, "the explore worker answering")
        finally:
            release_result_subscriptions(app)
        beside = run_cli("resume", alone_session(sample_repo), "--repo", str(sample_repo), env=env, timeout=120)
        assert beside.code == 3, beside.stderr
        said = " ".join(beside.stderr.split())
        assert "tasks wait on the queue(s) plan" in said and "1 worker(s) answered, none on it" in said, said
    finally:
        stop_process_group(explorer, grace_s=20)


def alone_session(repo: Path) -> str:
    (folder,) = (repo / ".workflow" / ".planning").iterdir()
    return folder.name
