"""Limits learned from the API, as pure logic: the headers, the ramp, the 429 tightening, the effective limits,
and eight simulated callers against a simulated token-bucket server (injected clocks, no sleeps)."""

from __future__ import annotations

import heapq
import itertools
import random
from datetime import UTC, datetime

import pytest

from wfqueue.ratelimit import (
    MAX_PAUSE_S,
    PAUSE,
    Decision,
    Event,
    LearnedState,
    Learning,
    Limits,
    ObservedLimits,
    RateReading,
    Snapshot,
    decide,
    effective_limits,
    learn,
    parse_rate_headers,
)

EPOCH = 1_790_000_000.0  # Unix time of the simulated runs


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def headers(kind: str, limit: int, remaining: int, reset: float) -> dict[str, str]:
    return {f"anthropic-ratelimit-{kind}-limit": str(limit), f"anthropic-ratelimit-{kind}-remaining": str(remaining),
            f"anthropic-ratelimit-{kind}-reset": rfc3339(reset)}


# -- the headers -------------------------------------------------------------------------------------


def test_parse_rate_headers_reads_every_limit_and_retry_after() -> None:
    announced = {**headers("requests", 120, 7, EPOCH + 3.5), **headers("input-tokens", 40_000, 0, EPOCH + 12),
                 **headers("output-tokens", 8_000, 8_000, EPOCH), **headers("tokens", 48_000, 9, EPOCH + 1),
                 "Retry-After": "4", "content-type": "application/json"}
    observed = parse_rate_headers({name.title(): value for name, value in announced.items()})  # any case
    assert observed.requests == RateReading(limit=120, remaining=7, reset_at=EPOCH + 3.5)
    assert observed.input_tokens == RateReading(40_000, 0, EPOCH + 12) and observed.input_tokens.exhausted
    assert observed.output_tokens == RateReading(8_000, 8_000, EPOCH) and not observed.output_tokens.exhausted
    assert observed.tokens.limit == 48_000 and observed.retry_after_s == 4.0 and observed.announced
    # Fractional seconds and offsets are RFC 3339 too.
    assert parse_rate_headers({"anthropic-ratelimit-requests-reset": "2026-11-23T17:00:00.250+01:00"}
                              ).requests.reset_at == datetime(2026, 11, 23, 16, 0, 0, 250_000, UTC).timestamp()
    assert parse_rate_headers({"retry-after-ms": "1500", "retry-after": "2"}).retry_after_s == 1.5


def test_missing_or_garbled_headers_are_none_never_an_error() -> None:
    assert parse_rate_headers({}) == ObservedLimits() and not ObservedLimits().announced
    assert parse_rate_headers(None) == ObservedLimits()  # type: ignore[arg-type]  # no response at all
    garbled = parse_rate_headers({
        "anthropic-ratelimit-requests-limit": "lots", "anthropic-ratelimit-requests-remaining": "-3",
        "anthropic-ratelimit-requests-reset": "tomorrow", "anthropic-ratelimit-input-tokens-limit": "0",
        "anthropic-ratelimit-output-tokens-limit": "nan", "anthropic-ratelimit-tokens-reset": "",
        "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT", "retry-after-ms": "inf",
    })
    assert garbled == ObservedLimits()  # a limit of 0 is no limit: learning it would stop every call


def test_wait_s_is_until_the_latest_reset_of_an_exhausted_limit() -> None:
    assert parse_rate_headers(headers("requests", 50, 3, EPOCH + 30)).wait_s(EPOCH) is None  # nothing exhausted
    observed = parse_rate_headers({**headers("requests", 50, 0, EPOCH + 2), **headers("input-tokens", 9, 0, EPOCH + 7),
                                   **headers("output-tokens", 9, 5, EPOCH + 40)})
    assert observed.wait_s(EPOCH) == 7.0  # the output limit has room: its later reset does not count
    assert observed.wait_s(EPOCH + 10) == 0.0  # already past
    no_reset = ObservedLimits(requests=RateReading(limit=5, remaining=0))
    assert no_reset.wait_s(EPOCH) is None


# -- learning ---------------------------------------------------------------------------------------

