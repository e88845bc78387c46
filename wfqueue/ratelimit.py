"""One rate limit for every worker on every machine, kept in Redis.

Anthropic limits an organisation per model class: requests, input tokens and
output tokens per minute. Celery's ``rate_limit`` is per worker, so the limit
lives in Redis, next to the queues every worker already reaches.

Algorithm: a sliding-window log. Each admitted call is an event (time, input
tokens, output tokens); a call is admitted when, counting the events of the
last ``window_s``, one more request and its estimated tokens stay within every
limit. That holds the limit over *every* window, unlike fixed windows (up to
double at a boundary). Token counts are known only after a call, so a call
reserves an estimate (input: the request's size; output: ``max_tokens``, as
Anthropic itself estimates output) and its permit's release replaces the
estimate by the actual counts. Calls in flight are also holders with a lease
(``slot_ttl_s``) for the concurrency limit: a killed worker's slot frees itself
when the lease ends.

Why no library: ``limits`` (moving window) and ``pyrate-limiter`` store one
Redis entry per unit of cost, so a 200k-token call would write 200k entries;
neither can refund an over-estimate or hold a concurrency slot, and ``limits``
pins ``redis<8`` (we run redis-py 8). What is here instead is one Lua script
for the check-and-record (atomic; Redis's clock, so machines with skewed
clocks share one timeline) and a pure function, :func:`decide`, that turns a
refusal into the exact time to sleep. The script's admission test is the same
arithmetic as :func:`next_slot` returning 0.

Keys (one set per scope, a Redis Cluster hash tag keeps them on one node):
``wfq:ratelimit:{scope}:events`` (zset id -> time, microseconds), ``:in`` and
``:out`` (hash id -> tokens), ``:held`` (zset id -> lease end). All expire
when idle.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

import redis

from wfqueue.errors import TransientProviderError
from wfqueue.settings import Settings
from wfqueue.state import redis_client
from wfqueue.usage import Usage

__all__ = [
    "Decision", "Event", "Limits", "Permit", "RateLimiter", "Snapshot", "decide", "estimate_tokens",
    "limiter_from_settings", "model_family", "next_slot",
]

log = logging.getLogger(__name__)

MINUTE_S = 60.0
MIN_SLEEP_S = 0.002  # a floor so a rounding disagreement with the script cannot spin
POLL_S = 0.25  # re-ask this often while the wait depends on other workers releasing
US = 1_000_000  # the script keeps time in integer microseconds: exact in a Lua double, exact as a string


@dataclass(frozen=True)
class Limits:
    """Limits per window (not per minute): ``requests`` may be fractional; 0 means unlimited."""

    requests: float
    input_tokens: float
    output_tokens: float
    concurrency: int
    window_s: float

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
    """What the limiter held at ``now``: events in the window and lease ends of calls in flight."""

    now: float
    events: tuple[Event, ...] = ()
    held: tuple[float, ...] = ()


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


# -- the pure decision ---------------------------------------------------------------------------


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
    }
    if limits.concurrency > 0 and len(in_flight) >= limits.concurrency:
        # The lease that must end for a slot to free; a release may come sooner.
        waits["concurrency"] = max(0.0, in_flight[len(in_flight) - limits.concurrency] - now)
    reason = max(waits, key=lambda name: waits[name])
    wait = waits[reason]
    # A release lowers a token estimate to the actual count, so with calls in flight a token wait may end early.
    certain = ["requests"] + ([] if in_flight else ["input tokens", "output tokens"])
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


# -- Redis ----------------------------------------------------------------------------------------

# KEYS: events, in, out, held. ARGV: id, window_us, requests, input, output, concurrency,
# estimated input, estimated output, lease_us. Admission is next_slot(...) == 0 for each limit.
ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id, window = ARGV[1], tonumber(ARGV[2])
local req, lim_in, lim_out, conc = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local est_in, est_out, lease = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local function us(x) return string.format('%d', x) end
local horizon = us(now - window)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon)
for i = 1, #expired, 500 do
  local chunk = {unpack(expired, i, math.min(i + 499, #expired))}
  redis.call('HDEL', KEYS[2], unpack(chunk))
  redis.call('HDEL', KEYS[3], unpack(chunk))
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', horizon)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', us(now))
local function fits(used, cost, limit)
  return limit <= 0 or used + math.min(cost, limit) <= limit
end
local function total(key)
  local sum = 0
  for _, v in ipairs(redis.call('HVALS', key)) do sum = sum + tonumber(v) end
  return sum
end
local ok = fits(redis.call('ZCARD', KEYS[1]), 1, req)
if ok and lim_in > 0 then ok = fits(total(KEYS[2]), est_in, lim_in) end
if ok and lim_out > 0 then ok = fits(total(KEYS[3]), est_out, lim_out) end
if ok and conc > 0 then ok = redis.call('ZCARD', KEYS[4]) < conc end
if not ok then
  return {0, us(now), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[2]),
          redis.call('HGETALL', KEYS[3]), redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES')}
end
redis.call('ZADD', KEYS[1], us(now), id)
redis.call('HSET', KEYS[2], id, ARGV[7])
redis.call('HSET', KEYS[3], id, ARGV[8])
redis.call('ZADD', KEYS[4], us(now + lease), id)
local keep = us(window / 1000 + 1000)
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], keep) end
redis.call('PEXPIRE', KEYS[4], us(lease / 1000 + 1000))
return {1, us(now)}
"""

