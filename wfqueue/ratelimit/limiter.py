"""The limiter in Redis: one Lua script admits calls, every response teaches it the API's limits.

Keys (one set per scope, a Redis Cluster hash tag keeps them on one node):
``wfq:ratelimit:{scope}:events`` (zset id -> time, microseconds), ``:in`` and
``:out`` (hash id -> tokens), ``:held`` (zset id -> lease end) and ``:learned``
(hash: :class:`LearnedState`; the script reads its ``pause_until``). All
expire when idle.

Why no library: ``limits`` (moving window) and ``pyrate-limiter`` store one
Redis entry per unit of cost, so a 200k-token call would write 200k entries;
neither can refund an over-estimate, hold a concurrency slot or change its
limits per call, and ``limits`` pins ``redis<8`` (we run redis-py 8). The
script checks and records atomically on Redis's clock, so machines with
skewed clocks share one timeline; the limits it enforces come in as arguments,
computed per attempt from what was learned (:func:`effective_limits`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import redis

from wfqueue import agent_notes
from wfqueue.errors import TransientProviderError
from wfqueue.keys import ratelimit_prefix
from wfqueue.per_process import PerProcess
from wfqueue.ratelimit.learned import LearnedState, Learning, effective_limits, learn, parse_rate_headers
from wfqueue.ratelimit.window import MIN_SLEEP_S, POLL_S, US, Event, Limits, Snapshot, decide
from wfqueue.settings import Settings
from wfqueue.state import redis_client, text_map
from wfqueue.usage import Usage

NOTED_WAIT_S = 2.0  # a permit wait at least this long is shown beside the agent in the command's progress

__all__ = ["LEARNED_TTL_S", "Permit", "RateLimiter", "limiter_from_settings"]

log = logging.getLogger(__name__)

# What was learned outlives quiet spells (every response renews it) but not a day of silence:
# an organisation's tier may change, and a fresh start only costs a short ramp.
LEARNED_TTL_S = 6 * 3600

# KEYS: events, in, out, held, learned. ARGV: id, window_us, requests, input, output, concurrency,
# estimated input, estimated output, lease_us, bucket level, bucket time (us), bucket rate (per s; 0: none),
# bucket capacity.
# Admission is next_slot(...) == 0 for each limit, Bucket.wait_s(...) == 0, and no pause in force (the
# learned hash's pause_until, seconds on this clock).
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
local pause = math.floor((tonumber(redis.call('HGET', KEYS[5], 'pause_until') or '0') or 0) * 1000000)
local ok = now >= pause and fits(redis.call('ZCARD', KEYS[1]), 1, req)
local level, since, rate, cap = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
if ok and rate > 0 then
  local used = redis.call('ZCOUNT', KEYS[1], '(' .. us(since), '+inf')
  ok = used + 1 <= math.min(cap, level + math.max(0, now - since) / 1000000 * rate)
end
if ok and lim_in > 0 then ok = fits(total(KEYS[2]), est_in, lim_in) end
if ok and lim_out > 0 then ok = fits(total(KEYS[3]), est_out, lim_out) end
if ok and conc > 0 then ok = redis.call('ZCARD', KEYS[4]) < conc end
if not ok then
  return {0, us(now), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[2]),
          redis.call('HGETALL', KEYS[3]), redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES'), us(pause)}
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
              held: list[str], pause_us: str) -> Snapshot:
    # Flat [member, value, member, value, ...] replies from the script, paired up.
    ins = dict(zip(tokens_in[::2], tokens_in[1::2], strict=False))
    outs = dict(zip(tokens_out[::2], tokens_out[1::2], strict=False))
    return Snapshot(
        now=int(now_us) / US,
        events=tuple(Event(float(score) / US, float(ins.get(member, 0)), float(outs.get(member, 0)))
                     for member, score in zip(events[::2], events[1::2], strict=False)),
        held=tuple(float(score) / US for score in held[1::2]),
        paused_until=int(pause_us) / US,
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

        Without it (the call failed after the API may have started on it: a timeout, a cut stream) the
        estimates stand: whether the API counted it is unknown, and over-counting is the safe side. A call the
        API refused with an error status used nothing: its caller releases it with zero usage."""
        if self.released:
            return
        self.released = True
        self.limiter._release(self.permit_id, actual)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RateLimiter:
    """Blocks callers so all of them together stay within the limits; see the package docstring.

    ``limits``: with ``learning`` None, the fixed limits enforced; with ``learning``, caps on
    what is learned from the API through :meth:`observe` (0: no cap)."""

    def __init__(self, client: redis.Redis, limits: Limits, *, scope: str = "default", max_wait_s: float = 60.0,
                 slot_ttl_s: float = 360.0, poll_s: float = POLL_S, learning: Learning | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.limits = limits
        self.learning = learning
        self.scope = scope
        self.max_wait_s = max_wait_s
        self.slot_ttl_s = slot_ttl_s
        self.poll_s = poll_s
        self._sleep = sleep
        self._clock = clock
        self._wall_clock = wall_clock
        tag = ratelimit_prefix(scope)
        self.keys = [tag + "events", tag + "in", tag + "out", tag + "held", tag + "learned"]
        self._acquire_script = client.register_script(ACQUIRE_LUA)
        self._release_script = client.register_script(RELEASE_LUA)

    def acquire(self, estimated_input_tokens: int = 0, estimated_output_tokens: int = 0) -> Permit:
        """Wait for a permit, up to ``max_wait_s``; past that raise TransientProviderError so the task retries.

        A wait that no release can shorten is known at once: if it is longer than the
        time left, the error comes immediately, carrying that wait as ``retry_after``.
        The limits are re-read on every attempt: a 429 seen by any worker applies at once."""
        started = self._clock()
        deadline = started + self.max_wait_s
        permit_id = uuid.uuid4().hex
        est_in, est_out = max(0, int(estimated_input_tokens)), max(0, int(estimated_output_tokens))
        noted = False  # whether the agent's watcher was told of this wait (once: a note costs a Redis write)
        while True:
            limits, relaxes_at = self._limits_now()
            granted, snapshot = self._try(permit_id, est_in, est_out, limits)
            if granted:
                if noted:
                    agent_notes.note(None)
                return Permit(self, permit_id, snapshot.now, self._clock() - started, est_in, est_out)
            decision = decide(snapshot, limits, est_in, est_out, self.poll_s)
            if relaxes_at is not None:  # a hold after a 429 ends then: the wait is no longer than that
                decision = decision.at_most(relaxes_at - snapshot.now)
            remaining = deadline - self._clock()
            if decision.floor_s > remaining or remaining <= 0:
                raise TransientProviderError(
                    f"rate limit ({self.scope}): {decision.reason or 'a limit'} needs a wait of "
                    f"{decision.wait_s:.1f}s, beyond the {self.max_wait_s:g}s a worker waits",
                    retry_after=decision.floor_s or None,
                    hint="the task is retried later; WFQUEUE_RATE_LIMIT_MAX_WAIT_S sets how long a worker waits",
                )
            if not noted and decision.wait_s >= NOTED_WAIT_S:
                noted = True
                agent_notes.note(f"waiting for the shared rate limit ({self.scope}): {decision.reason or 'a limit'}, "
                                 f"about {decision.wait_s:.0f}s")
            self._sleep(min(max(decision.sleep_s, MIN_SLEEP_S), max(remaining, MIN_SLEEP_S)))

    def observe(self, headers: Mapping[str, str], status: int) -> None:
        """Learn from one API response (any status): its limit headers, and on a 429 a pause for all workers.

        Never raises: learning is advisory, and the response it comes from has already
        happened. A Redis error is logged; the limits stay as they were."""
        if self.learning is None:
            return
        gate = _recording_gate(self.keys[4])
        # Agents that share a process (a threads pool) get their responses at nearly the same moment. Their
        # updates of one Redis hash under WATCH would re-run each other; one at a time, and a success or a
        # server error that arrives while another is being recorded says nothing fresher, so it is skipped.
        # A 429 always waits its turn: it pauses every worker.
        if not gate.acquire(blocking=status == 429):
            return
        try:
            self._record(headers, status)
        finally:
            gate.release()

    def _record(self, headers: Mapping[str, str], status: int) -> None:
        policy = self.learning
        assert policy is not None
        observed = parse_rate_headers(headers)
        observed_at = self._wall_clock()
        key, window_s = self.keys[4], self.limits.window_s

        def update(pipe: Any) -> None:  # runs under WATCH: another worker's update in between re-runs it
            raw = pipe.hgetall(key)
            seconds, micros = pipe.time()
            now = seconds + micros / US
            in_window = pipe.zcount(self.keys[0], f"({round((now - window_s) * US)}", "+inf")
            in_flight = pipe.zcount(self.keys[3], f"({round(now * US)}", "+inf")
            known = LearnedState.from_fields(raw)
            since_bucket = pipe.zcount(self.keys[0], f"({round(known.bucket_at * US)}", "+inf")
            state = learn(known, observed, status, now=now, observed_at=observed_at, in_window=int(in_window),
                          window_s=window_s, policy=policy, in_flight=int(in_flight),
                          since_bucket=int(since_bucket))
            pipe.multi()
            pipe.hset(key, mapping=state.to_fields())
            pipe.expire(key, LEARNED_TTL_S)

        try:
            self.client.transaction(update, key)
        except (redis.RedisError, OSError) as exc:
            log.warning("rate limiter (%s): cannot record what a response said about the limits: %s",
                        self.scope, exc)

    def learned(self) -> LearnedState:
        """What every worker has learned about this scope (read only)."""
        return LearnedState.from_fields(text_map(self.client.hgetall(self.keys[4])))

    def effective_limits(self) -> Limits:
        """The limits enforced now: the fixed ones, or the learned ones capped by the settings."""
        return self._limits_now()[0]

    def _limits_now(self) -> tuple[Limits, float | None]:
        """The limits enforced now, and when a hold after a 429 ends (Redis's clock; None: no hold)."""
        if self.learning is None:
            return self.limits, None
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys[4])
        pipe.time()
        try:
            raw, (seconds, micros) = pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise self._unreachable(exc) from None
        state, now = LearnedState.from_fields(raw), seconds + micros / US
        return effective_limits(self.limits, state, self.learning, now), state.relaxes_at(now)

    def snapshot(self) -> Snapshot:
        """What the limiter holds now (read only; expired entries are filtered, not removed)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.time()
        pipe.zrange(self.keys[0], 0, -1, withscores=True)
        pipe.hgetall(self.keys[1])
        pipe.hgetall(self.keys[2])
        pipe.zrange(self.keys[3], 0, -1, withscores=True)
        pipe.hget(self.keys[4], "pause_until")
        (seconds, micros), events, ins, outs, held, pause = pipe.execute()
        now = seconds + micros / US
        return Snapshot(
            now=now,
            events=tuple(Event(score / US, float(ins.get(m, 0)), float(outs.get(m, 0)))
                         for m, score in events if score / US > now - self.limits.window_s),
            held=tuple(score / US for _, score in held if score / US > now),
            paused_until=float(pause or 0),
        )

    def _try(self, permit_id: str, est_in: int, est_out: int, limits: Limits | None = None) -> tuple[bool, Snapshot]:
        lim = limits or self.limits
        bucket = lim.bucket
        args: list[str | int] = [permit_id, round(lim.window_s * US), repr(lim.requests), repr(lim.input_tokens),
                repr(lim.output_tokens), lim.concurrency, est_in, est_out, round(self.slot_ttl_s * US),
                repr(bucket.level) if bucket else "0", round(bucket.at * US) if bucket else 0,
                repr(bucket.rate) if bucket else "0", repr(bucket.capacity) if bucket else "0"]
        try:
            reply = self._acquire_script(keys=self.keys, args=args)
        except (redis.RedisError, OSError) as exc:
            raise self._unreachable(exc) from None
        if int(reply[0]) == 1:
            return True, Snapshot(now=int(reply[1]) / US)
        return False, _snapshot(*reply[1:])

    @staticmethod
    def _unreachable(exc: Exception) -> TransientProviderError:
        return TransientProviderError(f"the rate limiter cannot reach Redis: {exc}", retry_after=None,
                                      hint="check that the broker is up")

    def _release(self, permit_id: str, actual: Usage | None) -> None:
        # Anthropic's input limit counts uncached input and cache writes; cache reads are free of it.
        args: list[Any] = [permit_id, "0", 0, 0]
        if actual is not None:
            args = [permit_id, "1", actual.input_tokens + actual.cache_write_tokens, actual.output_tokens]
        try:
            self._release_script(keys=self.keys[:4], args=args)
        except (redis.RedisError, OSError) as exc:
            # Not fatal: the slot's lease ends by itself and the estimates leave the window.
            log.warning("rate limiter: cannot release permit %s: %s", permit_id, exc)


# -- from settings ---------------------------------------------------------------------------------

_gates: PerProcess[str, threading.Lock] = PerProcess()
_clients: PerProcess[tuple[str, float], redis.Redis] = PerProcess()


def _recording_gate(learned_key: str) -> threading.Lock:
    """The lock of this process that one scope's responses are recorded under (RateLimiter.observe)."""
    return _gates.get(learned_key, threading.Lock)