POLICY = Learning(safety=0.95, start_concurrency=2, ramp_max_concurrency=16)
WINDOW = Limits.per_minute(0, 0, 0, 0, window_s=60)  # no caps


def observe(state: LearnedState, status: int, observed: ObservedLimits | None = None, *, now: float = EPOCH,
            in_window: int = 0) -> LearnedState:
    return learn(state, observed or ObservedLimits(), status, now=now, observed_at=now, in_window=in_window,
                 window_s=60.0, policy=POLICY)


def test_before_any_limit_is_announced_concurrency_ramps_up_and_a_429_halves_it() -> None:
    state = LearnedState()
    assert effective_limits(WINDOW, state, POLICY, EPOCH).concurrency == 2
    seen = []
    for _ in range(5):
        state = observe(state, 200)
        seen.append(effective_limits(WINDOW, state, POLICY, EPOCH).concurrency)
    assert seen == [4, 8, 16, 16, 16]  # doubles per success without headers, up to the ramp's end
    assert observe(state, 500).ramp == 16  # an error is no success
    state = observe(state, 429)
    assert effective_limits(WINDOW, state, POLICY, EPOCH).concurrency == 8
    capped = Limits.per_minute(0, 0, 0, 3, window_s=60)
    assert effective_limits(capped, state, POLICY, EPOCH).concurrency == 3  # the setting caps the ramp
    # The first announcement ends the ramp: the settings' cap alone remains (none here).
    announced = observe(state, 200, parse_rate_headers(headers("requests", 120, 119, EPOCH + 0.5)))
    assert effective_limits(WINDOW, announced, POLICY, EPOCH).concurrency == 0


def test_announced_limits_are_paced_at_the_safety_fraction_and_capped_by_the_settings() -> None:
    announced = {**headers("requests", 120, 80, EPOCH + 20), **headers("input-tokens", 40_000, 1, EPOCH + 1),
                 **headers("output-tokens", 8_000, 8_000, EPOCH)}
    state = observe(LearnedState(), 200, parse_rate_headers(announced))
    assert (state.rpm, state.input_tpm, state.output_tpm) == (120, 40_000, 8_000)
    limits = effective_limits(WINDOW, state, POLICY, EPOCH)
    assert (limits.requests, limits.input_tokens, limits.output_tokens, limits.window_s) == (114, 38_000, 7_600, 60)
    # A shorter window scales them; settings cap them; a cap alone applies before anything is learned.
    short = effective_limits(Limits.per_minute(100, 0, 5_000, 4, window_s=10), state, POLICY, EPOCH)
    assert (short.requests, short.input_tokens, short.output_tokens, short.concurrency) == (
        pytest.approx(100 / 6), pytest.approx(38_000 / 6), pytest.approx(5_000 / 6), 4)
    before = effective_limits(Limits.per_minute(50, 0, 0, 0, window_s=60), LearnedState(), POLICY, EPOCH)
    assert (before.requests, before.input_tokens) == (50, 0)
    # A later response (errors too) updates what it announces and keeps the rest.
    lowered = observe(state, 529, parse_rate_headers(headers("requests", 60, 10, EPOCH)))
    assert (lowered.rpm, lowered.input_tpm) == (60, 40_000)
    # The combined token limit stands in where a specific one is missing.
    combined = observe(LearnedState(), 200, parse_rate_headers(headers("tokens", 30_000, 5, EPOCH)))
    assert (combined.input_tpm, combined.output_tpm) == (30_000, 30_000)


