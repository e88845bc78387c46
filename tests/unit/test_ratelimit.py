"""The global rate limiter: the pure timing decision, then the Redis-backed limiter on a real embedded Redis."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import SecretStr
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.fake_anthropic import FakeAnthropic, answer
from wfqueue.errors import TransientProviderError
from wfqueue.providers import make_provider
from wfqueue.providers.anthropic import AnthropicProvider
from wfqueue.providers.base import AssessStep
from wfqueue.ratelimit import (
    Decision,
    Event,
    Learning,
    Limits,
    RateLimiter,
    Snapshot,
    decide,
    estimate_tokens,
    limiter_from_settings,
    model_family,
    next_slot,
)
from wfqueue.settings import Settings
from wfqueue.state import redis_client
from wfqueue.usage import Usage

# -- the pure decision ------------------------------------------------------------------------------


def test_next_slot_is_zero_while_the_window_has_room() -> None:
    assert next_slot([], now=100.0, limit=3, window_s=60) == 0.0
    assert next_slot([(90.0, 1), (95.0, 1)], now=100.0, limit=3, window_s=60) == 0.0
    assert next_slot([(1.0, 1)] * 50, now=100.0, limit=0, window_s=60) == 0.0  # 0: unlimited


def test_next_slot_waits_for_the_oldest_event_to_leave_the_window() -> None:
    events = [(50.0, 1), (70.0, 1), (90.0, 1)]
    assert next_slot(events, now=100.0, limit=3, window_s=60) == pytest.approx(10.0)  # 50 leaves at 110
    # Expired events do not count; one exactly window_s old has just left.
    assert next_slot([(10.0, 1), (40.0, 1), (70.0, 1), (90.0, 1)], now=100.0, limit=3, window_s=60) == 0.0


def test_next_slot_weighs_costs_and_clamps_an_oversized_one() -> None:
    events = [(0.0, 400), (10.0, 300), (20.0, 300)]
    # 1000 used; 500 more fits once 400 and 300 have left: the event at 10 leaves at 70.
    assert next_slot(events, now=30.0, limit=1000, window_s=60, cost=500) == pytest.approx(40.0)
    assert next_slot(events, now=30.0, limit=1000, window_s=60, cost=0) == 0.0
    # A call larger than the whole limit waits for an empty window instead of never going.
    assert next_slot(events, now=30.0, limit=1000, window_s=60, cost=5000) == pytest.approx(50.0)
    assert next_slot([], now=30.0, limit=1000, window_s=60, cost=5000) == 0.0


def test_limits_scale_to_the_window_and_never_below_one_request() -> None:
    limits = Limits.per_minute(60, 30_000, 8_000, 4, window_s=6)
    assert (limits.requests, limits.input_tokens, limits.output_tokens, limits.window_s) == (6, 3_000, 800, 6)
    assert Limits.per_minute(50, 0, 0, 0, window_s=6).requests == 5
    slow = Limits.per_minute(5, 0, 0, 0, window_s=6)  # half a request per 6 s would admit 10/min
    assert (slow.window_s, slow.requests) == (12.0, 1.0)
    assert Limits.per_minute(0, 0, 0, 0).unlimited and not Limits.per_minute(0, 0, 0, 1).unlimited


def test_decide_sleeps_exactly_for_requests_and_polls_while_releases_may_come() -> None:
    limits = Limits(requests=2, input_tokens=1000, output_tokens=0, concurrency=0, window_s=60)
    full = Snapshot(now=100.0, events=(Event(50.0, 10), Event(60.0, 10)))
    assert decide(full, limits) == Decision(wait_s=10.0, floor_s=10.0, sleep_s=10.0, reason="requests")

    tokens = Snapshot(now=100.0, events=(Event(70.0, 900),))
    no_call_in_flight = decide(tokens, limits, estimated_input_tokens=200)
    assert (no_call_in_flight.wait_s, no_call_in_flight.floor_s, no_call_in_flight.sleep_s) == (30.0, 30.0, 30.0)
    # With the call still in flight its release may lower 900 to the actual count: poll instead.
    in_flight = decide(Snapshot(100.0, tokens.events, held=(400.0,)), limits, estimated_input_tokens=200, poll_s=0.25)
    assert (in_flight.wait_s, in_flight.floor_s, in_flight.sleep_s, in_flight.reason) == (
        30.0, 0.0, 0.25, "input tokens")
    assert decide(Snapshot(100.0, tokens.events), limits, estimated_input_tokens=100).admitted


def test_decide_concurrency_waits_for_a_lease_or_a_release() -> None:
    limits = Limits(requests=0, input_tokens=0, output_tokens=0, concurrency=2, window_s=60)
    held = Snapshot(now=100.0, held=(130.0, 103.0, 99.0))  # 99.0 has lapsed
    decision = decide(held, limits, poll_s=0.5)
    assert (decision.wait_s, decision.floor_s, decision.sleep_s, decision.reason) == (3.0, 0.0, 0.5, "concurrency")
    assert decide(Snapshot(now=100.0, held=(130.0,)), limits).admitted


def test_three_greedy_clients_simulated_on_the_pure_decision_hold_the_rate() -> None:
    """Clients sleeping exactly what decide() says never exceed the window and fill it."""
    limits = Limits.per_minute(60, 0, 0, 0, window_s=6)
    events: list[Event] = []
    wake = {client: 0.0 for client in range(3)}
    while True:
        client, now = min(wake.items(), key=lambda item: (item[1], item[0]))
        if now >= 60.0:
            break
        decision = decide(Snapshot(now=now, events=tuple(events)), limits)
        if decision.admitted:
            events.append(Event(now))
        wake[client] = now + decision.sleep_s
    times = [e.at for e in events]
    assert len(times) == 60  # 60 s at 60/min
    assert all(later - earlier >= 6.0 - 1e-9 for earlier, later in zip(times, times[6:], strict=False))


def test_estimate_tokens_and_model_family() -> None:
    assert estimate_tokens("a" * 400) == pytest.approx(100, abs=2)
    assert estimate_tokens([{"type": "text", "text": "x" * 4000}], None) > 1000
    assert model_family("claude-sonnet-4-5-20250929") == "sonnet" and model_family("claude-opus-4-1") == "opus"
    assert model_family("claude-test") == "claude-test"


# -- the limiter on a real Redis -------------------------------------------------------------------


def limiter(url: str, limits: Limits, **options: Any) -> RateLimiter:
    scope = f"test-{random.getrandbits(48):x}"  # a fresh set of keys per test
    return RateLimiter(redis_client(url, 2.0), limits, scope=scope, **options)


def test_requests_window_admits_the_limit_then_waits_for_the_oldest(redis_url: str) -> None:
    limits = Limits(requests=3, input_tokens=0, output_tokens=0, concurrency=0, window_s=1.5)
    refusing = limiter(redis_url, limits, max_wait_s=0)
    permits = [refusing.acquire()]
    time.sleep(0.6)
    permits += [refusing.acquire(), refusing.acquire()]
    assert all(p.waited_s < 0.3 for p in permits)
    with pytest.raises(TransientProviderError, match="requests needs a wait") as info:
        refusing.acquire()
    assert 0.5 < info.value.retry_after <= 0.9  # the exact wait until the first leaves, for the task's countdown

    waiting = RateLimiter(refusing.client, limits, scope=refusing.scope, max_wait_s=5)
    fourth = waiting.acquire()
    assert fourth.granted_at - permits[0].granted_at >= 1.5
    assert fourth.waited_s < 1.0  # it slept the computed time, not a polling multiple
    assert len(waiting.snapshot().events) == 3  # the first has left the window, the other two have not


def test_a_wait_longer_than_the_max_fails_at_once(redis_url: str) -> None:
    limits = Limits(requests=1, input_tokens=0, output_tokens=0, concurrency=0, window_s=30)
    sleeps: list[float] = []
    limited = limiter(redis_url, limits, max_wait_s=5, sleep=sleeps.append)
    limited.acquire()
    with pytest.raises(TransientProviderError) as info:
        limited.acquire()
    assert sleeps == [] and 29 < info.value.retry_after <= 30


def test_token_estimates_are_reconciled_with_the_actual_usage(redis_url: str) -> None:
    limits = Limits(requests=0, input_tokens=1000, output_tokens=500, concurrency=0, window_s=60)
    limited = limiter(redis_url, limits, max_wait_s=0)
    first = limited.acquire(800, 100)
    with pytest.raises(TransientProviderError, match="input tokens"):
        limited.acquire(300, 100)  # 800 + 300 > 1000 while the first call runs
    # Cache reads do not count toward the input limit; cache writes do.
    first.release(Usage(input_tokens=100, output_tokens=40, cache_read_tokens=50_000, cache_write_tokens=50))
    [event] = limited.snapshot().events
    assert (event.input_tokens, event.output_tokens) == (150, 40)
    second = limited.acquire(300, 100)
    second.release()  # failed call: the estimates stand
    assert sorted((e.input_tokens, e.output_tokens) for e in limited.snapshot().events) == [(150, 40), (300, 100)]
    with pytest.raises(TransientProviderError, match="output tokens"):
        limited.acquire(0, 400)  # 140 + 400 > 500
    second.release(Usage(input_tokens=1))  # a second release is a no-op
    assert sorted(e.input_tokens for e in limited.snapshot().events) == [150, 300]


def test_concurrency_slots_free_on_release_and_on_lease_expiry(redis_url: str) -> None:
    limits = Limits(requests=0, input_tokens=0, output_tokens=0, concurrency=2, window_s=60)
    limited = limiter(redis_url, limits, max_wait_s=0, slot_ttl_s=1.0)
    first, _second = limited.acquire(), limited.acquire()
    with pytest.raises(TransientProviderError, match="concurrency") as info:
        limited.acquire()
    assert info.value.retry_after is None  # a release may come any time: the task backs off
    first.release()
    with limited.acquire():
        pass
    # _second and the one below are never released, as if their worker was killed: their leases end.
    limited.acquire()
    patient = RateLimiter(limited.client, limits, scope=limited.scope, max_wait_s=5, slot_ttl_s=1.0, poll_s=0.1)
    started = time.monotonic()
    patient.acquire()
    assert 0.5 < time.monotonic() - started < 2.0


def test_every_refusal_is_a_wait_for_the_pure_decision(redis_url: str) -> None:
    """The script's admission test and next_slot agree: what Redis refuses, decide() does not admit."""
    rng = random.Random(7)
    limits = Limits(requests=8, input_tokens=5000, output_tokens=2000, concurrency=3, window_s=60)
    limited = limiter(redis_url, limits)
    permits = []
    refusals = 0
    for _ in range(60):
        est_in, est_out = rng.randrange(0, 3000), rng.randrange(0, 1200)
        granted, snapshot = limited._try(f"p{rng.getrandbits(32)}", est_in, est_out)
        if granted:
            permits.append(snapshot)
        else:
            refusals += 1
            assert not decide(snapshot, limits, est_in, est_out).admitted
        if rng.random() < 0.3:
            limited.client.delete(limited.keys[3])  # calls end: slots free
    assert permits and refusals


