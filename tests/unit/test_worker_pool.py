"""Which Celery pool workers run (Settings.effective_worker_pool) and how many slots a standalone worker
gets (Settings.worker_slots); the worker entry point's option check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wfqueue.cli.main import main
from wfqueue.settings import THREAD_SLOTS_DEFAULT, Settings
from workers.serve import parse_args


def settings(**values: object) -> Settings:
    return Settings.model_validate(values)


def test_agents_waiting_on_a_remote_model_get_threads_and_the_offline_planner_processes() -> None:
    assert settings().effective_worker_pool() == "prefork"  # no key: the offline planner works on the CPU
    assert settings(anthropic_api_key="k").effective_worker_pool() == "threads"
    assert settings(provider="anthropic").effective_worker_pool() == "threads"
    assert settings(provider="offline", anthropic_api_key="k").effective_worker_pool() == "prefork"
    assert settings(anthropic_api_key="k", worker_pool="prefork").effective_worker_pool() == "prefork"
    assert settings(worker_pool="threads").effective_worker_pool() == "threads"


def test_a_standalone_worker_gets_a_process_per_cpu_or_a_thread_per_possible_agent() -> None:
    assert settings().worker_slots() == (os.cpu_count() or 2)
    assert settings(anthropic_api_key="k").worker_slots() == THREAD_SLOTS_DEFAULT
    assert settings(anthropic_api_key="k", worker_concurrency=7).worker_slots() == 7
    assert settings(worker_concurrency=7).worker_slots(3) == 3  # the command line wins


def test_an_unknown_worker_pool_setting_is_refused() -> None:
    with pytest.raises(ValueError, match="worker_pool"):
        settings(worker_pool="gevent")


def test_the_worker_entry_point_names_a_bad_pool_before_importing_anything(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["--queues", "plan", "--concurrency", "2", "--pool", "no-such-pool"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--pool" in err and "no-such-pool" in err and "threads" in err
    args = parse_args(["-Q", "plan,explore", "-c", "100", "-P", "threads", "-n", "planner-1@%h"])
    assert (args.queues, args.concurrency, args.pool, args.hostname) == ("plan,explore", 100, "threads", "planner-1@%h")


def test_wfqueue_worker_refuses_an_unknown_pool_with_the_ones_it_knows(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"started a worker: {args}"))
    assert main(["worker", "--pool", "gevent"]) == 2
    err = capsys.readouterr().err
    assert "unknown pool 'gevent'" in err and "prefork, threads, solo" in err


@pytest.mark.parametrize("command", ["worker", "beat"])
def test_an_unknown_log_level_is_refused_naming_the_ones_there_are(command: str, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`wfqueue worker -l bogus` was a KeyError traceback from Celery inside the node (exit 1); `beat -l bogus`
    printed Celery's usage text for `python -m wfqueue.celery beat`, a command the user never typed."""
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"started {command}: {args}"))
    assert main([command, "-l", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "unknown log level 'bogus'" in err and "DEBUG, INFO, WARNING, ERROR, CRITICAL" in err


def test_a_worker_whose_cache_folder_is_a_file_is_refused_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It started "ready" and failed every task that needed a repository through Redis."""
    (tmp_path / "cache").write_text("not a folder\n")
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("WFQUEUE_WORKER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"started a worker: {args}"))
    assert main(["worker"]) == 3
    assert f"cannot write {tmp_path / 'cache'}: {tmp_path / 'cache'} is a file" in " ".join(
        capsys.readouterr().err.split())


def test_a_misspelt_setting_is_warned_about_once_across_the_exec_into_the_worker(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`wfqueue worker` warns, then execs the worker, which loaded the settings again and warned again."""
    from wfqueue import settings_checks
    from wfqueue.settings import Settings

    monkeypatch.setattr(settings_checks, "_warned_env", set())
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("WFQUEUE_WOKER_POOL", "threads")
    monkeypatch.setenv(settings_checks.WARNED_ENV, "")  # restored after the test: the worker CLI sets it

    class Execd(Exception):
        pass

    def execv(*_: object) -> None:
        raise Execd

    monkeypatch.setattr(os, "execv", execv)
    with pytest.raises(Execd):
        main(["worker"])
    assert capsys.readouterr().err.count("WFQUEUE_WOKER_POOL is not a wfqueue setting") == 1
    monkeypatch.setattr(settings_checks, "_warned_env", set())  # the program the exec started: a new image
    assert settings_checks.warn_unknown_env(os.environ, Settings.model_fields) == []


@pytest.mark.parametrize(("visibility", "warned"), [("300", True), ("360", True), ("361", False)])
def test_a_worker_whose_messages_would_be_redelivered_while_an_agent_still_plans_is_warned(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], visibility: str, warned: bool) -> None:
    """A visibility timeout not above the agent time limit hands a slow agent's message to a second worker while
    the first still plans it: both pay for its model turns. It was accepted without a word."""
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("WFQUEUE_VISIBILITY_TIMEOUT_S", visibility)
    monkeypatch.setenv("WFQUEUE_AGENT_TIME_LIMIT_S", "360")
    started: list[object] = []
    monkeypatch.setattr(os, "execv", lambda *args: started.append(args))
    main(["worker"])
    err = " ".join(capsys.readouterr().err.split())
    assert started, "the worker still starts: the setting is a warning, not a refusal"
    assert (f"WFQUEUE_VISIBILITY_TIMEOUT_S ({visibility} s) is not above WFQUEUE_AGENT_TIME_LIMIT_S (360 s)"
            in err) is warned, err


def test_a_prefork_pool_the_open_file_limit_cannot_hold_is_refused_before_it_starts(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`wfqueue worker --pool prefork --concurrency 10000` started, then died of "Too many open files" 25 s later
    (the pool's parent holds 6 descriptors per child). Within the hard limit the soft one is raised instead."""
    import resource

    raised: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    monkeypatch.setattr(resource, "setrlimit", lambda _, limits: raised.append(limits))
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")
    started: list[object] = []
    monkeypatch.setattr(os, "execv", lambda *args: started.append(args))
    assert main(["worker", "--pool", "prefork", "--concurrency", "1000"]) == 2
    assert "needs about 6064 open files, above this machine's limit (4096" in " ".join(capsys.readouterr().err.split())
    assert not started and not raised
    main(["worker", "--pool", "prefork", "--concurrency", "500"])
    assert started and raised == [(3064, 4096)]
    started.clear()
    main(["worker", "--pool", "threads", "--concurrency", "1000"])  # threads open no pipes
    assert started and raised == [(3064, 4096)]
