"""Durable turns: a step that starts again continues after its last completed call, against the real SDK
and the local Messages API server, with the in-memory journal and with the session's Redis journal."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from tests.fake_anthropic import FakeAnthropic, allow_loopback_only, answer, error, text, tool_call
from wfqueue import agent_notes
from wfqueue.errors import ProviderError, TransientProviderError
from wfqueue.metering import MeteredProvider
from wfqueue.providers.anthropic import AnthropicProvider
from wfqueue.providers.anthropic.calls import RetryPolicy
from wfqueue.providers.base import AssessStep, ExploreAngleStep, Step
from wfqueue.state import SessionState, redis_client
from wfqueue.turns import MemoryJournal, SessionJournal, Transcript, journal_key
from wfqueue.usage import PriceTable

REQUIREMENT = "Add per-user rate limiting to the API"
FINDINGS = {
    "angle": "security", "structure": ["auth lives in notes_api/auth"],
    "relevant_files": [{"path": "notes_api/auth/tokens.py", "relevance": "high", "rationale": "issues tokens"}],
    "patterns": [], "integration_points": [], "dependencies": [], "constraints": [], "clarification_needs": [],
}
ASSESSMENT = {
    "complexity": "Low", "scope": "one package", "depth": "small", "risk": "low", "dependencies": "none",
    "preset": "feature", "angles": ["security"], "needs_exploration": False, "exploration_reasons": [],
}
GREPS = [tool_call("grep", {"pattern": f"def {name}"}) for name in ("issue_token", "verify_token", "create_app")]


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    allow_loopback_only(monkeypatch)



def provider_for(fake: FakeAnthropic, journal: Any = None, **options: Any) -> AnthropicProvider:
    options.setdefault("sleep", lambda seconds: None)
    return AnthropicProvider(model="claude-test", api_key="test-key", base_url=fake.base_url, journal=journal,
                             **options)


def explore_step(repo: Path) -> ExploreAngleStep:
    return ExploreAngleStep(session_id="s1", repo=str(repo), requirement=REQUIREMENT, angle="security")


def key_of(step: Step) -> str:
    return journal_key(step.label, step.model_dump_json())


def test_a_step_retried_after_a_transient_failure_resumes_at_its_last_turn(fake: FakeAnthropic,
                                                                          sample_repo: Path) -> None:
    journal = MemoryJournal()
    fake.reply(*GREPS[:2], error(529), error(529))  # two turns complete, then the API is overloaded
    first = provider_for(fake, journal, retry_policy=RetryPolicy(step_retries=1))

    with pytest.raises(TransientProviderError):
        first.run(explore_step(sample_repo))
    saved = journal.load(key_of(explore_step(sample_repo)))
    assert saved is not None and saved.turns == 2 and saved.phase == "loop"
    assert len(journal.calls) == 2  # only completed calls are billed

    fake.reply(GREPS[2], answer(FINDINGS))
    before = len(fake.requests)
    result = provider_for(fake, journal).run(explore_step(sample_repo))  # the task's retry: a new provider

    assert result.model_dump()["angle"] == "security"
    resumed = fake.requests[before:]
    # The retry starts with turn 3: its first request already carries turns 1 and 2 and their tool results.
    assert [len(b["messages"]) for b in resumed] == [5, 7]
    assert [c["kind"] for c in journal.calls] == ["turn-1", "turn-2", "turn-3", "turn-4"]
    sent = [json.dumps(b["messages"], sort_keys=True) for b in fake.requests]
    assert len(set(sent)) == len(sent) - 2  # only the two overloaded sends were repeats, never a completed turn


def test_a_step_asked_with_other_inputs_has_a_conversation_of_its_own(fake: FakeAnthropic,
                                                                      sample_repo: Path) -> None:
    journal = MemoryJournal()
    fake.reply(answer(ASSESSMENT), answer({**ASSESSMENT, "complexity": "Medium"}))
    first = provider_for(fake, journal).run(AssessStep(session_id="s1", repo=str(sample_repo), requirement="a"))
    other = provider_for(fake, journal).run(AssessStep(session_id="s1", repo=str(sample_repo), requirement="b"))

    assert (first.model_dump()["complexity"], other.model_dump()["complexity"]) == ("Low", "Medium")
    assert len(fake.requests) == 2


def test_a_finished_step_answers_again_without_a_call(fake: FakeAnthropic, sample_repo: Path) -> None:
    journal = MemoryJournal()
    fake.reply(GREPS[0], answer(FINDINGS))
    first = provider_for(fake, journal).run(explore_step(sample_repo))
    calls = len(fake.requests)

    again = provider_for(fake, journal).run(explore_step(sample_repo))  # a redelivered task

    assert again == first and len(fake.requests) == calls and len(journal.calls) == 2


def test_tool_results_are_saved_with_the_turn_not_run_again(fake: FakeAnthropic, sample_repo: Path) -> None:
    journal = MemoryJournal()
    fake.reply(tool_call("read", {"path": "notes_api/auth/tokens.py", "max_lines": 3}), error(500))
    with pytest.raises(TransientProviderError):
        provider_for(fake, journal, retry_policy=RetryPolicy(step_retries=0)).run(explore_step(sample_repo))
    (sample_repo / "notes_api/auth/tokens.py").write_text("changed after the turn\n", encoding="utf-8")

    fake.reply(answer(FINDINGS))
    provider_for(fake, journal).run(explore_step(sample_repo))

    tool_result = fake.requests[-1]["messages"][2]["content"][0]
    assert tool_result["type"] == "tool_result" and "changed after the turn" not in tool_result["content"]


def test_a_failed_step_starts_afresh_when_asked_again(fake: FakeAnthropic, sample_repo: Path) -> None:
    journal = MemoryJournal()
    step = AssessStep(session_id="s1", repo=str(sample_repo), requirement=REQUIREMENT)
    fake.reply(text("no JSON here"), text("still none"))
    with pytest.raises(ProviderError, match="after one repair round"):
        provider_for(fake, journal).run(step)
    saved = journal.load(key_of(step))
    assert saved is not None and saved.phase == "failed"

    fake.reply(answer(ASSESSMENT))
    assert provider_for(fake, journal).run(step).model_dump()["complexity"] == "Low"
    assert len(fake.requests[-1]["messages"]) == 1  # the prompt alone: not the failed conversation


def test_the_session_journal_saves_turn_and_usage_together(fake: FakeAnthropic, sample_repo: Path, redis_url: str,
                                                           tmp_path: Path) -> None:
    state = SessionState(redis_client(redis_url, 2.0), "S-journal", ttl_s=600)
    state.reset()
    fake.reply(GREPS[0], error(529))
    metered = MeteredProvider(provider_for(fake, retry_policy=RetryPolicy(step_retries=0)), state,
                              PriceTable({}), transcript_dir=tmp_path / "transcripts")
    with pytest.raises(TransientProviderError):
        metered.run(explore_step(sample_repo))
    assert [c["kind"] for c in state.usage()] == ["turn-1"]
    saved = SessionJournal(state).load(key_of(explore_step(sample_repo)))
    assert isinstance(saved, Transcript) and saved.turns == 1

    fake.reply(answer(FINDINGS))
    metered = MeteredProvider(provider_for(fake), state, PriceTable({}), transcript_dir=tmp_path / "transcripts")
    metered.run(explore_step(sample_repo))

    assert [c["kind"] for c in state.usage()] == ["turn-1", "turn-2"]
    lines = (tmp_path / "transcripts" / "explore-security.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["step"] == "explore:security" and records[-1]["phase"] == "done"
    assert [r["message"]["role"] for r in records[1:-1]] == ["user", "assistant", "user", "assistant"]


class Interrupted(Exception):
    """Stands for Celery's SoftTimeLimitExceeded, raised in the worker while a call is under way."""


