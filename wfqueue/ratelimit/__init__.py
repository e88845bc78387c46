"""One rate limit for every worker on every machine, kept in Redis and learned from the API.

Anthropic limits an organisation per model class: requests, input tokens and
output tokens per minute. Celery's ``rate_limit`` is per worker, so the limit
lives in Redis, next to the queues every worker already reaches.

- :mod:`.window`: the sliding-window arithmetic (pure). Token counts are known
  only after a call, so a call reserves an estimate (input: the request's size;
  output: ``max_tokens``, as Anthropic itself estimates output) and its permit's
  release replaces the estimate by the actual counts. Calls in flight hold a
  concurrency slot with a lease (``slot_ttl_s``): a killed worker's slot frees
  itself when the lease ends.
- :mod:`.learned`: the API's ``anthropic-ratelimit-*`` headers and how they
  become the enforced limits (pure): paced at a safety fraction, capped by the
  settings, held down after a 429, a ramp of concurrency before any limit was
  announced.
- :mod:`.limiter`: :class:`RateLimiter` (``acquire`` before each call,
  ``observe`` after each response) and :func:`limiter_from_settings`.
"""

from wfqueue.ratelimit.learned import (
    MAX_PAUSE_S,
    LearnedState,
    Learning,
    ObservedLimits,
    RateReading,
    effective_limits,
    learn,
    parse_rate_headers,
)
from wfqueue.ratelimit.limiter import LEARNED_TTL_S, Permit, RateLimiter, limiter_from_settings
from wfqueue.ratelimit.window import (
    PAUSE,
    Decision,
    Event,
    Limits,
    Snapshot,
    decide,
    estimate_tokens,
    model_family,
    next_slot,
)

__all__ = [
    "LEARNED_TTL_S", "MAX_PAUSE_S", "PAUSE", "Decision", "Event", "LearnedState", "Learning", "Limits",
    "ObservedLimits", "Permit", "RateLimiter", "RateReading", "Snapshot", "decide", "effective_limits",
    "estimate_tokens", "learn", "limiter_from_settings", "model_family", "next_slot", "parse_rate_headers",
]
