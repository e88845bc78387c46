"""The sliding window's pure arithmetic: when may one more call go, and how long to sleep if not.

Algorithm: a sliding-window log. Each admitted call is an event (time, input
tokens, output tokens); a call is admitted when, counting the events of the
last ``window_s``, one more request and its estimated tokens stay within every
limit. That holds the limit over *every* window, unlike fixed windows (up to
double at a boundary). :func:`decide` turns a refusal into the exact time to
sleep; the limiter's Lua script admits exactly when :func:`next_slot` returns 0
for every limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MINUTE_S = 60.0
MIN_SLEEP_S = 0.002  # a floor so a rounding disagreement with the script cannot spin
POLL_S = 0.25  # re-ask this often while the wait depends on other workers releasing
PAUSE = "429 pause"  # the reason while every caller waits out the API's retry-after
BUCKET = "announced remaining requests"  # the reason while the API's request bucket refills
US = 1_000_000  # the script keeps time in integer microseconds: exact in a Lua double, exact as a string


@dataclass(frozen=True)
class Bucket:
    """The API's request bucket as responses announced it: ``level`` requests were left at ``at``
    (seconds, Redis's clock), refilled at ``rate`` per second up to ``capacity``.

    A sliding window alone assumes the API's bucket was full when the window began; the
    bucket says how full it really is (other clients of the organisation draw on it too),
    so callers pace at the refill rate instead of bursting into 429s."""

    level: float
    at: float
    rate: float
    capacity: float

    def available(self, admitted_since: int, now: float) -> float:
        """Requests left at ``now``, ``admitted_since`` having gone since ``at``. Refill is capped before the
        calls are taken off, which never over-counts (calls taken while the bucket was full refill sooner)."""
        return min(self.capacity, self.level + max(0.0, now - self.at) * self.rate) - admitted_since

    def wait_s(self, admitted_since: int, now: float) -> float:
        """Seconds until one more request fits, ``admitted_since`` requests having gone since ``at``."""
        if self.rate <= 0:
            return 0.0
        available = self.available(admitted_since, now)
        return 0.0 if available >= 1 - 1e-9 else (1 - available) / self.rate  # 1e-9: no wait below rounding


@dataclass(frozen=True)
class Limits:
    """Limits per window (not per minute): ``requests`` may be fractional; 0 means unlimited.

    ``bucket``: the API's announced request bucket, when one was learned (see :class:`Bucket`)."""

    requests: float
    input_tokens: float
    output_tokens: float
    concurrency: int
    window_s: float
    bucket: Bucket | None = None

    @classmethod
    def per_minute(cls, rpm: float, input_tpm: float, output_tpm: float, concurrency: int,
                   window_s: float = MINUTE_S) -> Limits:
        """Scale per-minute limits to ``window_s`` (60 rpm over 6 s: 6 per 6 s).

        A window shorter than one request's share (60 s / rpm) would admit a whole
        request per window and exceed the rate, so it is widened to that share."""
        if rpm > 0:
            window_s = max(window_s, MINUTE_S / rpm)
        scale = window_s / MINUTE_S
        return cls(requests=round(rpm * window_s / MINUTE_S, 9), input_tokens=round(input_tpm * scale, 9),
                   output_tokens=round(output_tpm * scale, 9), concurrency=concurrency, window_s=window_s)

    @property
    def unlimited(self) -> bool:
        return not (self.requests > 0 or self.input_tokens > 0 or self.output_tokens > 0 or self.concurrency > 0)


@dataclass(frozen=True)
class Event:
    """One admitted call in the window: when (seconds, Redis clock) and its (estimated or actual) tokens."""

    at: float
    input_tokens: float = 0
    output_tokens: float = 0


@dataclass(frozen=True)
class Snapshot:
    """What the limiter held at ``now``: events in the window, lease ends of calls in flight, a pause."""

    now: float
    events: tuple[Event, ...] = ()
    held: tuple[float, ...] = ()
    paused_until: float = 0.0  # no call before this (after a 429), seconds on the same clock as ``now``


@dataclass(frozen=True)
class Decision:
    """When a call may go.

    ``wait_s``: until every limit admits it if nothing else happens (0: now).
    ``floor_s``: the part no release can shorten (requests; tokens when no call is in flight).
    ``sleep_s``: how long to sleep before asking again (the wait, or a poll while releases may come).
    """

    wait_s: float
    floor_s: float
    sleep_s: float
    reason: str

    @property
    def admitted(self) -> bool:
        return self.wait_s <= 0

    def at_most(self, seconds: float) -> Decision:
        """This decision for limits that loosen in ``seconds``: no wait, certain or not, lasts beyond that."""
        seconds = max(0.0, seconds)
        return Decision(wait_s=min(self.wait_s, seconds), floor_s=min(self.floor_s, seconds),
                        sleep_s=min(self.sleep_s, seconds), reason=self.reason)


def next_slot(events: Iterable[tuple[float, float]], now: float, limit: float, window_s: float,
              cost: float = 1.0) -> float:
    """Seconds until ``cost`` more fits in a sliding window holding ``events`` (time, cost); 0 if now.

    An event counts while ``time > now - window_s``. A cost above the whole limit is
    clamped to it, so an oversized call waits for an empty window instead of never going.
    ``limit <= 0`` is unlimited.
    """
    if limit <= 0:
        return 0.0
    cost = min(cost, limit)
    live = sorted((at, c) for at, c in events if at > now - window_s)
    used = sum(c for _, c in live)
    if used + cost <= limit:
        return 0.0
    for at, c in live:  # oldest first: each expiry frees its cost
        used -= c
        if used + cost <= limit:
            return max(0.0, at + window_s - now)
    return window_s  # unreachable: with every event expired, used + cost <= limit by the clamp


def decide(snapshot: Snapshot, limits: Limits, estimated_input_tokens: float = 0,
           estimated_output_tokens: float = 0, poll_s: float = POLL_S) -> Decision:
    """Combine every limit into one Decision for a call with these estimates."""
    now, events, window = snapshot.now, snapshot.events, limits.window_s
    in_flight = sorted(end for end in snapshot.held if end > now)
    waits = {
        "requests": next_slot(((e.at, 1.0) for e in events), now, limits.requests, window, 1.0),
        "input tokens": next_slot(((e.at, e.input_tokens) for e in events), now, limits.input_tokens, window,
                                  estimated_input_tokens),
        "output tokens": next_slot(((e.at, e.output_tokens) for e in events), now, limits.output_tokens, window,
                                   estimated_output_tokens),
        "concurrency": 0.0,
        PAUSE: max(0.0, snapshot.paused_until - now),
        BUCKET: 0.0,
    }
    if limits.bucket is not None:
        since = sum(1 for e in events if e.at > limits.bucket.at)
        waits[BUCKET] = limits.bucket.wait_s(since, now)
    if limits.concurrency > 0 and len(in_flight) >= limits.concurrency:
        # The lease that must end for a slot to free; a release may come sooner.
        waits["concurrency"] = max(0.0, in_flight[len(in_flight) - limits.concurrency] - now)
    reason = max(waits, key=lambda name: waits[name])
    wait = waits[reason]
    # A release lowers a token estimate to the actual count, so with calls in flight a token wait may end early.
    certain = ["requests", PAUSE, BUCKET] + ([] if in_flight else ["input tokens", "output tokens"])
    floor = max(waits[name] for name in certain)
    sleep = wait if wait <= floor else max(floor, min(wait, poll_s))
    return Decision(wait_s=wait, floor_s=floor, sleep_s=sleep, reason=reason if wait > 0 else "")


def estimate_tokens(*parts: Any) -> int:
    """A rough token count of request parts: UTF-8 bytes of their JSON / 4.

    Over-counts a cached prefix (cache reads do not count against the input
    limit), under-counts CJK text a little; the release corrects either."""
    payload = json.dumps([p for p in parts if p is not None], ensure_ascii=False, separators=(",", ":"), default=str)
    return len(payload.encode("utf-8")) // 4 + 1


def model_family(model: str) -> str:
    """Anthropic pools limits per model class (all Sonnet 4.x share one): the class, else the model."""
    for family in ("opus", "sonnet", "haiku"):
        if family in model:
            return family
    return model
