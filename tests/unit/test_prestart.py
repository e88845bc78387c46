"""The standby worker (wfqueue.prestart): which command lines start one, the orders it is given, and that it
loads everything the worker app needs before its settings arrive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from tests.conftest import PROJECT
from wfqueue import prestart
from wfqueue.cli.main import app
from wfqueue.prestart import COMMANDS, UP_ANNOUNCEMENT, StandbyOrders, up_announced, wanted
from wfqueue.sessions import project_of, queue_dir
from wfqueue.settings import Settings
from wfqueue.up_cluster import UP_FILE


def test_only_commands_that_may_start_an_embedded_cluster_get_a_standby() -> None:
    assert wanted(["collab-plan", "add login", "--repo", "."], {})
    assert wanted(["execute", "WFS-x"], {})
    assert not wanted(["status"], {})
    assert not wanted(["up", "--repo", "."], {})  # starts its own workers
    assert not wanted([], {})
    assert not wanted(["collab-plan", "--help"], {})
    assert not wanted(["collab-plan", "x"], {"WFQUEUE_BROKER_URL": "redis://h:6379/0"})  # no embedded cluster
    assert not wanted(["collab-plan", "x"], {"WFQUEUE_PRESTART_WORKER": "false"})
    assert not wanted(["collab-plan", "x"], {"WFQUEUE_PRESTART_WORKER": "0"})
    assert wanted(["collab-plan", "x"], {"WFQUEUE_PRESTART_WORKER": "true", "WFQUEUE_BROKER_URL": ""})


def test_the_early_guess_reads_the_settings_file_as_the_settings_do(tmp_path: Path) -> None:
    config = tmp_path / "wfqueue.toml"
    environ = {"WFQUEUE_CONFIG_FILE": str(config)}
    config.write_text('broker_url = "redis://redis-host:6379/0"\n', encoding="utf-8")
    assert not wanted(["collab-plan", "x"], environ)
    config.write_text("prestart_worker = false\n", encoding="utf-8")
    assert not wanted(["collab-plan", "x"], environ)
    assert wanted(["collab-plan", "x"], {**environ, "WFQUEUE_PRESTART_WORKER": "true"})  # the environment first
    config.write_text("prestart_worker = [unclosed\n", encoding="utf-8")
    assert wanted(["collab-plan", "x"], environ)  # a broken file is the settings' to report


@pytest.mark.parametrize(("environment", "toml"), [
    ({}, ""),
    ({"WFQUEUE_BROKER_URL": ""}, ""),  # an env file's empty line: unset
    ({"WFQUEUE_BROKER_URL": "  "}, ""),
    ({"wfqueue_broker_url": "redis://h:6379/0"}, ""),  # names are read without regard to case
    ({"WFQUEUE_PRESTART_WORKER": "off"}, ""),
    ({"wfqueue_prestart_worker": "No"}, ""),
    ({}, 'broker_url = "redis://h:6379/0"\n'),
    ({}, 'broker_url = ""\n'),
    ({}, "prestart_worker = false\n"),
    ({"WFQUEUE_PRESTART_WORKER": "1"}, "prestart_worker = false\n"),  # the environment first
])
def test_the_early_guess_agrees_with_the_built_settings(environment: dict[str, str], toml: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "wfqueue.toml"
    config.write_text(toml, encoding="utf-8")
    environ = {"WFQUEUE_CONFIG_FILE": str(config), **environment}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    guess = wanted(["collab-plan", "x", "--repo", str(tmp_path)], environ)
    assert guess == (settings.embedded and settings.prestart_worker)


def test_a_command_run_from_a_deleted_folder_gets_no_standby_and_no_error(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the command would look for `wfqueue up`, the current folder, is gone: the guess is "no", and the
    command goes on to say what is wrong itself."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    prestart.begin(["collab-plan", "x"], {})
    assert prestart.take() is None


def test_a_standby_nobody_took_is_killed_at_once(tmp_path: Path) -> None:
    """Not left to notice its closed stdin (it may still be loading for a second): killed, by its pid."""
    config = tmp_path / "wfqueue.toml"
    config.write_text("", encoding="utf-8")
    prestart.begin(["collab-plan", "x", "--repo", str(tmp_path)], {"WFQUEUE_CONFIG_FILE": str(config)})
    standby = prestart._standby.proc
    assert standby is not None and standby.poll() is None
    prestart.discard()
    assert standby.returncode == -signal.SIGKILL
    assert prestart.take() is None


def test_prestart_worker_is_a_setting_like_the_others() -> None:
    """Read early by the entry point, and known to the settings (validated, shown by `wfqueue config`)."""
    assert Settings.model_validate({}).prestart_worker is True
    assert Settings.model_validate({"prestart_worker": "false"}).prestart_worker is False


def test_a_repository_served_by_wfqueue_up_gets_no_standby(tmp_path: Path) -> None:
    """Its plans go to up's warm workers: a standby would only take a core from them."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    announcement = repo / UP_ANNOUNCEMENT
    announcement.parent.mkdir(parents=True)
    announcement.write_text(json.dumps({"pid": os.getpid(), "broker_url": "redis://x", "workers": 4}))
    assert not wanted(["collab-plan", "x", "--repo", str(repo)], {})
    assert up_announced(["lite-plan", "x", f"--repo={repo}"], tmp_path)
    assert up_announced(["resume", "CPLAN-x"], repo / "src" / "deep")  # found from a folder inside it
    assert not up_announced(["resume", "CPLAN-x"], tmp_path)  # outside the repository
    # A project planned in a subfolder is the command's repository there, as sessions.project_of decides.
    (repo / "src" / ".workflow").mkdir(parents=True)
    assert not up_announced(["resume", "CPLAN-x"], repo / "src" / "deep")
    assert project_of(repo / "src" / "deep", repo) == repo / "src"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    announcement.write_text(json.dumps({"pid": dead.pid, "broker_url": "redis://x", "workers": 4}))
    assert wanted(["collab-plan", "x", "--repo", str(repo)], {}), "a stale file (up was killed) is ignored"
    assert queue_dir(Path()) / UP_FILE == UP_ANNOUNCEMENT


