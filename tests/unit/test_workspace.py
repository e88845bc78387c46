"""Where a task's repository and session folder are: the coordinator's paths with a shared disk, the worker's own
copies without one; and the `wfqueue up` announcement plan commands find."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import SecretStr

from wfqueue.embedded import EmbeddedRedis
from wfqueue.errors import BadInputError, InfrastructureError
from wfqueue.fsio import atomic_write_text
from wfqueue.payloads import CollabPlanArea, LiteAssess
from wfqueue.settings import Settings
from wfqueue.state import SessionState, redis_client
from wfqueue.transport.models import Transport
from wfqueue.transport.session_files import SessionFiles, mirrored
from wfqueue.transport.workspace import (
    COPY_MARKER,
    CoordinatorFiles,
    prune_session_copies,
    rebuild_from_redis,
    shares_disk,
    task_workspace,
)
from wfqueue.up_cluster import UpCluster, announced, running_up


def test_shared_disk_is_assumed_only_in_embedded_mode() -> None:
    assert shares_disk(Settings())
    assert not shares_disk(Settings(broker_url=SecretStr("redis://localhost:6379/0")))
    assert shares_disk(Settings(broker_url=SecretStr("redis://localhost:6379/0"), shared_disk=True))
    assert not shares_disk(Settings(shared_disk=False))


def test_a_payload_without_transport_is_used_as_it_is() -> None:
    payload = CollabPlanArea(session_id="S-1", session_dir="/r/.workflow/.planning/S-1", repo="/r", focus_area="api",
                             provider="offline")

    def no_redis() -> None:
        raise AssertionError("a shared disk needs no Redis")

    with task_workspace(payload, Settings(), no_redis) as local:  # type: ignore[arg-type]
        assert local is payload


def test_a_path_outside_the_session_folder_is_refused(tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        transport = Transport(commit="0" * 40, session_id="S-1", session_root="/r/.workflow/.planning/S-1")
        payload = LiteAssess(session_id="S-1", session_dir="/elsewhere", repo="/r", requirement="x",
                             force_explore=False, provider="offline", transport=transport)
        settings = Settings(worker_cache_dir=tmp_path / "cache")
        with pytest.raises(InfrastructureError, match="outside its session folder"), \
                task_workspace(payload, settings, lambda: redis_client(redis.url, 5)):
            pass
    finally:
        redis.stop()


def test_a_folder_that_is_not_a_git_repository_cannot_travel(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    settings = Settings(broker_url=SecretStr("redis://localhost:1/0"))
    files = CoordinatorFiles(settings, None, "S-1", tmp_path / "repo" / "S-1")  # type: ignore[arg-type]
    with pytest.raises(BadInputError) as caught:
        files.start(tmp_path / "repo", None)
    assert "WFQUEUE_SHARED_DISK=true" in caught.value.hint


def test_session_copies_unused_past_their_state_lifetime_are_pruned(tmp_path: Path) -> None:
    """Only the copies a worker made: a cache dir set to $HOME by mistake must not lose ~/sessions/*."""
    old, fresh, users = tmp_path / "S-old", tmp_path / "S-fresh", tmp_path / "my-notes-2026-01-01"
    for folder in (old, fresh, users):
        (folder / "agents").mkdir(parents=True)
        (folder / "agents" / "plan.json").write_text("{}", encoding="utf-8")
        if folder is not users:
            (folder / COPY_MARKER).touch()
        os.utime(folder, (time.time() - 3600, time.time() - 3600))
    os.utime(fresh)
    assert prune_session_copies(tmp_path, time.time() - 60) == ["S-old"]
    assert not old.exists() and (fresh / "agents" / "plan.json").is_file()
    assert (users / "agents" / "plan.json").is_file()


def test_plan_commands_find_a_running_up_and_ignore_a_dead_one(tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        with announced(tmp_path, UpCluster(pid=os.getpid(), broker_url=redis.url, workers=2)):
            found = running_up(tmp_path)
            assert found is not None and found.broker_url == redis.url
        assert running_up(tmp_path) is None  # gone with the block
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        with announced(tmp_path, UpCluster(pid=int(dead.stdout), broker_url=redis.url, workers=2)):
            assert running_up(tmp_path) is None  # its process is gone: a stale file
    finally:
        redis.stop()
    with announced(tmp_path, UpCluster(pid=os.getpid(), broker_url=redis.url, workers=2)):
        assert running_up(tmp_path) is None  # its Redis does not answer


def test_a_worker_cache_that_cannot_be_written_is_an_infrastructure_error_naming_it(tmp_path: Path) -> None:
    """A read-only or full cache ended the step with a bare OSError (exit 1, hint: the worker log). Here a file
    stands where the cache's folder must be (a read-only folder would not stop a root test run)."""
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    (tmp_path / "not-a-folder").write_text("", encoding="utf-8")
    cache = tmp_path / "not-a-folder" / "cache"
    try:
        transport = Transport(commit="0" * 40, session_id="S-1", session_root="/r/.workflow/.planning/S-1")
        payload = LiteAssess(session_id="S-1", session_dir="/r/.workflow/.planning/S-1", repo="/r", requirement="x",
                             force_explore=False, provider="offline", transport=transport)
        with pytest.raises(InfrastructureError) as refused, \
                task_workspace(payload, Settings(worker_cache_dir=cache), lambda: redis_client(redis.url, 5)):
            pass
        assert str(cache) in refused.value.message and "WFQUEUE_WORKER_CACHE_DIR" in refused.value.hint
        assert refused.value.exit_code == 3
    finally:
        redis.stop()


def test_status_brings_the_files_workers_rewrote_since_the_coordinator_last_synced(tmp_path: Path) -> None:
    """Without a shared disk, a collaborative plan's command was SIGKILLed while its agents ran (after it had
    synced the files of the understanding step); the workers' callback finished the plan and rewrote
    plan-note.md in Redis. `status` brought in only the files the folder never held: the note still said
    "planning" and the plan read "interrupted: resume". What a worker writes is taken again; what a person
    edited here since the last sync is left alone until a worker writes that file again."""
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        settings = Settings(broker_url=SecretStr(redis.url), shared_disk=False)
        client = redis_client(redis.url, 5)
        folder = tmp_path / "CPLAN-x"
        folder.mkdir()
        state = SessionState(client, "CPLAN-x", settings.state_ttl_s)
        transport = Transport(commit="0" * 40, session_id="CPLAN-x", session_root=str(folder))
        state.set_meta(transport=transport.model_dump(mode="json"), status="planning")
        coordinator = CoordinatorFiles(settings, client, "CPLAN-x", folder)
        coordinator.transport = transport
        with mirrored(folder, SessionFiles(client, "CPLAN-x", settings.state_ttl_s)):
            atomic_write_text(folder / "plan-note.md", "status: planning\n")  # the coordinator's own write
        worker_side = SessionFiles(client, "CPLAN-x", settings.state_ttl_s)
        worker_side.put("requirement-analysis.json", b"{}")
        assert coordinator.pull() == 1  # after the understanding step: everything synced

        worker_side.put("plan-note.md", b"status: completed\n")  # the callback; the coordinator was killed
        worker_side.put("plan.md", b"# Plan\n")
        assert rebuild_from_redis(settings, "CPLAN-x", folder) == 2
        assert (folder / "plan-note.md").read_text() == "status: completed\n" and (folder / "plan.md").is_file()
        (folder / "plan-note.md").write_text("status: completed\nmy notes\n")
        assert rebuild_from_redis(settings, "CPLAN-x", folder) == 0
        assert (folder / "plan-note.md").read_text() == "status: completed\nmy notes\n"
        worker_side.locked_update("plan-note.md", lambda _: "status: partial\n", timeout_s=5)
        assert rebuild_from_redis(settings, "CPLAN-x", folder) == 1
        assert (folder / "plan-note.md").read_text() == "status: partial\n"
    finally:
        redis.stop()