def test_an_unreachable_redis_is_a_transient_error(tmp_path: Path) -> None:
    # No client retries (redis-py 8 retries with backoff by default): the test needs only the outcome.
    client = redis.Redis(unix_socket_path=str(tmp_path / "none.sock"), retry=Retry(NoBackoff(), 0))
    dead = RateLimiter(client, Limits(1, 0, 0, 0, 60), scope="dead")
    with pytest.raises(TransientProviderError, match="cannot reach Redis"):
        dead.acquire()


# -- the provider hook and make_provider --------------------------------------------------------------


class RecordingLimiter:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.acquired: list[tuple[int, int]] = []
        self.released: list[Usage | None] = []
        self.observed: list[int] = []

    def observe(self, headers: Any, status: int) -> None:
        self.observed.append(status)

    def acquire(self, estimated_input_tokens: int, estimated_output_tokens: int) -> Any:
        if self.refuse:
            raise TransientProviderError("rate limit (x): requests needs a wait of 9.0s", retry_after=9.0)
        self.acquired.append((estimated_input_tokens, estimated_output_tokens))
        outer = self

        class _Permit:
            def release(self, actual: Usage | None = None) -> None:
                outer.released.append(actual)

        return _Permit()


def test_the_provider_takes_a_permit_per_request_and_releases_it_with_the_usage(sample_repo: Path) -> None:
    step = AssessStep(session_id="s1", repo=str(sample_repo), requirement="Add per-user rate limiting")
    assessment = {
        "complexity": "Low", "scope": "s", "depth": "d", "risk": "r", "dependencies": "none", "preset": "feature",
        "angles": ["security"], "needs_exploration": False, "exploration_reasons": [],
    }
    with FakeAnthropic() as fake:
        fake.fail(429, retry_after="3")
        fake.reply(answer(assessment))
        recording = RecordingLimiter()
        provider = AnthropicProvider(model="claude-test", api_key="k", base_url=fake.base_url, max_tokens=777,
                                     limiter=recording, sleep=lambda s: None)  # type: ignore[arg-type]
        provider.run(step)  # the 429 is waited out and the call sent again
        # The refused request frees its permit having used nothing: a 429 (or 529) ran no model, and its
        # reserved max_tokens kept made workers wait on an output limit nothing had used.
        assert recording.released[0] == Usage()
        assert recording.observed == [429, 200]  # and every response, failed or not, teaches the limiter
        assert len(recording.acquired) == 2 and all(out == 777 and est > 100 for est, out in recording.acquired)
        [entry] = provider.usage
        assert recording.released[1] == Usage.from_api(entry)

        refused = AnthropicProvider(model="claude-test", api_key="k", base_url=fake.base_url,
                                    limiter=RecordingLimiter(refuse=True))  # type: ignore[arg-type]
        sent = len(fake.requests)
        with pytest.raises(TransientProviderError, match=r"^assess: rate limit") as info:
            refused.run(step)
        assert info.value.retry_after == 9.0 and len(fake.requests) == sent


