"""Beat's timing decisions (pure), its schedule, and the `wfqueue beat` command line."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from beat.housekeeping import read_manifest
from beat.names import ALL_BEAT_TASKS, BEAT_ARCHIVE, BEAT_LOCKS, BEAT_PURGE, BEAT_WATCHDOG
from beat.schedule import beat_schedule
from beat.timing import (
    DAY_S,
    AgentSnapshot,
    SessionSnapshot,
    is_stale_lock,
    last_progress,
    progress_fingerprint,
    remaining_ttl,
    repo_keep_days,
    should_archive,
    should_forget_repo,
    should_purge_file,
    should_purge_session,
    stalled_for,
    stalled_reason,
    unfinished_areas,
    watchdog_action,
)
from wfqueue.cli.beat_cmd import beat_argv
from wfqueue.errors import ConfigError
from wfqueue.memory_state import MemorySessionState
from wfqueue.settings import load_settings
from wfqueue.state import wait_until
from workers.header import heartbeat

T0 = 1_700_000_000.0
DEADLINE, GRACE = 900.0, 600.0


def snap(*agents: AgentSnapshot, status: str = "planning", observed: float | None = T0,
         reenqueued: float | None = None, finalized: float | None = None) -> SessionSnapshot:
    return SessionSnapshot(session_id="CPLAN-x-2025-01-01", kind="collab", status=status, agents=list(agents),
                           observed_since=observed, reenqueued_at=reenqueued, finalized_at=finalized)


def queued(area: str) -> AgentSnapshot:
    return AgentSnapshot(area=area, state="queued")


def act(snapshot: SessionSnapshot, now: float) -> str:
    return watchdog_action(snapshot, now, DEADLINE, GRACE)


# -- watchdog -------------------------------------------------------------------------------------


def test_lost_header_messages_wait_until_the_deadline_then_reenqueue() -> None:
    session = snap(queued("api"), queued("storage"))  # no agent ever started: only the observation counts
    assert act(session, T0 + DEADLINE - 1) == "wait"
    assert act(session, T0 + DEADLINE) == "reenqueue"


def test_a_recent_start_or_finish_is_progress() -> None:
    running = AgentSnapshot(area="api", state="running", started_at=T0 + 500)
    done = AgentSnapshot(area="storage", state="done", started_at=T0, finished_at=T0 + 700)
    session = snap(running, done)
    assert last_progress(session) == T0 + 700
    assert act(session, T0 + 700 + DEADLINE - 1) == "wait"
    assert act(session, T0 + 700 + DEADLINE) == "reenqueue"


def test_a_running_agents_heartbeat_is_progress_and_a_silent_one_is_not() -> None:
    """An agent waiting long on a model beats; re-enqueuing it ran it twice, and finalising it left a plan
    `partial` whose agent then wrote its files anyway."""
    alive = AgentSnapshot(area="api", state="running", started_at=T0, alive_at=T0 + 2000)
    assert act(snap(alive), T0 + 2000 + DEADLINE - 1) == "wait"
    assert act(snap(alive), T0 + 2000 + DEADLINE) == "reenqueue"  # its worker died: the beats stopped


def test_an_agent_whose_worker_beats_less_often_than_the_deadline_expects_is_given_three_beats() -> None:
    """The watchdog's worker had a 12 s deadline, the agents' workers beat every 30 s (their own settings): all
    four live agents were re-enqueued, then the plan finalised failed while they finished."""
    alive = AgentSnapshot(area="api", state="running", started_at=T0, alive_at=T0, beat_every_s=30.0)
    assert watchdog_action(snap(alive), T0 + 89, 12.0, 12.0) == "wait"
    assert watchdog_action(snap(alive), T0 + 90, 12.0, 12.0) == "reenqueue"  # three beats missed: its worker died
    done = alive.model_copy(update={"state": "done", "finished_at": T0})  # a finished agent beats no more
    assert watchdog_action(snap(done, queued("storage")), T0 + 12, 12.0, 12.0) == "reenqueue"


def test_the_heartbeat_writes_while_the_agent_runs_and_stops_at_its_time_limit() -> None:
    state = MemorySessionState()
    with heartbeat(state, "api", every_s=0.01, for_at_most_s=60):
        assert wait_until(lambda: state.agent("api").get("alive_at"), 5, interval_s=0.005)
        first = state.agent("api")["alive_at"]
        assert wait_until(lambda: state.agent("api").get("alive_at") != first, 5, interval_s=0.005)
    assert not beating("api")  # the block's end stops it
    with heartbeat(state, "limited", every_s=0.01, for_at_most_s=0):
        # past its time limit it stops by itself...
        assert wait_until(lambda: not beating("limited"), 5, interval_s=0.005)
    assert "alive_at" not in state.agent("limited")  # ...having vouched for nothing


def beating(agent: str) -> bool:
    return any(t.name == f"heartbeat-{agent}" for t in threading.enumerate())


def test_after_the_reenqueue_the_grace_runs_from_it_then_finalize() -> None:
    reenqueued = T0 + DEADLINE
    session = snap(queued("api"), reenqueued=reenqueued)
    assert act(session, reenqueued + GRACE - 1) == "wait"
    assert act(session, reenqueued + GRACE) == "finalize"


def test_progress_after_the_reenqueue_restarts_the_grace_but_never_a_second_reenqueue() -> None:
    reenqueued = T0 + DEADLINE
    started = reenqueued + 100
    session = snap(AgentSnapshot(area="api", state="running", started_at=started), reenqueued=reenqueued)
    assert act(session, reenqueued + GRACE + 50) == "wait"
    assert act(session, started + GRACE) == "finalize"
    assert act(session, started + 10 * DEADLINE) == "finalize"  # never "reenqueue" twice


def test_finished_or_already_finalised_sessions_are_done() -> None:
    for status in ("completed", "partial", "conflicts_detected", "cancelled"):
        assert act(snap(queued("api"), status=status), T0 + 10 * DEADLINE) == "done"
    assert act(snap(queued("api"), reenqueued=T0, finalized=T0 + 1), T0 + 10 * DEADLINE) == "done"


def test_sessions_without_agent_records_are_not_watched() -> None:
    # Still understanding, or waiting for the user to confirm the split: never start a plan behind their back.
    assert act(snap(), T0 + 100 * DEADLINE) == "wait"
    assert act(snap(queued("api"), observed=None), T0 + 100 * DEADLINE) == "wait"


def test_all_agents_done_but_no_callback_is_stalled_too() -> None:
    done = AgentSnapshot(area="api", state="done", started_at=T0, finished_at=T0 + 10)
    session = snap(done, observed=T0 + 10)
    assert unfinished_areas(session) == []
    assert act(session, T0 + 10 + DEADLINE) == "reenqueue"  # enqueue_missing then sends the callback alone


def test_stalled_for_and_the_recorded_reason() -> None:
    session = snap(queued("api"), AgentSnapshot(area="db", state="failed", finished_at=T0 - 5))
    assert stalled_for(session, T0 + 42.7) == pytest.approx(42.7)
    assert stalled_for(snap(queued("api"), observed=None), T0) == 0.0
    assert unfinished_areas(session) == ["api"]
    assert stalled_reason(1500.9) == "stalled: no progress for 1500 s (watchdog)"


def test_fingerprint_changes_with_state_or_times_only() -> None:
    a = [queued("api"), AgentSnapshot(area="db", state="running", started_at=T0)]
    assert progress_fingerprint(a) == progress_fingerprint(list(reversed(a)))
    assert progress_fingerprint(a) != progress_fingerprint([queued("api"), queued("db")])
    assert progress_fingerprint(a) != progress_fingerprint(
        [queued("api"), AgentSnapshot(area="db", state="running", started_at=T0 + 1)])


# -- locks, archive, purge ------------------------------------------------------------------------


def test_stale_lock_by_age() -> None:
    assert not is_stale_lock(T0, T0 + 3599, 3600)
    assert is_stale_lock(T0, T0 + 3600, 3600)
    assert not is_stale_lock(T0 + 100, T0, 3600)  # a clock ahead of ours is not old


def test_archive_only_completed_sessions_past_the_age() -> None:
    assert should_archive("completed", T0, T0 + 30 * DAY_S, 30)
    assert not should_archive("completed", T0, T0 + 30 * DAY_S - 1, 30)
    for status in ("planning", "active", "paused", "archived", None):
        assert not should_archive(status, T0, T0 + 365 * DAY_S, 30)
    assert not should_archive("completed", None, T0, 30)


def test_purge_session_keys_only_when_finished_and_idle_past_the_ttl() -> None:
    ttl = 7 * DAY_S
    assert should_purge_session("partial", T0, T0 + ttl, ttl)
    assert not should_purge_session("partial", T0, T0 + ttl - 1, ttl)
    assert not should_purge_session("planning", T0, T0 + 10 * ttl, ttl)  # the watchdog's business
    assert not should_purge_session("completed", None, T0 + 10 * ttl, ttl)  # no time known: expire instead


def test_remaining_ttl_of_a_key_without_expiry() -> None:
    assert remaining_ttl(T0, T0 + 100, 1000) == 900
    assert remaining_ttl(None, T0, 1000) == 1000
    assert remaining_ttl(T0, T0 + 5000, 1000) == 1
    assert remaining_ttl(T0 + 50, T0, 1000) == 1000  # activity in the future: a full TTL, not more


def test_purge_embedded_logs_by_age() -> None:
    assert should_purge_file(T0, T0 + 14 * DAY_S, 14)
    assert not should_purge_file(T0, T0 + 14 * DAY_S - 1, 14)


def test_repositories_are_remembered_past_the_longest_file_rule() -> None:
    keep = repo_keep_days(30, 14)
    assert keep == 31
    assert not should_forget_repo(T0, T0 + 30 * DAY_S, keep)  # its sessions can still be archived
    assert should_forget_repo(T0, T0 + keep * DAY_S, keep)


def test_manifest_accepts_an_object_or_a_bare_list() -> None:
    assert read_manifest(None) == {"archives": []}
    assert read_manifest('[{"session_id": "WFS-a"}]') == {"archives": [{"session_id": "WFS-a"}]}
    assert read_manifest('{"archives": [], "note": 1}') == {"archives": [], "note": 1}
    with pytest.raises(ValueError):
        read_manifest('{"archives": 3}')


# -- schedule and command line -------------------------------------------------------------------


def test_schedule_runs_every_task_on_control_and_the_watchdog_at_its_interval() -> None:
    schedule = beat_schedule(load_settings(watchdog_interval_s=17))
    assert set(schedule) == set(ALL_BEAT_TASKS)
    assert schedule[BEAT_WATCHDOG]["schedule"] == 17
    for name in (BEAT_PURGE, BEAT_LOCKS, BEAT_ARCHIVE):
        assert schedule[name]["schedule"] == 3600
    for name, entry in schedule.items():
        assert entry["task"] == name
        assert entry["options"]["queue"] == "control"
        assert entry["options"]["expires"] == entry["schedule"]  # an unconsumed run is dropped, not piled up


def test_beat_command_needs_a_broker_and_runs_celery_beat_on_beat_app() -> None:
    with pytest.raises(ConfigError, match="WFQUEUE_BROKER_URL"):
        beat_argv(load_settings(), "INFO")
    argv = beat_argv(load_settings(broker_url="redis://localhost:6379/0"), "DEBUG")
    assert argv == [sys.executable, "-P", "-m", "wfqueue.celery_command", "beat.app", "beat", "--loglevel", "DEBUG"]


def test_schedule_file_is_never_in_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://localhost:6379/0")  # importing beat.app builds its app
    from beat.app import schedule_file

    settings = load_settings(broker_url="redis://localhost:6379/0")
    default = schedule_file(settings)
    assert Path.cwd() not in default.parents and default.parent.is_dir()
    assert schedule_file(load_settings(broker_url="redis://other:6379/0")) != default  # one file per broker
    chosen = tmp_path / "sub" / "beat-schedule"
    assert schedule_file(load_settings(broker_url="redis://localhost:6379/0", beat_schedule_file=str(chosen))) == chosen
    assert chosen.parent.is_dir()


def test_schedule_files_no_beat_wrote_for_a_week_are_forgotten(tmp_path: Path) -> None:
    """Every `wfqueue up` on a TCP port has a broker URL of its own (a new password), so each left a schedule
    file in the default folder: 72 of them on one machine, never removed."""
    import os

    from wfqueue.beat_schedule_file import UNUSED_AFTER_S, forget_unused

    now = 1_800_000_000.0
    old, recent, other = (tmp_path / "celerybeat-schedule-0123456789ab", tmp_path / "celerybeat-schedule-ba9876543210",
                          tmp_path / "notes.txt")
    for path in (old, recent, other):
        path.write_text("x")
        os.utime(path, (now - UNUSED_AFTER_S - 1, now - UNUSED_AFTER_S - 1))
    os.utime(recent, (now - 300, now - 300))  # a running beat's: written minutes ago
    assert forget_unused(tmp_path, now) == [old]
    assert not old.exists() and recent.exists() and other.exists()