# KEYS as above. ARGV: id, "1" when actual counts follow, input, output. An event already out of the
# window is left alone (writing its counts would leave orphans in the hashes).
RELEASE_LUA = """
if ARGV[2] == '1' and redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
end
return redis.call('ZREM', KEYS[4], ARGV[1])
"""


def _snapshot(now_us: str, events: list[str], tokens_in: list[str], tokens_out: list[str],
              held: list[str]) -> Snapshot:
    ins, outs = dict(zip(tokens_in[::2], tokens_in[1::2])), dict(zip(tokens_out[::2], tokens_out[1::2]))
    return Snapshot(
        now=int(now_us) / US,
        events=tuple(Event(float(score) / US, float(ins.get(member, 0)), float(outs.get(member, 0)))
                     for member, score in zip(events[::2], events[1::2])),
        held=tuple(float(score) / US for score in held[1::2]),
    )


@dataclass
class Permit:
    """The right to make one call. Release it when the call ends, with the actual usage if known."""

    limiter: RateLimiter
    permit_id: str
    granted_at: float  # seconds, Redis's clock
    waited_s: float
    estimated_input_tokens: int
    estimated_output_tokens: int
    released: bool = field(default=False)

    def release(self, actual: Usage | None = None) -> None:
        """Free the concurrency slot; with ``actual``, replace the estimates in the window by the real counts.

        Without it (the call failed) the estimates stand: whether the API counted
        a failed call is unknown, and over-counting is the safe side."""
        if self.released:
            return
        self.released = True
        self.limiter._release(self.permit_id, actual)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RateLimiter:
    """Blocks callers so all of them together stay within ``limits``; see the module docstring."""

    def __init__(self, client: redis.Redis, limits: Limits, *, scope: str = "default", max_wait_s: float = 60.0,
                 slot_ttl_s: float = 360.0, poll_s: float = POLL_S, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.limits = limits
        self.scope = scope
        self.max_wait_s = max_wait_s
        self.slot_ttl_s = slot_ttl_s
        self.poll_s = poll_s
        self._sleep = sleep
        self._clock = clock
        tag = "wfq:ratelimit:{" + scope + "}:"
        self.keys = [tag + "events", tag + "in", tag + "out", tag + "held"]
        self._acquire_script = client.register_script(ACQUIRE_LUA)
        self._release_script = client.register_script(RELEASE_LUA)

    def acquire(self, estimated_input_tokens: int = 0, estimated_output_tokens: int = 0) -> Permit:
        """Wait for a permit, up to ``max_wait_s``; past that raise TransientProviderError so the task retries.

        A wait that no release can shorten is known at once: if it is longer than the
        time left, the error comes immediately, carrying that wait as ``retry_after``."""
        started = self._clock()
        deadline = started + self.max_wait_s
        permit_id = uuid.uuid4().hex
        est_in, est_out = max(0, int(estimated_input_tokens)), max(0, int(estimated_output_tokens))
        while True:
            granted, snapshot = self._try(permit_id, est_in, est_out)
            if granted:
                return Permit(self, permit_id, snapshot.now, self._clock() - started, est_in, est_out)
            decision = decide(snapshot, self.limits, est_in, est_out, self.poll_s)
            remaining = deadline - self._clock()
            if decision.floor_s > remaining or remaining <= 0:
                raise TransientProviderError(
                    f"rate limit ({self.scope}): {decision.reason or 'a limit'} needs a wait of "
                    f"{decision.wait_s:.1f}s, beyond the {self.max_wait_s:g}s a worker waits",
                    retry_after=decision.floor_s or None,
                    hint="the task is retried later; raise the WFQUEUE_RATE_LIMIT_* limits if your API tier allows",
                )
            self._sleep(min(max(decision.sleep_s, MIN_SLEEP_S), max(remaining, MIN_SLEEP_S)))

    def snapshot(self) -> Snapshot:
        """What the limiter holds now (read only; expired entries are filtered, not removed)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.time()
        pipe.zrange(self.keys[0], 0, -1, withscores=True)
        pipe.hgetall(self.keys[1])
        pipe.hgetall(self.keys[2])
        pipe.zrange(self.keys[3], 0, -1, withscores=True)
        (seconds, micros), events, ins, outs, held = pipe.execute()
        now = seconds + micros / US
        return Snapshot(
            now=now,
            events=tuple(Event(score / US, float(ins.get(m, 0)), float(outs.get(m, 0)))
                         for m, score in events if score / US > now - self.limits.window_s),
            held=tuple(score / US for _, score in held if score / US > now),
        )

    def _try(self, permit_id: str, est_in: int, est_out: int) -> tuple[bool, Snapshot]:
        lim = self.limits
        args = [permit_id, round(lim.window_s * US), repr(lim.requests), repr(lim.input_tokens),
                repr(lim.output_tokens), lim.concurrency, est_in, est_out, round(self.slot_ttl_s * US)]
        try:
            reply = self._acquire_script(keys=self.keys, args=args)
        except (redis.RedisError, OSError) as exc:
            raise TransientProviderError(f"the rate limiter cannot reach Redis: {exc}", retry_after=None,
                                         hint="check that the broker is up") from None
        if int(reply[0]) == 1:
            return True, Snapshot(now=int(reply[1]) / US)
        return False, _snapshot(*reply[1:])

    def _release(self, permit_id: str, actual: Usage | None) -> None:
        # Anthropic's input limit counts uncached input and cache writes; cache reads are free of it.
        args: list[Any] = [permit_id, "0", 0, 0]
        if actual is not None:
            args = [permit_id, "1", actual.input_tokens + actual.cache_write_tokens, actual.output_tokens]
        try:
            self._release_script(keys=self.keys, args=args)
        except (redis.RedisError, OSError) as exc:
            # Not fatal: the slot's lease ends by itself and the estimates leave the window.
            log.warning("rate limiter: cannot release permit %s: %s", permit_id, exc)


# -- from settings ---------------------------------------------------------------------------------

_clients: dict[tuple[str, float], redis.Redis] = {}
_clients_lock = threading.Lock()


def _shared_client(url: str, connect_timeout_s: float) -> redis.Redis:
    """One client (connection pool) per process and URL: providers are built per task."""
    with _clients_lock:
        key = (url, connect_timeout_s)
        if key not in _clients:
            _clients[key] = redis_client(url, connect_timeout_s)
        return _clients[key]


def limiter_from_settings(settings: Settings, scope: str) -> RateLimiter | None:
    """The limiter the settings ask for; None without a broker URL or with every limit at 0."""
    if settings.broker_url is None:
        return None
    limits = Limits.per_minute(settings.rate_limit_rpm, settings.rate_limit_input_tpm,
                               settings.rate_limit_output_tpm, settings.rate_limit_concurrency,
                               settings.rate_limit_window_s)
    if limits.unlimited:
        return None
    client = _shared_client(settings.broker_url.get_secret_value(), settings.broker_connect_timeout_s)
    # A call cannot outlive the task's hard time limit, so that bounds a slot's lease.
    return RateLimiter(client, limits, scope=scope, max_wait_s=settings.rate_limit_max_wait_s,
                       slot_ttl_s=float(settings.agent_time_limit_s))
