"""One task of an execution, as a worker runs it: worktree, executor, verification, commit, cleanup.

:func:`run_task` is the whole step, without Celery (workers/execute.py only wires it up), so it runs in-process
in tests. It is idempotent: the result of each attempt is kept in the execution's session state
(``keys.task_run_key``) and a redelivered task returns it; a run that died after committing finds its commit on
the task's branch (trailers ``Task``, ``Exec``, ``Attempt``) and returns that, running nothing. To run a task
again, send a higher ``attempt``.

Progress is the task's agent record (``state.set_agent(task id, ...)``), as ``wfqueue status`` reads agents.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wfqueue import agent_notes
from wfqueue.errors import InfrastructureError, TransientProviderError, WfqueueError
from wfqueue.execute.commits import commit_all, commit_message, files_of_commit, find_task_commit
from wfqueue.execute.dependency_links import link_dependencies
from wfqueue.execute.executor_refs import before_run, take_back_refs
from wfqueue.execute.executors import Executor
from wfqueue.execute.gate import verification_refusal
from wfqueue.execute.model import TaskRun
from wfqueue.execute.plan_context import for_executor
from wfqueue.execute.prompt import build_prompt
from wfqueue.execute.worktree import (
    changed_paths,
    finish_worktree,
    left_as_found,
    prepare_worktree,
    repo_prefix,
    take_back_commits,
    worktree_path,
)
from wfqueue.fsio import atomic_write_text
from wfqueue.keys import AgentState, task_run_key
from wfqueue.payloads import ExecuteTask
from wfqueue.sandboxed_commands import (
    DEFAULT_COMMAND_TIMEOUT_S,
    MISSING_PROGRAM_HINT,
    CommandResult,
    parse_command,
    program_missing,
    run_command,
)
from wfqueue.state import SessionStore

# Executor runs per attempt: the first, and one more that sees the failing verification's output.
EXECUTOR_RUNS = 2
LOG_DIR = "logs"
VERIFICATION_OUTPUT_KEPT = 4_000  # characters of its tail in the result (the log keeps all of it)


def _log_name(task_id: str, attempt: int) -> str:
    return f"{LOG_DIR}/{re.sub(r'[^A-Za-z0-9._-]+', '-', task_id)}.{attempt}.log"


class _Log:
    """The attempt's log in the execution folder: each executor run's output and each verification's."""

    def __init__(self, exec_dir: Path, name: str) -> None:
        self.path = exec_dir / name
        self.text = ""
        atomic_write_text(self.path, self.text)

    def section(self, title: str, text: str) -> None:
        # Rewritten whole through fsio (a few sections per attempt): a worker that shares no disk with the
        # coordinator mirrors every fsio write to Redis, and the coordinator's copy of the log is complete.
        self.text += f"== {title} ==\n{text.rstrip()}\n\n"
        atomic_write_text(self.path, self.text)


def _verification_summary(command: str, result: CommandResult) -> str:
    how = f"timed out after {result.seconds:g}s" if result.timed_out else f"exited with status {result.exit_code}"
    return f"`{command}` {how}"


def _record(state: SessionStore, run: TaskRun, remember: bool = True) -> TaskRun:
    """Keep ``run`` (first answer wins) and show it in the task's agent record."""
    if remember:
        run = TaskRun.model_validate_json(state.remember_once(task_run_key(run.task_id, run.attempt),
                                                             run.model_dump_json()))
    fields: dict[str, Any] = {"finished_at": run.finished_at, "error": run.error, "commit": run.commit}
    done = run.status == "committed"
    state.set_agent(run.task_id, state=AgentState.DONE if done else AgentState.FAILED, note=None, **fields)
    return run


def _kept_at(path: Path, payload: ExecuteTask, worker: str) -> str:
    """Where a kept worktree is, for the person reading the error on the coordinator's machine: without a shared
    disk it is on the worker's, which the path alone did not say."""
    if payload.transport is None or not worker:
        return str(path)
    return f"{path} on worker {worker}"


