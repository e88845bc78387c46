"""The execute task's wiring: its time limits come from the executor timeout, and its executor from the payload."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.execute_support import EXEC_ID, cache, make_repo, payload, task
from wfqueue.celery_app import create_app
from wfqueue.errors import ConfigError, ExecutorNotConfiguredError
from wfqueue.execute.command_executor import CommandExecutor
from wfqueue.execute.worktree import worktree_path
from wfqueue.memory_state import MemorySessionState
from wfqueue.settings import Settings
from wfqueue.task_names import EXECUTE_TASK
from workers import execute


def _settings(**values: Any) -> Settings:
    return Settings(broker_url=SecretStr("redis://localhost:1/0"), **values)


def test_the_task_may_run_as_long_as_its_executor_runs_and_verifications() -> None:
    settings = _settings(executor_timeout_s=900)
    app = create_app(settings)
    execute.register(app, settings)
    registered = app.tasks[EXECUTE_TASK]
    soft, hard = execute.time_limits(settings)
    assert (registered.soft_time_limit, registered.time_limit) == (soft, hard)
    assert soft > 2 * 900 and hard > soft
    assert soft > settings.agent_soft_time_limit_s  # not the planning agents' limit


def test_the_command_executor_is_configured_from_the_settings(tmp_path: Path) -> None:
    sent = payload(make_repo(tmp_path), tmp_path / "exec", task())
    executor = execute.executor_for(sent, _settings(executor_command="my-agent --file {prompt_file}",
                                                    executor_timeout_s=42), MemorySessionState(EXEC_ID))
    assert isinstance(executor, CommandExecutor)
    assert executor.argv == ["my-agent", "--file", "{prompt_file}"] and executor.timeout_s == 42
    with pytest.raises(ExecutorNotConfiguredError, match="no executor command"):
        execute.executor_for(sent, _settings(), MemorySessionState(EXEC_ID))


def test_a_worker_without_an_api_key_cannot_run_the_claude_executor(tmp_path: Path) -> None:
    sent = payload(make_repo(tmp_path), tmp_path / "exec", task()).model_copy(update={"executor": "claude"})
    with pytest.raises(ConfigError, match="needs an Anthropic API key"):
        execute.executor_for(sent, _settings(anthropic_api_key=None), MemorySessionState(EXEC_ID))


def test_the_task_is_stopped_before_its_message_would_be_delivered_again() -> None:
    soft, hard = execute.time_limits(_settings(executor_timeout_s=1800, visibility_timeout_s=3600))
    assert soft < hard < 3600
    soft, hard = execute.time_limits(_settings(executor_timeout_s=1800, visibility_timeout_s=10_000))
    assert soft > 2 * 1800 and hard < 10_000


def test_a_running_task_beats_so_the_watchdog_sees_a_long_executor_alive(tmp_path: Path, redis_url: str) -> None:
    """An execution's task never beat: beat's watchdog, which now watches running executions, called any task
    whose executor ran past its deadline (15 minutes by default; an executor may run 30) stalled."""
    import sys

    from wfqueue.state import SessionState, redis_client

    settings = _settings(executor_command=f"{sys.executable} -c 'import time; time.sleep(1.2)'",
                         agent_heartbeat_s=0.2).model_copy(update={"broker_url": SecretStr(redis_url)})
    app = create_app(settings)
    execute.register(app, settings)
    sent = payload(make_repo(tmp_path), tmp_path / "exec", task(verification="manual: none"))
    app.tasks[EXECUTE_TASK].run(**sent._kwargs())
    record = SessionState(redis_client(redis_url, 2.0), EXEC_ID, 600).agent(sent.task.id)
    assert record.get("alive_at") is not None and record["alive_at"] > record["started_at"], record
    assert record["beat_every_s"] == settings.heartbeat_every_s()  # a watchdog with a shorter deadline waits for it


def test_a_worker_without_the_executors_configuration_leaves_the_attempts_worktree_alone(
        tmp_path: Path, redis_url: str) -> None:
    """It answers "not configured here" (not remembered: a configured worker takes the task again), and removed the
    attempt's worktree on the way, which another delivery of the attempt, on a configured worker, was working in."""
    settings = _settings().model_copy(update={"broker_url": SecretStr(redis_url)})  # no executor command
    app = create_app(settings)
    execute.register(app, settings)
    repo = make_repo(tmp_path)
    sent = payload(repo, tmp_path / "exec", task(verification="manual: none"))
    busy = worktree_path(repo, cache(), EXEC_ID, sent.task.id, sent.attempt)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", sent.branch, str(busy), sent.base],
                   check=True)
    result = app.tasks[EXECUTE_TASK].run(**sent._kwargs())
    assert result["status"] == "failed" and "no executor command" in result["error"]
    assert busy.is_dir(), "the other delivery's worktree was removed"