class InterruptingTransport(httpx2.BaseTransport):
    """Passes the first ``calls`` requests to the fake server, then raises Interrupted inside the send."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.inner = httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.calls <= 0:
            raise Interrupted("soft time limit")
        self.calls -= 1
        return self.inner.handle_request(request)


def test_a_soft_time_limit_mid_call_stops_the_step_and_keeps_its_transcript(
        fake: FakeAnthropic, sample_repo: Path, redis_url: str, tmp_path: Path) -> None:
    """The SDK wraps anything raised inside a send as a connection error; the time limit must not be
    taken for one and sent again: it reaches the task, and the turns done so far are on disk."""
    state = SessionState(redis_client(redis_url, 2.0), "S-soft-limit", ttl_s=600)
    state.reset()
    client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0,
                                 http_client=httpx2.Client(transport=InterruptingTransport(calls=1)))
    slept: list[float] = []
    provider = AnthropicProvider(model="claude-test", client=client, sleep=slept.append)
    metered = MeteredProvider(provider, state, PriceTable({}), transcript_dir=tmp_path / "transcripts")
    fake.reply(GREPS[0], answer(FINDINGS))

    with pytest.raises(Interrupted):
        metered.run(explore_step(sample_repo))

    assert slept == [] and len(fake.requests) == 1  # not sent again
    lines = (tmp_path / "transcripts" / "explore-security.jsonl").read_text(encoding="utf-8").splitlines()
    outcome = json.loads(lines[-1])
    assert outcome["phase"] == "loop" and outcome["turns"] == 1 and len(outcome["calls"]) == 1


def test_two_runs_of_one_step_at_once_pay_for_its_turns_once(sample_repo: Path, redis_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The step a killed command sent still ran on a worker of `wfqueue up` when `resume` sent it again: both runs
    loaded the same saved turn and sent the same next request, paid twice. The second now waits for the first,
    then answers what it saved."""
    second_waits = threading.Event()
    said = agent_notes.note

    def note(text: str | None) -> None:
        if text and "is being run elsewhere" in text:
            second_waits.set()
        said(text)

    monkeypatch.setattr(agent_notes, "note", note)

    def slow_model(body: dict[str, Any]) -> Any:
        # The first run's first answer is held until the second run waits for it: the two are under way at once.
        second_waits.wait(30)
        rounds = sum(1 for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                     and any(b.get("type") == "tool_result" for b in m["content"]))
        return GREPS[rounds] if rounds < 2 else answer(FINDINGS)

    with FakeAnthropic(slow_model) as fake:
        def run_on_a_worker() -> Any:
            state = SessionState(redis_client(redis_url, 2.0), "S-twice", ttl_s=600)  # each its own connection
            return MeteredProvider(provider_for(fake), state, PriceTable({})).run(explore_step(sample_repo))

        SessionState(redis_client(redis_url, 2.0), "S-twice", ttl_s=600).reset()
        with ThreadPoolExecutor(2) as pool:
            first, second = [f.result(timeout=60) for f in [pool.submit(run_on_a_worker) for _ in range(2)]]
        assert second_waits.is_set(), "the second run never waited for the first: they did not overlap"
        assert first == second
        assert len(fake.requests) == 3 and fake.repeated_turns() == 0
    assert [c["kind"] for c in SessionState(redis_client(redis_url, 2.0), "S-twice", 600).usage()] == [
        "turn-1", "turn-2", "turn-3"]