def _in_cache(message: str, payload: ExecuteTask, worker: str) -> str:
    """A git failure, and on a worker without the shared disk where it happened: there the repository is the
    worker's cache, which the user can repair by deleting it (the planners' checkouts say so too); the advice to
    check "the repository" sent the user to their own, which was never the matter."""
    if payload.transport is None:
        return message
    return (f"{message} (in worker {worker or 'unknown'}'s repository cache, {payload.repo}: if git says an object is "
            "missing or corrupt, stop that worker, delete that folder there, which is filled again from Redis, and "
            "start it again)")


def record_failure(payload: ExecuteTask, state: SessionStore, error: str, *, cache: Path, worker: str = "",
                   started_at: float | None = None, remember: bool = True, ran: bool = True) -> TaskRun:
    """A failed run for ``payload`` that did not finish normally (a time limit, no executor on this worker):
    its worktree removed, or kept and named when it holds uncommitted work. ``remember=False`` lets a
    redelivered task try again (a worker without the executor's configuration). ``ran=False``: nothing ran here
    (no executor configured, or stopped while another delivery of the attempt ran): the worktree, which may be
    that delivery's, is left alone."""
    repo = Path(payload.repo)
    try:
        path = worktree_path(repo, cache, payload.exec_id, payload.task.id, payload.attempt)
        if ran and finish_worktree(repo, path):
            error = f"{error}; its uncommitted changes are kept in {_kept_at(path, payload, worker)}"
    except InfrastructureError as exc:
        error = f"{error}; the worktree could not be cleaned up: {exc.message}"
    now = time.time()
    run = TaskRun(task_id=payload.task.id, attempt=payload.attempt, status="failed", branch=payload.branch,
                  base=payload.base, error=error, worker=worker, started_at=started_at or now, finished_at=now)
    return _record(state, run, remember)


@contextmanager
def attempt_held(state: SessionStore, payload: ExecuteTask) -> Iterator[None]:
    """Hold one attempt of one task, across every worker (wfqueue.step_runner), for its run and for recording how
    it ended: a delivery sent again while the first still ran (the coordinator killed under `wfqueue up`, then
    `execute --continue`) ran a second agent in the same worktree, and one of the two failed on what the other
    did. The second waits (saying so beside the task), then returns what the first remembered."""
    task_id = payload.task.id
    with agent_notes.noting(lambda text: state.set_agent(task_id, note=text)), \
            state.running_step(f"execute:{task_id}#{payload.attempt}", f"task {task_id}"):
        yield


def run_task(payload: ExecuteTask, executor: Executor, state: SessionStore, *, cache: Path, worker: str = "",
             check_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S, held: bool = False) -> TaskRun:
    """Run one attempt of one task and return how it ended (see the module docstring). ``state``: the
    execution's session state (session id = the exec id); ``cache``: this host's wfqueue cache, where the task's
    worktree is made (wfqueue.execute.worktree); ``check_timeout_s``: how long its verification
    command may run (Settings.execute_check_timeout_s); ``held``: the caller holds :func:`attempt_held` (a worker
    that records a failure of its own after this returns), else it is held here."""
    if held:
        return _run_once(payload, executor, state, cache, worker, check_timeout_s)
    with attempt_held(state, payload):
        return _run_once(payload, executor, state, cache, worker, check_timeout_s)


def _run_once(payload: ExecuteTask, executor: Executor, state: SessionStore, cache: Path, worker: str,
              check_timeout_s: float) -> TaskRun:
    known = state.recall(task_run_key(payload.task.id, payload.attempt))
    if known is not None:
        return TaskRun.model_validate_json(known)
    started = time.time()
    try:
        return _run(payload, executor, state, cache, worker, started, check_timeout_s)
    except TransientProviderError:
        raise  # the worker retries the task later; the worktree and a durable executor's turns are kept
    except InfrastructureError as exc:  # git could not work here: not remembered, a redelivery may succeed
        return record_failure(payload, state, _in_cache(exc.message, payload, worker), cache=cache, worker=worker,
                              started_at=started, remember=False)
    except WfqueueError as exc:  # the executor gave up (a spent budget, a refused configuration)
        return record_failure(payload, state, exc.message, cache=cache, worker=worker, started_at=started)


