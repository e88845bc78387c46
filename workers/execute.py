"""The execute-queue task: one task of a plan, run by a coding agent in its own worktree (wfqueue.execute.run_task).

Its result is always a TaskRun (as JSON), also when the run could not finish: the coordinator merges what was
committed and records the rest, so a failure here is a record, never an exception (except a transient provider
error, retried later with the worktree and the executor's saved turns kept).

Time limits: an attempt runs the executor up to twice and the task's verification after each run, so the
task's own limits are derived from ``executor_timeout_s`` instead of the planning agents' limits.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded

from wfqueue.errors import BrokerUnreachableError, InfrastructureError, TransientProviderError, WfqueueError
from wfqueue.execute.command_executor import CommandExecutor
from wfqueue.execute.executors import Executor
from wfqueue.execute.model import TaskRun
from wfqueue.execute.run_task import EXECUTOR_RUNS, attempt_held, record_failure, run_task
from wfqueue.keys import AgentState
from wfqueue.payloads import ExecuteTask
from wfqueue.settings import Settings
from wfqueue.state import SessionStore
from wfqueue.transport.checkouts import cache_dir
from wfqueue.transport.repo import send_commits
from wfqueue.transport.workspace import task_commits_name
from workers.context import StateFactory, may_retry, retry_delay_of, retry_later, when_retried
from workers.header import heartbeat
from workers.registry import payload_task

EXECUTOR_DIR = "executor"  # prompt and output files of the command executor, in the execution folder
_MARGIN_S = 60  # git, the commit and the cleanup around the executor and verification runs


def time_limits(settings: Settings) -> tuple[int, int]:
    """The soft and hard time limits of one attempt: every executor run and verification at its longest, but
    ended before ``visibility_timeout_s``: past it the broker hands the unacknowledged message to a second worker
    while the first still runs it, in the same worktree. Raise ``visibility_timeout_s`` for long executors."""
    visibility = settings.visibility_timeout_s
    margin = max(1, min(_MARGIN_S, visibility // 10))
    wanted = int(EXECUTOR_RUNS * (settings.executor_timeout_s + settings.execute_check_timeout_s)) + margin
    hard = max(2, min(wanted + margin, visibility - margin))
    return max(1, hard - margin), hard


def executor_for(payload: ExecuteTask, settings: Settings, state: SessionStore) -> Executor:
    """The executor the payload names, configured from this worker's settings."""
    if payload.executor == "command":
        return CommandExecutor(settings.executor_command, settings.executor_timeout_s,
                               Path(payload.exec_dir) / EXECUTOR_DIR)
    # Imported on use: a worker without an API key starts without the SDK (workers/app.py).
    from wfqueue.execute.claude_executor import claude_executor

    return claude_executor(settings, state, Path(payload.exec_dir))


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)
    soft, hard = time_limits(settings)
    cache = cache_dir(settings)  # where this host makes the tasks' worktrees

    @payload_task(app, settings, ExecuteTask, soft_time_limit=soft, time_limit=hard)
    def execute_task(self: Task[Any, Any], payload: ExecuteTask) -> dict[str, Any]:
        state = states.session(payload.exec_id)  # an execution's state is kept under its exec id
        worker = self.request.hostname or "unknown"
        started = time.time()
        try:
            executor = executor_for(payload, settings, state)
        except WfqueueError as exc:  # not remembered: a worker configured for it may take the task again
            hint = f" ({exc.hint})" if exc.hint else ""
            # Named: on a shared broker the coordinator cannot see which machine lacks the configuration.
            return record_failure(payload, state, f"on worker {worker}: {exc.message}{hint}", worker=worker,
                                  cache=cache, started_at=started, remember=False,
                                  ran=False).model_dump(mode="json")
        try:
            run = _held_run(self, payload, executor, state, worker, started)
        except SoftTimeLimitExceeded:  # while it waited for the attempt's other delivery, which still runs
            run = record_failure(payload, state, f"stopped at the task's {soft}s time limit while another delivery of "
                                 "its attempt still ran", worker=worker, cache=cache, started_at=started,
                                 remember=False, ran=False)
        if payload.transport is not None and run.commit is not None:
            # This worker's repository is its own: the commit goes back to the coordinator through Redis.
            try:
                send_commits(states.client(), Path(payload.repo), run.commit, payload.base,
                             task_commits_name(payload.exec_id, payload.task.id, payload.attempt), settings)
            except BrokerUnreachableError:
                raise
            except InfrastructureError as exc:  # the task fails, not the execution: `--continue` runs it again
                hint = f" ({exc.hint})" if exc.hint else ""
                run = run.model_copy(update={"status": "failed", "error": f"on worker {worker}: {exc.message}{hint}"})
        return run.model_dump(mode="json")

    def _held_run(self: Task[Any, Any], payload: ExecuteTask, executor: Executor, state: SessionStore,
                  worker: str, started: float) -> TaskRun:
        """The attempt's run and the failure recorded after it, under its claim: a delivery waiting for this one
        must not start on the worktree while record_failure cleans it up."""
        with attempt_held(state, payload):
            try:
                # Beating while it runs, as a planning agent does: beat's watchdog reports a task that stopped
                # beating, not one whose executor is simply long (an executor may take up to executor_timeout_s).
                every_s = settings.heartbeat_every_s()
                state.set_agent(payload.task.id, beat_every_s=every_s)  # the watchdog waits for three missed beats
                with heartbeat(state, payload.task.id, every_s, hard):
                    run = run_task(payload, executor, state, cache=cache, worker=worker,
                                   check_timeout_s=settings.execute_check_timeout_s, held=True)
            except TransientProviderError as exc:
                if may_retry(self):
                    # Beside the agent, as a planning step's wait is: a retry-after can be most of an hour, and the
                    # task read "running" all the while. Queued, not running: nothing beats while it waits, and a
                    # running agent that stops beating is taken for one whose worker died.
                    delay = retry_delay_of(self, exc, settings)
                    state.set_agent(payload.task.id, state=AgentState.QUEUED,
                                    note=f"{exc.message}; {when_retried(self, delay)}")
                    raise retry_later(self, exc, settings, delay) from None
                run = record_failure(payload, state, exc.message, worker=worker, cache=cache, started_at=started)
            except SoftTimeLimitExceeded:
                run = record_failure(payload, state, f"stopped at the task's {soft}s time limit", worker=worker,
                                     cache=cache, started_at=started)
        return run
