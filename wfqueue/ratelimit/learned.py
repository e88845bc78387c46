"""Limits learned from the API: its rate-limit headers, read and turned into the limits the limiter enforces.

Anthropic answers every request (successes and errors alike) with the
organisation's limits for the model class: ``anthropic-ratelimit-requests-*``,
``-input-tokens-*``, ``-output-tokens-*`` (and ``-tokens-*``, the most
restrictive of the two), each a ``limit``, a ``remaining`` and a ``reset``
(RFC 3339, when the limit is fully replenished); a 429 adds ``retry-after``.
Its limits are token buckets: capacity = the per-minute limit, refilled
continuously. A sliding window holding at most N calls per 60 s never empties
such a bucket when N <= capacity (any span of k windows holds at most k * N,
while the bucket gives capacity + k * capacity), so pacing at a fraction
(``Learning.safety``) of the announced limit leaves a margin for network
jitter and clock skew and never draws a 429 on its own.

Everything here is pure: times are passed in. Two clocks meet: ``reset``
timestamps come from the API's clock, compared with the local wall clock
(``observed_at``); what is stored is anchored to Redis's clock (``now``), the
one the limiter's script uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from wfqueue.ratelimit.window import MINUTE_S, Bucket, Limits

__all__ = ["MAX_PAUSE_S", "LearnedState", "Learning", "ObservedLimits", "RateReading", "effective_limits", "learn",
           "parse_rate_headers"]

HEADER_PREFIX = "anthropic-ratelimit-"
FALLBACK_PAUSE_S = 1.0  # a 429 that says neither retry-after nor a reset: the time a token bucket needs to refill a bit
# The longest pause a 429 imposes: a garbled retry-after must not stop every worker for hours (a
# task that meets a longer wait is retried later anyway). The hold after it lasts at most a minute
# (or the pause): a per-minute bucket is full again by then, whatever a reset header claims.
MAX_PAUSE_S = 600.0


@dataclass(frozen=True)
class RateReading:
    """One limit as a response announced it; None where the header was missing or garbled."""

    limit: int | None = None
    remaining: int | None = None
    reset_at: float | None = None  # Unix time (API's clock) when the limit is fully replenished

    @property
    def exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0


@dataclass(frozen=True)
class ObservedLimits:
    """What one response's headers said about the rate limits."""

    requests: RateReading = field(default_factory=RateReading)
    input_tokens: RateReading = field(default_factory=RateReading)
    output_tokens: RateReading = field(default_factory=RateReading)
    tokens: RateReading = field(default_factory=RateReading)  # the most restrictive token limit
    retry_after_s: float | None = None

    @property
    def readings(self) -> tuple[RateReading, ...]:
        return self.requests, self.input_tokens, self.output_tokens, self.tokens

    @property
    def announced(self) -> bool:
        """Whether any limit was announced (a server or proxy may send none)."""
        return any(reading.limit is not None for reading in self.readings)

    def wait_s(self, now: float) -> float | None:
        """Seconds from ``now`` (Unix time) until the latest reset among exhausted limits; None if none is."""
        resets = [r.reset_at for r in self.readings if r.exhausted and r.reset_at is not None]
        return max(0.0, max(resets) - now) if resets else None


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _count(value: str | None) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _timestamp(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def parse_rate_headers(headers: Mapping[str, str]) -> ObservedLimits:
    """Read the ``anthropic-ratelimit-*`` and ``retry-after`` headers; never raises.

    ``retry-after-ms`` is preferred to ``retry-after`` (seconds) when both are
    valid. A limit of 0 is treated as missing: no real limit is zero, and
    learning it would stop every call."""
    lowered = {str(name).lower(): str(value) for name, value in (headers or {}).items()}

    def reading(kind: str) -> RateReading:
        limit = _count(lowered.get(f"{HEADER_PREFIX}{kind}-limit"))
        return RateReading(limit=limit or None, remaining=_count(lowered.get(f"{HEADER_PREFIX}{kind}-remaining")),
                           reset_at=_timestamp(lowered.get(f"{HEADER_PREFIX}{kind}-reset")))

    millis = _number(lowered.get("retry-after-ms"))
    retry_after = millis / 1000 if millis is not None else _number(lowered.get("retry-after"))
    return ObservedLimits(requests=reading("requests"), input_tokens=reading("input-tokens"),
                          output_tokens=reading("output-tokens"), tokens=reading("tokens"),
                          retry_after_s=retry_after)


@dataclass(frozen=True)
class Learning:
    """How learned limits become enforced ones.

    ``safety``: the fraction of an announced limit to pace at. ``start_concurrency``:
    calls in flight allowed before any limit was announced; it doubles with each
    successful response that announced none, up to ``ramp_max_concurrency``, and
    halves on a 429 (a server that never announces limits still gets found)."""

    safety: float = 0.95
    start_concurrency: int = 2
    ramp_max_concurrency: int = 16


@dataclass(frozen=True)
class LearnedState:
    """What every worker shares about one scope (kept in Redis as a hash of these fields).

    Limits are per minute as announced (0: none announced). Times are seconds on Redis's clock."""

    rpm: float = 0.0
    input_tpm: float = 0.0
    output_tpm: float = 0.0
    ramp: int = 0  # calls in flight before any announcement; 0: not started (the policy's start)
    pause_until: float = 0.0  # after a 429 no call is admitted before this
    tight_requests: float = 0.0  # after a 429, requests per window are held to this (0: not held) ...
    tight_until: float = 0.0  # ... until this
    bucket_level: float = 0.0  # requests the API said were left, less the calls then in flight ...
    bucket_at: float = 0.0  # ... at this time (0: never announced)

    @property
    def announced(self) -> bool:
        return self.rpm > 0 or self.input_tpm > 0 or self.output_tpm > 0

    def relaxes_at(self, now: float) -> float | None:
        """When the hold after a 429 ends (None: none in force at ``now``)."""
        return self.tight_until if self.tight_requests > 0 and now < self.tight_until else None

    def to_fields(self) -> dict[str, str]:
        return {f.name: repr(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_fields(cls, raw: Mapping[str, str]) -> LearnedState:
        """The state from Redis's hash; a missing or garbled field keeps its default."""
        values: dict[str, Any] = {}  # each field's own type: int for ``ramp``, float for the others
        for f in fields(cls):
            number = _number(raw.get(f.name))
            if number is not None:
                values[f.name] = int(number) if f.name == "ramp" else number
        return cls(**values)


def learn(state: LearnedState, observed: ObservedLimits, status: int, *, now: float, observed_at: float,
          in_window: int, window_s: float, policy: Learning, in_flight: int = 0,
          since_bucket: int = 0) -> LearnedState:
    """The state after one response with ``status``.

    ``now``: Redis's clock; ``observed_at``: the local wall clock (for the headers'
    reset times); ``in_window``: requests the limiter's window holds now; ``in_flight``: calls
    holding a permit now; ``since_bucket``: requests admitted since ``state.bucket_at``.

    - Announced limits replace the learned ones (``-tokens-`` stands in for a missing
      input or output limit). The limit headers of any response count, errors included.
    - An announced ``requests-remaining``, less the calls in flight (the API may not have
      counted them yet), becomes the request bucket's level, unless what was known already says
      less: a response that was slow to arrive must not undo what a newer one said. Callers pace
      to the bucket's refill from there.
    - A success that announced nothing doubles the ramp (while nothing was ever announced).
    - A 429 pauses every caller until its ``retry-after`` (else the latest reset of an
      exhausted limit, else ``FALLBACK_PAUSE_S``; at most ``MAX_PAUSE_S``), holds requests
      per window to what the window holds now until the latest reset the response
      announced (else one window; at most a minute or the pause), and halves the ramp.
    """
    rpm = observed.requests.limit or state.rpm
    input_tpm = observed.input_tokens.limit or observed.tokens.limit or state.input_tpm
    output_tpm = observed.output_tokens.limit or observed.tokens.limit or state.output_tpm
    learned = replace(state, rpm=float(rpm), input_tpm=float(input_tpm), output_tpm=float(output_tpm))
    if observed.requests.remaining is not None and learned.rpm > 0:
        level = float(observed.requests.remaining - in_flight)
        if state.bucket_at > 0:
            known = request_bucket(state, policy)
            if known is not None:
                level = min(level, known.available(since_bucket, now))
        learned = replace(learned, bucket_level=level, bucket_at=now)
    ramp = state.ramp or policy.start_concurrency
    if 200 <= status < 300 and not learned.announced:
        ramp = min(ramp * 2, max(policy.ramp_max_concurrency, policy.start_concurrency))
    if status != 429:
        return replace(learned, ramp=ramp)

    pause_s = observed.retry_after_s
    if pause_s is None:
        pause_s = observed.wait_s(observed_at)
    if pause_s is None:
        pause_s = FALLBACK_PAUSE_S
    pause_s = min(pause_s, MAX_PAUSE_S)
    resets = [r.reset_at - observed_at for r in observed.readings if r.reset_at is not None]
    held_s = max(min(max(resets, default=window_s), MINUTE_S), pause_s)
    tight = max(1.0, float(in_window))
    if state.tight_requests > 0 and state.tight_until > now:  # a 429 while already held: hold at least as tight
        tight = min(tight, state.tight_requests)
    return replace(learned, ramp=max(1, ramp // 2), pause_until=max(state.pause_until, now + pause_s),
                   tight_requests=tight, tight_until=max(state.tight_until, now + held_s))


def request_bucket(state: LearnedState, policy: Learning) -> Bucket | None:
    """The API's request bucket as learned, refilled at the paced rate (the API's own rate would let
    it run dry at the margin); None before a response announced its remaining requests."""
    if state.bucket_at <= 0 or state.rpm <= 0:
        return None
    paced = state.rpm * policy.safety
    return Bucket(level=state.bucket_level, at=state.bucket_at, rate=paced / MINUTE_S, capacity=paced)


def _capped(cap: float, learned: float) -> float:
    """A cap from the settings bounds a learned limit; either alone applies; 0 is neither."""
    if cap > 0 and learned > 0:
        return min(cap, learned)
    return cap or learned


def effective_limits(caps: Limits, state: LearnedState, policy: Learning, now: float) -> Limits:
    """The limits to enforce at ``now`` (Redis's clock): the learned ones at ``policy.safety``,
    capped by ``caps`` (the settings, per ``caps.window_s``; 0 is no cap), held down after a 429,
    and the ramp's concurrency until some limit was announced."""
    per_minute = MINUTE_S / caps.window_s
    limits = Limits.per_minute(
        _capped(caps.requests * per_minute, state.rpm * policy.safety),
        _capped(caps.input_tokens * per_minute, state.input_tpm * policy.safety),
        _capped(caps.output_tokens * per_minute, state.output_tpm * policy.safety),
        caps.concurrency,
        caps.window_s,
    )
    bucket = request_bucket(state, policy)
    if bucket is not None and limits.requests > 0:
        limits = replace(limits, bucket=replace(bucket, rate=min(bucket.rate, limits.requests / limits.window_s)))
    if state.relaxes_at(now) is not None:
        limits = replace(limits, requests=_capped(limits.requests, state.tight_requests))
    if not state.announced:
        limits = replace(limits, concurrency=int(_capped(caps.concurrency, state.ramp or policy.start_concurrency)))
    return limits
