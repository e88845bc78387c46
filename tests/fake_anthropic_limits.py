"""Rate limits of the local Messages API server, enforced and announced as Anthropic does.

Each limit is a token bucket: capacity = the per-minute limit, refilled continuously at
limit/60 per second. A request is admitted when the requests bucket holds one request and
neither token bucket is in debt; it takes one request at once, and its input tokens
(uncached input + cache writes: cache reads do not count) and output tokens when its
answer is made, so a large answer can leave a bucket in debt until it refills.
Every response carries the state as ``anthropic-ratelimit-*`` headers, ``reset`` being
the RFC 3339 UTC time at which that bucket is full again (rounded up to the second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["Limiter", "RateLimits"]


@dataclass(frozen=True)
class RateLimits:
    """Per-minute limits; the defaults are those of a large organisation, so nothing is refused.
    ``initial`` is the fraction of each bucket available at the first request (below 1: other clients
    of the organisation have spent the rest), so that even a short run meets the limits; the buckets
    refill from then on."""

    requests_per_min: int = 4_000
    input_tokens_per_min: int = 2_000_000
    output_tokens_per_min: int = 400_000
    initial: float = 1.0


@dataclass
class Bucket:
    limit: int
    level: float
    updated: float | None = None  # None: no request yet, the bucket starts filling at the first


    @property
    def rate(self) -> float:
        return self.limit / 60.0

    def refill(self, now: float) -> None:
        if self.updated is not None:
            self.level = min(float(self.limit), self.level + max(0.0, now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, amount: float) -> float:
        """Seconds until the bucket holds ``amount`` (0 when it does)."""
        return max(0.0, (amount - self.level) / self.rate)

    def headers(self, name: str, now: float) -> dict[str, str]:
        full_at = now + max(0.0, self.limit - self.level) / self.rate
        return {f"anthropic-ratelimit-{name}-limit": str(self.limit),
                f"anthropic-ratelimit-{name}-remaining": str(max(0, math.floor(self.level))),
                f"anthropic-ratelimit-{name}-reset": rfc3339(math.ceil(full_at))}


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Limiter:
    """The three buckets of one organisation; not thread safe (the server calls it under its lock)."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self.requests = Bucket(limits.requests_per_min, limits.requests_per_min * limits.initial)
        self.input = Bucket(limits.input_tokens_per_min, limits.input_tokens_per_min * limits.initial)
        self.output = Bucket(limits.output_tokens_per_min, limits.output_tokens_per_min * limits.initial)

    def admit(self, now: float) -> tuple[float, str] | None:
        """Take one request, or (seconds to wait, which limit) when the request must be refused."""
        for bucket in (self.requests, self.input, self.output):
            bucket.refill(now)
        waits = [(self.requests.wait_for(1), f"{self.limits.requests_per_min} requests per minute"),
                 (self.input.wait_for(0), f"{self.limits.input_tokens_per_min} input tokens per minute"),
                 (self.output.wait_for(0), f"{self.limits.output_tokens_per_min} output tokens per minute")]
        wait, which = max(waits)
        if wait > 0:
            return wait, which
        self.requests.level -= 1
        return None

    def spend(self, input_tokens: int, output_tokens: int) -> None:
        self.input.level -= input_tokens
        self.output.level -= output_tokens

    def headers(self, now: float) -> dict[str, str]:
        for bucket in (self.requests, self.input, self.output):
            bucket.refill(now)
        # "tokens" is whichever token limit is the most restrictive right now.
        tightest = min((self.input, self.output), key=lambda b: b.level / b.limit)
        return {**self.requests.headers("requests", now), **self.input.headers("input-tokens", now),
                **self.output.headers("output-tokens", now), **tightest.headers("tokens", now)}
