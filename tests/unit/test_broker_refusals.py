"""A Redis that answers and refuses writes: an ACL user without write commands, a read-only replica, a Redis
over its maxmemory. Plan commands crashed with a redis-py traceback (exit 1) after making a session folder whose
resume could not work, workers with Celery's "Unrecoverable error", and a plan that filled Redis was told to wait
"when Redis is back"."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from kombu.exceptions import OperationalError
from pydantic import SecretStr

from beat.snapshot import iter_metas
from wfqueue.cli.main import main
from wfqueue.errors import BrokerCredentialsError, DamagedStateError, InfrastructureError
from wfqueue.runtime import resumable
from wfqueue.settings import Settings
from wfqueue.state import SessionState, connect, redis_client


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:
    """The module's Redis as its owner; what a test changes of its configuration is undone after it."""
    client = redis_client(redis_url, 2.0)
    yield client
    client.config_set("maxmemory", 0)
    client.execute_command("REPLICAOF", "NO", "ONE")
    client.execute_command("ACL", "DELUSER", "reader")
    client.close()


def as_user(url: str, user: str, password: str) -> str:
    return f"redis+socket://{user}:{password}@{urlsplit(url).path}"


def test_a_user_allowed_to_read_only_is_refused_for_writing_and_may_still_read(
        redis_url: str, admin: redis.Redis) -> None:
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">readpw", "~*", "&*", "+@read", "+@connection")
    settings = Settings(broker_url=SecretStr(as_user(redis_url, "reader", "readpw")))
    with pytest.raises(BrokerCredentialsError) as refused:
        connect(settings, writing=True)
    assert "does not let this user run what wfqueue needs" in refused.value.message
    assert "ACL SETUSER" in refused.value.hint and "readpw" not in refused.value.message
    connect(settings).close()  # `wfqueue status` only reads


def test_a_read_only_replica_and_a_full_redis_are_named_with_what_to_do(redis_url: str, admin: redis.Redis) -> None:
    settings = Settings(broker_url=SecretStr(redis_url))
    admin.execute_command("REPLICAOF", "127.0.0.1", "1")  # a primary that never answers: it stays read-only
    with pytest.raises(BrokerCredentialsError, match="is a read-only replica") as replica:
        connect(settings, writing=True)
    assert "its primary" in replica.value.hint
    admin.execute_command("REPLICAOF", "NO", "ONE")
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    with pytest.raises(InfrastructureError, match="is full: it refuses writes above its maxmemory") as full:
        connect(settings, writing=True)
    assert not isinstance(full.value, BrokerCredentialsError) and "raise its maxmemory" in full.value.hint


def test_a_plan_that_fills_redis_is_told_so_not_to_wait_for_redis_to_come_back(tmp_path: Path) -> None:
    settings = Settings(broker_url=SecretStr("redis://127.0.0.1:6379/0"))
    kombu_said = OperationalError("OOM command not allowed when used memory > 'maxmemory'.")
    with pytest.raises(InfrastructureError) as caught, resumable(settings, "CPLAN-x", tmp_path):
        raise kombu_said
    assert "is full" in caught.value.message and "when Redis is back" not in caught.value.hint
    assert "wfqueue resume CPLAN-x" in caught.value.hint
    with pytest.raises(InfrastructureError, match="is full"), resumable(settings, "CPLAN-x", tmp_path):
        raise redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")


def test_a_plan_and_a_worker_on_a_redis_that_refuses_writes_stop_before_anything_is_made(
        redis_url: str, admin: redis.Redis, sample_repo: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">readpw", "~*", "&*", "+@read", "+@connection")
    monkeypatch.setenv("WFQUEUE_BROKER_URL", as_user(redis_url, "reader", "readpw"))
    assert main(["lite-plan", "Add a health endpoint", "--repo", str(sample_repo), "-y"]) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "does not let this user run what wfqueue needs" in err and "Traceback" not in err, err
    assert not any((sample_repo / ".workflow").glob(".lite-plan/*")), "a session folder was made"
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"started a worker: {args}"))
    monkeypatch.setenv("WFQUEUE_WORKER_CACHE_DIR", str(sample_repo.parent / "cache"))
    assert main(["worker"]) == 3
    assert "does not let this user" in " ".join(capsys.readouterr().err.split())


def test_a_session_meta_damaged_in_redis_is_an_error_naming_the_key_to_delete(
        redis_url: str, admin: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A meta field edited by hand (`HSET wfq:S:meta status '{oops'`): `status S` and `resume S` ended in a
    JSONDecodeError traceback, also for an id with no folder here, which is "no session" otherwise."""
    state = SessionState(admin, "CPLAN-other-2026-01-01", 3600)
    state.set_meta(kind="collab", session_dir=str(tmp_path / "elsewhere"))
    admin.hset("wfq:CPLAN-other-2026-01-01:meta", "status", "{oops")
    with pytest.raises(DamagedStateError) as damaged:
        state.session_meta()
    assert "wfq:CPLAN-other-2026-01-01:meta" in damaged.value.message
    assert "DEL wfq:CPLAN-other-2026-01-01:meta" in damaged.value.hint
    # Beat's maintenance passes skip it (and go on with the others), as they did; a value that is not UTF-8 too.
    assert "CPLAN-other-2026-01-01" not in [each.session_id for each, _ in iter_metas(admin, 3600)]
    admin.hset("wfq:CPLAN-other-2026-01-01:meta", "status", b'"\xff\xfe"')
    with pytest.raises(DamagedStateError):
        state.session_meta()
    assert "CPLAN-other-2026-01-01" not in [each.session_id for each, _ in iter_metas(admin, 3600)]
    admin.hset("wfq:CPLAN-other-2026-01-01:meta", "status", '"planning"')
    admin.hset(b"wfq:CPLAN-\xff-2026-01-01:meta", "status", '"planning"')  # a key name that is not UTF-8
    assert "CPLAN-other-2026-01-01" in [each.session_id for each, _ in iter_metas(admin, 3600)]
    admin.delete(b"wfq:CPLAN-\xff-2026-01-01:meta")
    admin.hset("wfq:CPLAN-other-2026-01-01:meta", "status", '"planning"')
    admin.hset("wfq:CPLAN-other-2026-01-01:meta", "transport", '{"commit": 7}')
    with pytest.raises(DamagedStateError, match="of the wrong kind"):
        state.session_meta()
    monkeypatch.setenv("WFQUEUE_BROKER_URL", redis_url)
    repo = tmp_path / "repo"
    repo.mkdir()
    assert main(["status", "CPLAN-other-2026-01-01", "--repo", str(repo)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_worker_does_not_start_on_a_full_redis(
        redis_url: str, admin: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With the noeviction policy a consumer takes a message off its queue and then cannot record it as
    unacknowledged: the message is lost, one per try. The worker stops at once, saying why (exit 3)."""
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"started a worker: {args}"))
    monkeypatch.setenv("WFQUEUE_BROKER_URL", redis_url)
    monkeypatch.setenv("WFQUEUE_WORKER_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["worker"]) == 3
    assert "is full: it refuses writes above its maxmemory" in " ".join(capsys.readouterr().err.split())
