"""Settings a user gets wrong: a blank line in an env file, a value too large to use, a misspelt variable.
Each is answered when the settings are read, naming the setting, before anything starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT, SAMPLE_REPO
from wfqueue import settings_checks
from wfqueue.errors import ConfigError
from wfqueue.settings import Settings, load_settings
from wfqueue.settings_checks import MAX_DURATION_S, warn_unknown_env
from wfqueue.transport.checkouts import cache_dir

TEN_YEARS_S = str(MAX_DURATION_S)  # 315360000
HUGE = "99999999999999999999999"


def run_wfqueue(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    clean["PYTHONPATH"] = str(PROJECT)  # wfqueue from this checkout, whatever the folder the command runs in
    return subprocess.run([sys.executable, "-m", "wfqueue", *args], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


# -- a blank value means unset ---------------------------------------------------------------------------------


def test_a_blank_worker_cache_dir_is_the_default_cache_not_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("WFQUEUE_WORKER_CACHE_DIR", "")  # an env file's `WFQUEUE_WORKER_CACHE_DIR=` line
    assert cache_dir(load_settings()) == (tmp_path / "xdg" / "wfqueue").resolve()

    monkeypatch.delenv("WFQUEUE_WORKER_CACHE_DIR")
    config = tmp_path / "wfqueue.toml"
    config.write_text('worker_cache_dir = "  "\n', encoding="utf-8")
    monkeypatch.setenv("WFQUEUE_CONFIG_FILE", str(config))
    assert cache_dir(load_settings()) == (tmp_path / "xdg" / "wfqueue").resolve()


def test_blank_values_of_other_settings_that_may_be_unset_are_unset_too(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORKER_CONCURRENCY", "SHARED_DISK", "REPO_URL", "ANTHROPIC_TIMEOUT_S", "EXECUTOR_COMMAND"):
        monkeypatch.setenv(f"WFQUEUE_{name}", "")
    settings = load_settings()
    assert (settings.worker_concurrency, settings.shared_disk, settings.repo_url, settings.anthropic_timeout_s,
            settings.executor_command) == (None, None, None, None, None)


# -- values too large to use -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("WFQUEUE_STATE_TTL_S", HUGE, f"state_ttl_s: {HUGE} is too large: allowed 1 to {TEN_YEARS_S} seconds"),
    ("WFQUEUE_RESULT_EXPIRES_S", HUGE, f"result_expires_s: {HUGE} is too large: allowed 1 to {TEN_YEARS_S}"),
    ("WFQUEUE_VISIBILITY_TIMEOUT_S", str(MAX_DURATION_S + 1), f"allowed 1 to {TEN_YEARS_S} seconds (10 years)"),
    ("WFQUEUE_BROKER_CONNECT_TIMEOUT_S", "inf",
     f"broker_connect_timeout_s: inf is not a finite number: allowed above 0 up to {TEN_YEARS_S} seconds"),
    ("WFQUEUE_BROKER_OUTAGE_GRACE_S", "1e309", f"broker_outage_grace_s: 1e309 is not a finite number: allowed 0 to "
                                               f"{TEN_YEARS_S} seconds"),
    ("WFQUEUE_WATCHDOG_INTERVAL_S", "inf", "watchdog_interval_s: inf is not a finite number"),
    # Beat sent a watchdog task every microsecond: 9,000 messages on the control queue in 10 s.
    ("WFQUEUE_WATCHDOG_INTERVAL_S", "0.000001", "watchdog_interval_s: Input should be greater than or equal to 0.1"),
    ("WFQUEUE_POLL_INTERVAL_S", "1e-300", "poll_interval_s: Input should be greater than or equal to 0.001"),
    ("WFQUEUE_PLAN_TIMEOUT_S", "nan", "plan_timeout_s: nan is not a finite number"),
    ("WFQUEUE_RETRY_BACKOFF_S", "1e23", f"retry_backoff_s: 1e+23 is too large: allowed 0 to {TEN_YEARS_S}"),
    ("WFQUEUE_ARCHIVE_AFTER_DAYS", "99999", "archive_after_days: 99999 is too large: allowed 1 to 3650 days"),
    ("WFQUEUE_WORKER_CONCURRENCY", HUGE, f"worker_concurrency: {HUGE} is too large: allowed 1 to 10000 at once"),
    ("WFQUEUE_EXECUTE_PARALLEL", "20000", "execute_parallel: 20000 is too large: allowed 1 to 10000 at once"),
    ("WFQUEUE_BUNDLE_MAX_BYTES", HUGE, "bundle_max_bytes: 99999999999999999999999 is too large: allowed 1 to "
                                       "1099511627776 bytes (1 TiB)"),
    ("WFQUEUE_RATE_LIMIT_INPUT_TPM", HUGE, "rate_limit_input_tpm: 99999999999999999999999 is too large: allowed 0 "
                                           "to 1000000000"),
    ("WFQUEUE_PRICE_TABLE", '{"m": {"input": Infinity, "output": 1, "cache_read": 1, "cache_write": 1}}',
     "price_table.m.input: Input should be a finite number"),
])
def test_a_value_out_of_range_is_a_config_error_naming_the_setting_and_the_range(
        variable: str, value: str, said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert said in refused.value.message
    assert refused.value.exit_code == 2


def test_the_largest_values_allowed_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_STATE_TTL_S", TEN_YEARS_S)
    monkeypatch.setenv("WFQUEUE_PLAN_TIMEOUT_S", f"{MAX_DURATION_S}.0")
    monkeypatch.setenv("WFQUEUE_WORKER_CONCURRENCY", "10000")
    settings = load_settings()
    assert (settings.state_ttl_s, settings.plan_timeout_s, settings.worker_concurrency) == (
        MAX_DURATION_S, float(MAX_DURATION_S), 10_000)


def test_a_plan_with_a_state_ttl_redis_cannot_hold_stops_before_it_starts(tmp_path: Path) -> None:
    """It used to start Redis and its workers, write the session folder, then die on Redis's EXPIRE."""
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPO, repo)
    done = run_wfqueue(["lite-plan", "Fix cache expiry", "--repo", str(repo), "-y", "--provider", "offline"],
                       tmp_path, WFQUEUE_STATE_TTL_S=HUGE)
    assert done.returncode == 2, done.stderr
    assert "state_ttl_s" in done.stderr and TEN_YEARS_S in done.stderr
    assert "Traceback" not in done.stderr
    assert not (repo / ".workflow").exists()