def _shared_client(url: str, connect_timeout_s: float) -> redis.Redis:
    """One client (connection pool) per process and URL: providers are built per task."""
    return _clients.get((url, connect_timeout_s), lambda: redis_client(url, connect_timeout_s))


def limiter_from_settings(settings: Settings, scope: str) -> RateLimiter | None:
    """A learning limiter whenever there is a broker to share it through (None without a broker URL).

    The WFQUEUE_RATE_LIMIT_* limits cap what is learned (0: no cap)."""
    if settings.broker_url is None:
        return None
    caps = Limits.per_minute(settings.rate_limit_rpm, settings.rate_limit_input_tpm,
                             settings.rate_limit_output_tpm, settings.rate_limit_concurrency,
                             settings.rate_limit_window_s)
    learning = Learning(safety=settings.rate_limit_safety, start_concurrency=settings.rate_limit_start_concurrency,
                        ramp_max_concurrency=settings.rate_limit_ramp_max_concurrency)
    client = _shared_client(settings.broker_url.get_secret_value(), settings.broker_connect_timeout_s)
    # A call cannot outlive the task's hard time limit, so that bounds a slot's lease.
    return RateLimiter(client, caps, scope=scope, max_wait_s=settings.rate_limit_max_wait_s,
                       slot_ttl_s=float(settings.agent_time_limit_s), learning=learning)