def test_every_command_named_for_a_standby_is_a_command_of_the_cli() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert set(commands) >= COMMANDS, COMMANDS - set(commands)


def test_orders_survive_the_pipe() -> None:
    orders = StandbyOrders(argv=["--queues", "plan,explore", "--pool", "threads"],
                           env={"PATH": "/usr/bin", "WFQUEUE_BROKER_URL": "redis+socket:///tmp/r é.sock"},
                           stderr_path="/tmp/worker.stderr")
    line = orders.encode()
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # one line: the standby reads exactly one
    assert StandbyOrders.decode(line) == orders


def test_the_standby_loads_every_module_the_worker_app_imports() -> None:
    """After workers.preload, building the app (settings, Celery app, every task module, the SDK) imports
    nothing more: all of a worker's loading happens before its orders arrive."""
    script = ("import sys\nfrom workers import preload\npreload.load(sdk=True)\nbefore = set(sys.modules)\n"
              "import workers.app\nprint(sorted(set(sys.modules) - before))")
    env = {"PATH": "/usr/bin:/bin", "WFQUEUE_BROKER_URL": "redis://127.0.0.1:1/0", "ANTHROPIC_API_KEY": "k"}
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=PROJECT, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "['workers.app']", out


def test_a_standby_nobody_needs_leaves_on_its_own() -> None:
    """Its stdin closed without orders (the command exited, or was killed): it exits 0 and starts nothing."""
    proc = subprocess.run([sys.executable, "-m", "workers.serve", "--standby"], stdin=subprocess.DEVNULL,
                          cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


def test_a_standby_looks_for_the_api_key_where_the_settings_read_it() -> None:
    """The standby decides whether to load the SDK before the settings are loaded: its list of variables must be
    the settings' own, or a key set one way would start a node without the SDK (or load it for nothing)."""
    from wfqueue.settings import API_KEY_VARIABLES
    from workers import preload

    assert preload.API_KEY_VARIABLES == API_KEY_VARIABLES
