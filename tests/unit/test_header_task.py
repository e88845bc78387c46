"""The chord-header wrapper: what an agent's records say after each kind of failure, and that the chord never
breaks. Runs in process: a Celery task applied eagerly (its retries too) against the in-memory session state."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from celery import Celery, Task
from celery.exceptions import Retry, SoftTimeLimitExceeded
from pydantic import BaseModel

from wfqueue import agent_notes
from wfqueue.errors import (
    BudgetExhaustedError,
    NoSourceCodeError,
    PlanNoteError,
    ProviderError,
    TransientProviderError,
)
from wfqueue.keys import AgentState
from wfqueue.memory_state import MemorySessionState
from wfqueue.settings import Settings
from workers.collab import area_outcome
from workers.header import Attempt, Finished, Verdict, judge, run_header
from workers.lite import angle_outcome

SETTINGS = Settings(task_max_retries=2, retry_backoff_s=0, retry_backoff_max_s=0, agent_soft_time_limit_s=7)


class Outcome(BaseModel):
    agent: str
    status: str
    error: str | None
    attempts: int
    worker: str
    value: int | None


def outcome(attempt: Finished, value: int | None) -> Outcome:
    return Outcome(agent=attempt.agent, status=attempt.status, error=attempt.error, attempts=attempt.attempts,
                   worker=attempt.worker, value=value)


class Header:
    """An agent task on a throwaway app; ``failures`` are raised by its first calls, in order."""

    def __init__(self, failures: list[Exception]) -> None:
        self.state = MemorySessionState("S-header")
        self.failures = list(failures)
        self.seen: list[tuple[str | None, str | None]] = []  # the agent record (state, error) each attempt found
        app = Celery("header-tests", set_as_current=False)

        def step(attempt: Attempt) -> int:
            if self.failures:
                raise self.failures.pop(0)
            return 42

        @app.task(bind=True, max_retries=SETTINGS.task_max_retries, shared=False)  # not on every app
        def agent(task: Task[Any, Any]) -> dict[str, Any]:
            self.seen.append((self.record.get("state"), self.record.get("error")))
            return run_header(task, self.state, SETTINGS, "api", step, outcome,
                              done_fields=lambda value: {"tasks": value}).model_dump()

        self.task = agent

    def run(self) -> dict[str, Any]:
        result: dict[str, Any] = self.task.apply().get()
        return result

    @property
    def record(self) -> dict[str, Any]:
        return self.state.agent("api")


def test_a_transient_provider_error_is_retried_and_the_agent_shows_why_while_it_waits() -> None:
    header = Header([TransientProviderError("rate limited by the provider", retry_after=0)])
    result = header.run()
    assert result["status"] == "done" and result["value"] == 42 and result["attempts"] == 2
    # While the retry waited, the agent showed as queued, with the reason and when it runs again.
    assert header.seen[0] == (None, None) and header.seen[1][0] == "queued", header.seen
    assert re.fullmatch(r"retrying: rate limited by the provider; tried again in 0s \(at \d\d:\d\d:\d\d; try 2 of "
                        r"\d+\)", str(header.seen[1][1])), header.seen
    record = header.record
    assert record["state"] == AgentState.DONE and record["tasks"] == 42 and record["attempts"] == 2
    assert record["error"] is None, "a successful retry clears the retry note"
    assert record["worker"] and record["pid"] and record["started_at"] <= record["finished_at"]


def test_retries_spent_give_a_failure_record_not_an_exception() -> None:
    header = Header([TransientProviderError("overloaded")] * 3)
    result = header.run()
    assert result == {"agent": "api", "status": "failed", "error": "overloaded", "attempts": 3,
                      "worker": result["worker"], "value": None}
    assert header.record["state"] == AgentState.FAILED and header.record["error"] == "overloaded"
    assert header.record["finished_at"] >= header.record["started_at"]


@pytest.mark.parametrize(("error", "reason"), [
    (BudgetExhaustedError("budget exhausted: $1.00 of $1.00 spent"), "budget exhausted: $1.00 of $1.00 spent"),
    (ProviderError("the answer was not a plan"), "the answer was not a plan"),
    # What to do goes with it: an agent's failure lost the hint a single step's failure prints.
    (ProviderError("plan_area:api: the Anthropic API refused the request (401): invalid x-api-key",
                   hint="check ANTHROPIC_API_KEY"),
     "plan_area:api: the Anthropic API refused the request (401): invalid x-api-key; check ANTHROPIC_API_KEY"),
    (SoftTimeLimitExceeded(), "timed out after the 7s soft time limit"),
    (PlanNoteError("section missing"), "PlanNoteError: section missing"),
])
def test_failures_a_retry_would_not_fix_are_recorded_at_once(error: Exception, reason: str) -> None:
    header = Header([error])
    result = header.run()
    assert result["status"] == "failed" and result["error"] == reason and result["attempts"] == 1
    assert header.record["state"] == AgentState.FAILED and header.record["error"] == reason


def test_an_unexpected_error_is_retried_then_named_in_the_failure_record() -> None:
    header = Header([KeyError("x"), OSError("disk hiccup")])
    assert header.run()["status"] == "done"
    header = Header([ValueError("bad value")] * 3)
    result = header.run()
    assert result["status"] == "failed" and result["error"] == "ValueError: bad value" and result["attempts"] == 3


def test_a_broker_that_went_away_is_left_to_the_base_task() -> None:
    header = Header([redis.ConnectionError("connection refused")])
    with pytest.raises(redis.ConnectionError):
        header.run()


@pytest.mark.parametrize(("error", "retries_left", "expected"), [
    (TransientProviderError("429"), True, Verdict(action="retry", reason="429")),
    (TransientProviderError("429"), False, Verdict(action="fail", reason="429")),
    (BudgetExhaustedError("spent"), True, Verdict(action="fail", reason="spent")),
    # Its hint once: the reason said it twice ("hint: pass --repo ...; pass --repo ...").
    (NoSourceCodeError.of("/r"), True, Verdict(action="fail", reason="NoSourceCodeError: /r has no source code to "
                                                                     "plan against; pass --repo with the repository "
                                                                     "the requirement is about")),
    (SoftTimeLimitExceeded(), True, Verdict(action="fail", reason="timed out after the 5s soft time limit")),
    (RuntimeError("bug"), True, Verdict(action="retry", reason="RuntimeError: bug")),
    (RuntimeError("bug"), False, Verdict(action="fail", reason="RuntimeError: bug")),
    (Retry(), True, Verdict(action="raise")),
    (redis.TimeoutError(), False, Verdict(action="raise")),
])
def test_the_policy(error: Exception, retries_left: bool, expected: Verdict) -> None:
    assert judge(error, retries_left=retries_left, soft_time_limit_s=5) == expected


def test_collab_and_lite_outcomes_keep_the_agent_and_who_ran_it() -> None:
    failed = Finished(agent="auth", worker="w1@host", pid=12, attempts=3, status="failed", error="boom")
    assert area_outcome(failed, None).model_dump() == {
        "focus_area": "auth", "status": "failed", "task_count": 0, "error": "boom", "worker": "w1@host", "pid": 12,
        "attempts": 3}
    assert angle_outcome(failed, None).model_dump() == {
        "angle": "auth", "status": "failed", "error": "boom", "verified": 0, "checks": 0, "worker": "w1@host",
        "pid": 12, "attempts": 3}


def test_what_an_agent_waits_for_is_in_its_record_while_it_waits_and_gone_when_it_ends() -> None:
    header = Header([])
    during: list[str | None] = []

    def waiting_step(attempt: Attempt) -> int:
        agent_notes.note("the Anthropic API answered 529: overloaded; sending again in 4s (7 re-sends left)")
        during.append(header.record.get("note"))
        return 42

    @header.task.app.task(bind=True, shared=False, name="waiting-agent")
    def waiting_agent(task: Task[Any, Any]) -> dict[str, Any]:
        return run_header(task, header.state, SETTINGS, "api", waiting_step, outcome).model_dump()

    assert waiting_agent.apply().get()["status"] == "done"
    assert during == ["the Anthropic API answered 529: overloaded; sending again in 4s (7 re-sends left)"]
    assert header.record["state"] == AgentState.DONE and header.record["note"] is None
    agent_notes.note("outside any agent: goes nowhere")  # no writer set: nothing happens, nothing raised


def test_an_error_celery_cannot_carry_back_arrives_as_what_it_was() -> None:
    """A worker's pydantic ValidationError reached the user as "Exception: <class '...ValidationError'>([])":
    Celery rebuilds an error from its type and arguments, and that one cannot be. It travels as text now; an
    error that can be rebuilt travels as itself."""
    from celery import Celery
    from pydantic import Field, ValidationError

    from wfqueue.errors import StepCrashedError
    from workers.registry import carried_back

    class Usage(BaseModel):
        input_tokens: int = Field(ge=0)

    with pytest.raises(ValidationError) as raised:
        Usage(input_tokens=-5000)
    backend = Celery(backend="cache+memory://", set_as_current=False).backend
    backend.app.conf.result_serializer = "json"
    arrived = backend.exception_to_python(backend.prepare_exception(
        carried_back(raised.value, "wfqueue.lite.assess", "w1@host")))
    assert isinstance(arrived, StepCrashedError)
    assert arrived.message.startswith("wfqueue.lite.assess failed on w1@host: ValidationError: 1 validation error")
    assert "input_tokens" in arrived.message and "worker.log" in arrived.hint
    plain = ValueError("a file system blip")
    assert carried_back(plain, "t", "w") is plain