# -- misspelt variables ------------------------------------------------------------------------------------------


def test_a_misspelt_variable_is_a_warning_on_stderr_naming_the_closest_setting(tmp_path: Path) -> None:
    done = run_wfqueue(["config", "--json"], tmp_path, WFQUEUE_VISIBILTY_TIMEOUT_S="5", WFQUEUE_TEST_EDITS="x")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["visibility_timeout_s"] == 3600  # stdout is the JSON alone
    assert done.stderr.strip() == ("warning: WFQUEUE_VISIBILTY_TIMEOUT_S is not a wfqueue setting and is ignored "
                                   "(did you mean WFQUEUE_VISIBILITY_TIMEOUT_S?)")


def test_the_warning_is_given_once_per_process(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(settings_checks, "_warned_env", set())
    monkeypatch.setenv("WFQUEUE_MAX_AGENT", "4")
    load_settings()
    load_settings()  # a second entry point in the same process
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "warning: WFQUEUE_MAX_AGENT is not a wfqueue setting and is ignored (did you mean WFQUEUE_MAX_AGENTS?)"]


def test_wfqueues_own_variables_that_are_not_settings_are_not_warned_about(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(settings_checks, "_warned_env", set())
    environ = {"WFQUEUE_CONFIG_FILE": "x.toml", "WFQUEUE_WORKER_QUEUES": "plan", "WFQUEUE_TEST_ANYTHING": "1",
               "wfqueue_model": "m", "WFQUEUE_ANTHROPIC_API_KEY": "k", "_WFQUEUE_PARENT_PID": "1", "HOME": "/"}
    assert warn_unknown_env(environ, Settings.model_fields) == []
    assert warn_unknown_env({"WFQUEUE_ZZZZ": "1"}, Settings.model_fields) == [
        "warning: WFQUEUE_ZZZZ is not a wfqueue setting and is ignored"]
    assert capsys.readouterr().out == ""