def _run(payload: ExecuteTask, executor: Executor, state: SessionStore, cache: Path, worker: str, started: float,
         check_timeout_s: float) -> TaskRun:
    task, repo, attempt = payload.task, Path(payload.repo), payload.attempt
    runnable = verification_refusal(task) is None
    path = worktree_path(repo, cache, payload.exec_id, task.id, attempt)
    prefix = payload.prefix if payload.prefix is not None else repo_prefix(repo)
    workdir = path / prefix if prefix else path  # the plan's folder inside the worktree: paths are relative to it
    run = TaskRun(task_id=task.id, attempt=attempt, status="failed", branch=payload.branch, base=payload.base,
                  worker=worker, started_at=started)

    existing = find_task_commit(repo, payload.branch, payload.base, payload.exec_id, task.id, attempt)
    if existing is not None:  # a run that died between its commit and its result: committed after verifying
        finish_worktree(repo, path)
        log_name = _log_name(task.id, attempt)
        return _record(state, run.model_copy(update={
            "status": "committed", "commit": existing, "files_changed": files_of_commit(repo, existing, prefix),
            "verification": "passed" if runnable else "not_run", "finished_at": time.time(),
            "log": log_name if (Path(payload.exec_dir) / log_name).exists() else None}))

    state.set_agent(task.id, state=AgentState.RUNNING, worker=worker, started_at=started, attempt=attempt,
                    executor=payload.executor, error=None, finished_at=None, commit=None, note=None)
    link_dependencies(repo, path.parent.parent)  # the execution's folder: Node and npm find them above the worktree
    prepare_worktree(repo, path, payload.branch, payload.base)
    log_name = _log_name(task.id, attempt)
    log = _Log(Path(payload.exec_dir), log_name)
    run = run.model_copy(update={"log": log_name})
    context = for_executor(payload.context, repo, executor.name)
    prompt = build_prompt(task, context, retry_feedback=payload.retry_feedback)
    error: str | None = None
    for number in range(1, EXECUTOR_RUNS + 1):
        step = f"{task.id}#{attempt}" if number == 1 else f"{task.id}#{attempt}.{number}"
        refs = before_run(path)
        with agent_notes.noting(lambda text: state.set_agent(task.id, note=text)):
            result = executor.run(prompt, workdir, step)
        log.section(f"executor run {number} ({step})", result.output + (f"\n{result.error}" if result.error else ""))
        take_back_commits(path, payload.branch, payload.base)
        for said in take_back_refs(path, payload.branch, refs):
            log.section(said, "")
        if not result.ok:
            error = result.error or "the executor failed"
            break
        if not changed_paths(path):
            error = "the executor changed nothing"
            break
        if not runnable:
            log.section(f"verification not run: {verification_refusal(task)}", "")
            break
        with left_as_found(path):  # what the verification writes is not the task's change
            checked = run_command(parse_command(task.verification), workdir, check_timeout_s)
        summary = _verification_summary(task.verification.strip(), checked)
        log.section(f"verification after run {number}: {summary}", checked.output)
        passed = checked.exit_code == 0 and not checked.timed_out
        run = run.model_copy(update={"verification": "passed" if passed else "failed",
                                     "verification_output": checked.output[-VERIFICATION_OUTPUT_KEPT:]})
        if passed:
            break
        if program_missing(checked):  # another executor run cannot make the program appear: it would be paid for
            error = (f"the verification cannot run: {summary}, a program it runs was not found "
                     f"({MISSING_PROGRAM_HINT})")
            break
        if number == EXECUTOR_RUNS:
            error = f"the verification still fails after {EXECUTOR_RUNS} executor runs: {summary}"
            break
        prompt = build_prompt(task, context, retry_feedback=payload.retry_feedback,
                              verification_failure=f"{summary}\n{checked.output}")

    if error is None:
        commit = commit_all(path, commit_message(task, payload.exec_id, attempt))
        if commit is None:  # only byproducts changed
            error = "the executor changed nothing"
        else:
            run = run.model_copy(update={"status": "committed", "commit": commit,
                                         "files_changed": files_of_commit(repo, commit, prefix)})
    if finish_worktree(repo, path):  # only a failed run leaves uncommitted work
        error = (f"{error or 'the change was not committed'}; its uncommitted changes are kept in "
                 f"{_kept_at(path, payload, worker)}")
    return _record(state, run.model_copy(update={"error": error, "finished_at": time.time()}))