def test_an_answer_without_token_counts_keeps_its_estimates_in_the_window(sample_repo: Path) -> None:
    """Released with zeros, a call whose answer reported no counts (a proxy that drops them) counted as nothing
    against the input and output limits, and the workers overran them."""
    step = AssessStep(session_id="s1", repo=str(sample_repo), requirement="Add per-user rate limiting")
    assessment = {
        "complexity": "Low", "scope": "s", "depth": "d", "risk": "r", "dependencies": "none", "preset": "feature",
        "angles": ["security"], "needs_exploration": False, "exploration_reasons": [],
    }
    with FakeAnthropic() as fake:
        fake.usage_reported = "none"
        fake.reply(answer(assessment))
        recording = RecordingLimiter()
        provider = AnthropicProvider(model="claude-test", api_key="k", base_url=fake.base_url,
                                     limiter=recording, sleep=lambda s: None)  # type: ignore[arg-type]
        provider.run(step)
    # Released with the same estimates as the bill's (released with none, the call kept max_tokens reserved
    # against the output limit; with zeros, it counted as nothing).
    [entry] = provider.usage
    assert entry["estimated"] is True
    assert recording.released == [Usage(input_tokens=entry["input_tokens"], output_tokens=entry["output_tokens"])]
    assert 0 < entry["output_tokens"] < 1000