def test_a_429_pauses_everyone_and_holds_requests_to_what_the_window_holds() -> None:
    state = observe(LearnedState(), 200, parse_rate_headers(headers("requests", 120, 50, EPOCH)))
    refused = {**headers("requests", 120, 0, EPOCH + 20), "retry-after": "3"}
    tight = observe(state, 429, parse_rate_headers(refused), now=EPOCH + 1, in_window=40)
    assert tight.pause_until == EPOCH + 4  # retry-after wins over the reset
    assert (tight.tight_requests, tight.tight_until) == (40, EPOCH + 20)  # until the announced reset
    assert effective_limits(WINDOW, tight, POLICY, EPOCH + 19.9).requests == 40
    assert effective_limits(WINDOW, tight, POLICY, EPOCH + 20).requests == 114  # the reset came: learned again

    # Without retry-after the exhausted limit's reset is the pause; without either, a short fallback.
    by_reset = observe(state, 429, parse_rate_headers(headers("requests", 120, 0, EPOCH + 6)), in_window=3)
    assert by_reset.pause_until == EPOCH + 6
    bare = observe(state, 429, now=EPOCH + 1, in_window=0)
    assert bare.pause_until == EPOCH + 2 and bare.tight_requests == 1  # never 0, which would mean unlimited
    assert bare.tight_until == EPOCH + 61  # no reset announced: one window

    # Absurd headers cannot stop everyone for long: the pause is bounded, the hold lasts a minute at most.
    absurd = observe(state, 429, parse_rate_headers({**headers("requests", 120, 0, EPOCH + 86_400),
                                                     "retry-after": "99999"}))
    assert (absurd.pause_until, absurd.tight_until) == (EPOCH + MAX_PAUSE_S, EPOCH + MAX_PAUSE_S)
    long_reset = observe(state, 429, parse_rate_headers(headers("requests", 120, 3, EPOCH + 86_400)))
    assert (long_reset.pause_until, long_reset.tight_until) == (EPOCH + 1, EPOCH + 60)

    # A second 429 while held keeps the tighter hold and the later pause.
    second = {**headers("requests", 120, 0, EPOCH + 15), "retry-after": "1"}
    again = observe(tight, 429, parse_rate_headers(second), now=EPOCH + 2, in_window=55)
    assert (again.tight_requests, again.pause_until, again.tight_until) == (40, EPOCH + 4, EPOCH + 20)


def test_the_pause_is_a_certain_wait_for_the_decision() -> None:
    limits = Limits.per_minute(120, 0, 0, 0)
    paused = decide(Snapshot(now=EPOCH, held=(EPOCH + 100,), paused_until=EPOCH + 2.5), limits)
    assert (paused.wait_s, paused.floor_s, paused.sleep_s, paused.reason) == (2.5, 2.5, 2.5, PAUSE)
    assert decide(Snapshot(now=EPOCH, paused_until=EPOCH - 1), limits).admitted
    # Limits that loosen sooner (a hold after a 429 ending) shorten every wait to that.
    assert paused.at_most(1.0) == Decision(wait_s=1.0, floor_s=1.0, sleep_s=1.0, reason=PAUSE)


def test_announced_remaining_requests_pace_calls_to_the_refill() -> None:
    """The API says 3 requests are left of 120/min while 1 call is in flight: 2 may go now, then one every
    60 / (120 x 0.95) s, however empty the sliding window is."""
    state = observe(LearnedState(), 200, parse_rate_headers(headers("requests", 120, 3, EPOCH + 60)))
    state = learn(state, parse_rate_headers(headers("requests", 120, 3, EPOCH + 60)), 200, now=EPOCH,
                  observed_at=EPOCH, in_window=0, window_s=60.0, policy=POLICY, in_flight=1)
    assert (state.bucket_level, state.bucket_at) == (2.0, EPOCH)
    limits = effective_limits(Limits.per_minute(0, 0, 0, 0), state, POLICY, EPOCH)
    assert limits.bucket is not None and limits.bucket.rate == pytest.approx(120 * 0.95 / 60)
    two_sent = Snapshot(now=EPOCH + 0.1, events=(Event(EPOCH + 0.05), Event(EPOCH + 0.06)))
    waited = decide(two_sent, limits)
    assert not waited.admitted and waited.reason == "announced remaining requests"
    assert waited.floor_s == pytest.approx(1 / limits.bucket.rate - 0.1)
    assert decide(Snapshot(now=EPOCH + 0.1, events=(Event(EPOCH + 0.05),)), limits).admitted
    assert LearnedState.from_fields(state.to_fields()) == state


def test_learned_state_survives_redis_round_trips_and_garbage() -> None:
    state = LearnedState(rpm=120, input_tpm=4e5, ramp=8, pause_until=EPOCH + 0.123456, tight_requests=3,
                         tight_until=EPOCH + 9)
    assert LearnedState.from_fields(state.to_fields()) == state
    assert LearnedState.from_fields({"rpm": "x", "ramp": "4", "other": "1"}) == LearnedState(ramp=4)


