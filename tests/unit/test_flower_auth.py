"""Flower's credentials, checked before `wfqueue flower` or `wfqueue up` starts anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wfqueue.cli.flower_cmd import flower_auth
from wfqueue.cli.main import main
from wfqueue.errors import ConfigError
from wfqueue.settings import load_settings


@pytest.mark.parametrize(("credentials", "why"), [
    ("admin", r"it is not user:password with both set \(a user, no password\)"),
    ("admin:", r"it is not user:password with both set \(a user, no password\)"),
    (":secret", r"it is not user:password with both set \(no user, a password\)"),
    # Flower splits on commas: "admin:pa" would be accepted and the chosen password refused.
    ("admin:pa,ss", r"its pair 2 of 2 is not user:password with both set \(a user, no password\)"),
])
def test_credentials_flower_would_misread_are_refused(credentials: str, why: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", credentials)
    with pytest.raises(ConfigError, match=why) as refused:
        flower_auth(load_settings())
    assert "admin" not in str(refused.value) and "secret" not in str(refused.value), "a secret was repeated"


@pytest.mark.parametrize("credentials", ["admin:pa:ss", "alice:one,bob:two"])
def test_good_credentials_go_to_flower_as_they_are(credentials: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", credentials)  # several users: comma-separated pairs
    assert flower_auth(load_settings()) == {"FLOWER_BASIC_AUTH": credentials}


def test_up_without_usable_credentials_starts_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("print('hi')\n")
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:")
    assert main(["up", "--repo", str(repo)]) == 2
    assert "WFQUEUE_FLOWER_BASIC_AUTH: it is not user:password" in capsys.readouterr().err
    assert not (repo / ".workflow").exists(), "a Redis was started for a refused up"


def no_exec(*_: object) -> None:
    raise AssertionError("the command went on to replace this process with Flower or a worker")


@pytest.mark.parametrize(("args", "says"), [
    (["up", "--flower-port", "70000"], "Invalid value for '--flower-port'"),
    (["up", "--flower-port", "0"], "Invalid value for '--flower-port'"),  # it meant the default port
    (["flower", "--port", "70000"], "Invalid value for '--port'"),  # Flower listened on 70000 - 65536
    (["flower", "--port", "0"], "Invalid value for '--port'"),
    (["up", "--workers", "100000"], "Invalid value for '--workers'"),
    (["worker", "--concurrency", "100000"], "Invalid value for '--concurrency'"),  # as many processes forked
])
def test_ports_and_slot_counts_out_of_range_are_refused(args: list[str], says: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:secret")
    monkeypatch.setattr(os, "execv", no_exec)
    monkeypatch.setattr(os, "execve", no_exec)
    if args[0] != "up":
        monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    repo = tmp_path / "repo"
    repo.mkdir()
    assert main([*args, *(["--repo", str(repo)] if args[0] == "up" else [])]) == 2
    assert says in capsys.readouterr().err
    assert not (repo / ".workflow").exists()


@pytest.mark.parametrize(("address", "says"), [
    ("no-such-host.invalid", "Flower's address 'no-such-host.invalid' (WFQUEUE_FLOWER_ADDRESS) cannot be resolved"),
    ("192.0.2.1", "Flower cannot listen on 192.0.2.1:"),  # an address of another machine (TEST-NET-1)
])
def test_an_address_flower_cannot_listen_on_is_refused_before_anything_starts(
        address: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Found by Flower itself, it was an exit seconds after up had started Redis and its workers, with a hint
    that blamed the port."""
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:secret")
    monkeypatch.setenv("WFQUEUE_FLOWER_ADDRESS", address)
    repo = tmp_path / "repo"
    repo.mkdir()
    assert main(["up", "--repo", str(repo)]) == 2
    assert says in capsys.readouterr().err
    assert not (repo / ".workflow").exists(), "a Redis was started for a refused up"
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(os, "execve", no_exec)
    assert main(["flower"]) == 2
    assert says in capsys.readouterr().err


def test_flower_on_the_embedded_redis_port_is_refused_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Both free when checked, Redis took the port first, and Flower's health check read Redis's answer: an
    http.client traceback (exit 1) after Redis, the workers and beat had started."""
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:secret")
    monkeypatch.setenv("WFQUEUE_EMBEDDED_REDIS_PORT", "15591")
    repo = tmp_path / "repo"
    repo.mkdir()
    assert main(["up", "--repo", str(repo), "--flower-port", "15591"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "Flower's port 15591 is also the embedded Redis's (WFQUEUE_EMBEDDED_REDIS_PORT)" in err, err
    assert not (repo / ".workflow").exists(), "a Redis was started for a refused up"


def test_an_address_given_with_the_option_is_named_as_given(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`wfqueue flower --address nosuch.invalid` was told to fix WFQUEUE_FLOWER_ADDRESS, which was not set."""
    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:secret")
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(os, "execve", no_exec)
    assert main(["flower", "--address", "no-such-host.invalid"]) == 2
    err = capsys.readouterr().err
    assert "Flower's address 'no-such-host.invalid' (--address) cannot be resolved" in err
    assert "WFQUEUE_FLOWER_ADDRESS" not in err


def test_an_up_that_loses_the_race_for_the_repositorys_redis_is_not_told_to_run_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Two `wfqueue up` started at one moment: the second was told to "run `wfqueue up` in this repository"."""
    from wfqueue.redis_owner import RedisOwnership
    from wfqueue.sessions import queue_dir

    monkeypatch.setenv("WFQUEUE_FLOWER_BASIC_AUTH", "admin:secret")
    monkeypatch.setenv("WFQUEUE_FLOWER_PORT", "15593")
    repo = tmp_path / "repo"
    repo.mkdir()
    other = RedisOwnership(queue_dir(repo) / "redis")  # the other command's hold on the repository's Redis
    other.acquire()
    try:
        assert main(["up", "--repo", str(repo)]) == 3
    finally:
        other.release()
    err = " ".join(capsys.readouterr().err.split())
    assert "another wfqueue command runs the embedded Redis" in err and "another `wfqueue up`" in err, err
    assert "run `wfqueue up` in this repository" not in err
