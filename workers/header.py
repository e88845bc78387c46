"""The one wrapper of every fan-out (chord header) task: agent records and the retry-or-failure-record policy.

A header task runs one agent (a collab area, an exploration angle). Its agent
record tells ``wfqueue status`` and Flower where it is: ``running`` (worker,
pid, start time, attempt number), ``queued`` with ``retrying: <why>`` while a
retry waits, then ``done`` or ``failed`` with the reason plan.md shows. A
header task never raises out of its chord (one failing agent would cancel the
callback, and with it every other agent's work): when retrying will not help,
or the retries are spent, it returns a failure record instead. The only
exceptions that leave it are Celery's ``Retry`` and a broker that went away,
which the base task (workers.context.broker_patient_task) waits out and
retries.

An agent that finishes (done or failed) sends again the chord's callback if it
fired early and held back for it (wfqueue.fanout).

``judge`` is the policy, pure; ``run_header`` applies it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from celery import Task
from celery.exceptions import Retry, SoftTimeLimitExceeded
from pydantic import BaseModel, ConfigDict

from wfqueue import agent_notes
from wfqueue.errors import ProviderError, TransientProviderError, WfqueueError
from wfqueue.fanout import send_waiting_callback
from wfqueue.keys import AgentState
from wfqueue.settings import Settings
from wfqueue.state import BROKER_AWAY, SessionStore
from workers.context import may_retry, retry_delay_of, retry_later, when_retried

__all__ = ["Attempt", "Finished", "Verdict", "judge", "run_header"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Attempt(BaseModel):
    """One run of an agent: who runs it, and the how-manieth time."""

    model_config = ConfigDict(frozen=True)

    agent: str
    worker: str
    pid: int
    attempts: int


class Finished(Attempt):
    """An attempt that ended: ``done``, or ``failed`` with the reason its records show."""

    status: Literal["done", "failed"]
    error: str | None = None


class Verdict(BaseModel):
    """What a header task does about an error.

    ``retry``: try again later (the agent waits as ``queued``, ``retrying: <reason>``);
    ``fail``: return a failure record with ``reason``; ``raise``: let it out (Celery's own
    Retry, or a broker that went away, which the base task waits out and retries)."""

    model_config = ConfigDict(frozen=True)

    action: Literal["retry", "fail", "raise"]
    reason: str = ""


def describe(exc: BaseException) -> str:
    """An error as a failure reason: a provider's by its message (it names the provider and what
    went wrong), any other with its type, which says where to look."""
    if isinstance(exc, ProviderError):
        return exc.message
    if isinstance(exc, WfqueueError):  # its hint is the caller's to add, once (str() carries it too)
        return f"{type(exc).__name__}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def judge(exc: BaseException, *, retries_left: bool, soft_time_limit_s: int) -> Verdict:
    """The retry-or-failure-record policy of every header task."""
    if isinstance(exc, (Retry, *BROKER_AWAY)):
        return Verdict(action="raise")
    if isinstance(exc, SoftTimeLimitExceeded):
        # The hard limit follows the soft one: a retry would most likely run out of time again.
        return Verdict(action="fail", reason=f"timed out after the {soft_time_limit_s}s soft time limit")
    if isinstance(exc, TransientProviderError):
        return Verdict(action="retry" if retries_left else "fail", reason=describe(exc))
    if isinstance(exc, WfqueueError):
        # A spent budget (BudgetExhaustedError), an answer that stays unusable, bad input:
        # the same call would fail the same way. What to do about it goes with it ("check
        # ANTHROPIC_API_KEY"): the plan, `status` and the command show the reason alone.
        return Verdict(action="fail", reason=describe(exc) + (f"; {exc.hint}" if exc.hint else ""))
    # Anything else (a bug, a file system blip): maybe it passes on another try.
    return Verdict(action="retry" if retries_left else "fail", reason=describe(exc))


@contextmanager
def heartbeat(state: SessionStore, agent: str, every_s: float, for_at_most_s: float) -> Iterator[None]:
    """While the block runs, write ``alive_at`` into the agent's record every ``every_s`` seconds, for at most
    ``for_at_most_s`` (its time limit: past it the agent counts as hung, and beat's watchdog may act). The
    watchdog takes these as progress: an agent that waits long on a model is alive, and re-enqueuing it would
    run it twice; a worker that died stops beating."""
    stop = threading.Event()
    until = time.monotonic() + for_at_most_s

    def beat() -> None:
        while not stop.wait(every_s) and time.monotonic() < until:
            try:
                state.set_agent(agent, alive_at=time.time())
            except Exception:  # noqa: BLE001 - a missed beat is no failure; the agent's own writes tell
                continue

    thread = threading.Thread(target=beat, name=f"heartbeat-{agent}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_header(task: Task[Any, Any], state: SessionStore, settings: Settings, agent: str,
               step: Callable[[Attempt], T], outcome: Callable[[Finished, T | None], M],
               done_fields: Callable[[T], dict[str, Any]] = lambda _: {}) -> M:
    """Run ``step`` as the agent ``agent`` of a chord header and return its outcome record.

    ``outcome`` builds the record the chord receives from the finished attempt and the
    step's result (None when it failed); ``done_fields`` adds to the agent record on success.
    """
    attempt = Attempt(agent=agent, worker=task.request.hostname or "unknown", pid=os.getpid(),
                      attempts=state.count_attempt(agent))
    every_s = settings.heartbeat_every_s()  # recorded: the watchdog, on a worker of its own, waits for its beats
    state.set_agent(agent, state=AgentState.RUNNING, worker=attempt.worker, pid=attempt.pid,
                    started_at=time.time(), attempts=attempt.attempts, error=None, note=None, beat_every_s=every_s)
    try:
        with heartbeat(state, agent, every_s, settings.agent_time_limit_s), \
                agent_notes.noting(lambda text: state.set_agent(agent, note=text)):
            result = step(attempt)
    except Exception as exc:  # judged below: a header task never breaks its chord
        verdict = judge(exc, retries_left=may_retry(task), soft_time_limit_s=settings.agent_soft_time_limit_s)
        if verdict.action == "raise":
            raise
        if verdict.action == "retry":
            delay = retry_delay_of(task, exc, settings)
            state.set_agent(agent, state=AgentState.QUEUED, note=None,
                            error=f"retrying: {verdict.reason}; {when_retried(task, delay)}")
            raise retry_later(task, exc, settings, delay) from None
        state.set_agent(agent, state=AgentState.FAILED, error=verdict.reason, finished_at=time.time(), note=None)
        send_waiting_callback(task.app, state)  # after the record: see wfqueue.fanout
        return outcome(Finished(**attempt.model_dump(), status="failed", error=verdict.reason), None)
    state.set_agent(agent, state=AgentState.DONE, finished_at=time.time(), note=None, **done_fields(result))
    send_waiting_callback(task.app, state)
    return outcome(Finished(**attempt.model_dump(), status="done"), result)