def test_make_provider_builds_a_learning_limiter_capped_by_the_settings() -> None:
    settings = Settings(anthropic_api_key=SecretStr("k"), broker_url=SecretStr("redis+socket:///tmp/x.sock"),
                        model="claude-sonnet-4-5", rate_limit_rpm=120, rate_limit_window_s=10,
                        rate_limit_concurrency=4, rate_limit_max_wait_s=7, rate_limit_safety=0.9,
                        rate_limit_start_concurrency=1, rate_limit_ramp_max_concurrency=8)
    provider = make_provider("anthropic", settings)
    built = provider._limiter  # type: ignore[attr-defined]
    assert isinstance(built, RateLimiter)
    assert built.scope == "anthropic:sonnet" and built.keys[0] == "wfq:ratelimit:{anthropic:sonnet}:events"
    assert (built.limits.requests, built.limits.window_s, built.limits.concurrency) == (20, 10, 4)  # the caps
    assert built.learning == Learning(safety=0.9, start_concurrency=1, ramp_max_concurrency=8)
    assert built.max_wait_s == 7 and built.slot_ttl_s == settings.agent_time_limit_s
    assert limiter_from_settings(settings.model_copy(update={"broker_url": None}), "x") is None
    # At the defaults nothing is capped, and the limiter still learns: there is one whenever there is a broker.
    defaults = Settings(anthropic_api_key=SecretStr("k"), broker_url=SecretStr("redis+socket:///tmp/x.sock"))
    learning = limiter_from_settings(defaults, "x")
    assert learning is not None and learning.limits.unlimited and learning.learning == Learning()
    assert isinstance(make_provider("anthropic", defaults)._limiter, RateLimiter)  # type: ignore[attr-defined]