# -- eight callers against a token-bucket server, simulated ----------------------------------------------


class TokenBucketServer:
    """Announces ``capacity`` requests per minute; refills continuously; answers 429 when empty."""

    def __init__(self, capacity: float, refill_per_s: float, initial: float = 1.0) -> None:
        self.capacity, self.refill, self.level, self.at = capacity, refill_per_s, capacity * initial, 0.0

    def handle(self, now: float) -> tuple[int, dict[str, str]]:
        self.level = min(self.capacity, self.level + (now - self.at) * self.refill)
        self.at = now
        status = 200 if self.level >= 1 else 429
        if status == 200:
            self.level -= 1
        announced = headers("requests", int(self.capacity), int(self.level),
                            EPOCH + now + (self.capacity - self.level) / self.refill)
        if status == 429:
            announced["retry-after"] = f"{(1 - self.level) / self.refill:.3f}"
        return status, announced


def simulate_eight_callers(initial: float, seed: int = 11) -> tuple[list[int], float]:
    """Eight callers against a server announcing 120/min (bucket of 120, 2/s, ``initial`` of it left at the
    start), settings at their defaults, for three minutes: (every status the server answered, duration).

    Each caller runs the limiter's own pure steps: effective_limits -> decide -> (call) -> learn,
    with a shared state standing in for Redis, and latencies drawn at random (the request reaches
    the server at a random point of its round trip)."""
    rng = random.Random(seed)
    caps = Limits.per_minute(0, 0, 0, 0, window_s=60)  # the settings' defaults
    policy = Learning()
    server = TokenBucketServer(capacity=120, refill_per_s=2, initial=initial)
    state, events, held = LearnedState(), list[Event](), dict[int, float]()
    statuses: list[int] = []
    # (time, sequence, caller, the response being received or None for an attempt to get a permit)
    queue: list[tuple[float, int, int, tuple[int, dict[str, str]] | None]] = [(0.0, n, n, None) for n in range(8)]
    sequence = itertools.count(8)
    duration = 180.0
    while queue:
        now, _, caller, response = heapq.heappop(queue)
        if now >= duration:
            continue
        if response is None:
            limits = effective_limits(caps, state, policy, now)
            snapshot = Snapshot(now=now, events=tuple(e for e in events if e.at > now - limits.window_s),
                                held=tuple(held.values()), paused_until=state.pause_until)
            decision = decide(snapshot, limits)
            if not decision.admitted:
                heapq.heappush(queue, (now + decision.sleep_s, next(sequence), caller, None))
                continue
            events.append(Event(now))
            held[caller] = now + 360
            round_trip = rng.uniform(0.05, 3.0)
            answered = server.handle(now + rng.uniform(0, round_trip))
            statuses.append(answered[0])
            heapq.heappush(queue, (now + round_trip, next(sequence), caller, answered))
        else:
            status, announced = response
            del held[caller]
            in_window = sum(1 for e in events if e.at > now - caps.window_s)
            since_bucket = sum(1 for e in events if e.at > state.bucket_at)
            state = learn(state, parse_rate_headers(announced), status, now=now, observed_at=EPOCH + now,
                          in_window=in_window, window_s=caps.window_s, policy=policy, in_flight=len(held),
                          since_bucket=since_bucket)
            heapq.heappush(queue, (now, next(sequence), caller, None))
    return statuses, duration


@pytest.mark.parametrize("initial", [1.0, 0.1])
def test_eight_callers_at_default_settings_reach_the_announced_rate_without_a_429(initial: float) -> None:
    """The target, with the API's bucket full at the start and with other clients having spent 90 % of it:
    the announced remaining requests pace the callers to the refill rate instead of a burst into 429s."""
    statuses, duration = simulate_eight_callers(initial)
    assert statuses.count(429) == 0
    per_minute = statuses.count(200) / (duration / 60)
    assert per_minute >= 0.90 * 120, f"{per_minute:.1f}/min"
