"""RateLimiter.observe on a real embedded Redis: what one limiter learns, another enforces at once."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.unit.test_ratelimit_learned import headers
from wfqueue.errors import TransientProviderError
from wfqueue.ratelimit import LEARNED_TTL_S, PAUSE, Learning, Limits, RateLimiter
from wfqueue.state import redis_client

NO_CAPS = Limits.per_minute(0, 0, 0, 0, window_s=60)


@pytest.fixture
def pair(redis_url: str) -> tuple[RateLimiter, RateLimiter]:
    """Two limiters on one scope with their own connections, as two workers have."""
    scope = f"test-{random.getrandbits(48):x}"
    return (RateLimiter(redis_client(redis_url, 2.0), NO_CAPS, scope=scope, max_wait_s=0, learning=Learning()),
            RateLimiter(redis_client(redis_url, 2.0), NO_CAPS, scope=scope, max_wait_s=0, learning=Learning()))


def test_limits_one_worker_learns_bind_every_worker(pair: tuple[RateLimiter, RateLimiter]) -> None:
    learner, other = pair
    learner.observe(headers("requests", 10, 9, time.time() + 6), 200)
    assert other.effective_limits().requests == 9.5  # 10/min paced at 0.95
    granted = 0
    with pytest.raises(TransientProviderError, match="requests needs a wait") as info:
        while True:
            other.acquire().release()
            granted += 1
    assert granted == 9 and 59 < info.value.retry_after <= 60  # the 10th would exceed 9.5 in 60 s
    assert other.learned().rpm == 10 and other.learned().announced
    assert 0 < other.client.ttl(other.keys[4]) <= LEARNED_TTL_S


def test_a_429_seen_by_one_worker_pauses_the_others_at_once(pair: tuple[RateLimiter, RateLimiter]) -> None:
    learner, other = pair
    learner.observe(headers("requests", 600, 500, time.time() + 1), 200)
    learner.observe({**headers("requests", 600, 0, time.time() + 30), "retry-after": "20"}, 429)
    with pytest.raises(TransientProviderError, match=PAUSE) as info:
        other.acquire()
    assert 19 < info.value.retry_after <= 20
    assert other.snapshot().paused_until > other.snapshot().now + 19
    # The window held nothing: until the announced reset one request per window goes, not 570.
    assert other.effective_limits().requests == 1


def test_the_hold_after_a_429_ends_at_the_announced_reset(pair: tuple[RateLimiter, RateLimiter]) -> None:
    learner, other = pair
    learner.observe(headers("requests", 600, 500, time.time() + 1), 200)
    for _ in range(3):
        other.acquire().release()
    learner.observe({**headers("requests", 600, 0, time.time() + 1.0), "retry-after": "0.2"}, 429)
    assert other.effective_limits().requests == 3  # what the window held
    with pytest.raises(TransientProviderError, match="requests"):
        other.acquire()  # the window is full at 3 for a minute, but the hold ends within a second ...
    patient = RateLimiter(other.client, NO_CAPS, scope=other.scope, max_wait_s=5, learning=Learning())
    patient.acquire()  # ... so a worker that waits 5 s gets its permit when it ends, not a minute later
    assert patient.effective_limits().requests == 570


def test_the_shared_ramp_opens_up_with_each_success_without_headers(pair: tuple[RateLimiter, RateLimiter]) -> None:
    learner, other = pair
    first, second = other.acquire(), other.acquire()
    with pytest.raises(TransientProviderError, match="concurrency"):
        other.acquire()  # two calls in flight before anything is known
    learner.observe({"content-type": "application/json"}, 200)  # a success that announced nothing
    third, fourth = other.acquire(), other.acquire()
    with pytest.raises(TransientProviderError, match="concurrency"):
        other.acquire()
    learner.observe(headers("requests", 1000, 990, time.time() + 1), 200)  # announced: the ramp is over
    more = [other.acquire() for _ in range(10)]
    for permit in [first, second, third, fourth, *more]:
        permit.release()


def test_observe_never_raises_and_a_fixed_limiter_learns_nothing(tmp_path: Path, redis_url: str,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    client = redis.Redis(unix_socket_path=str(tmp_path / "none.sock"), retry=Retry(NoBackoff(), 0))
    dead = RateLimiter(client, NO_CAPS, scope="dead", learning=Learning())
    with caplog.at_level(logging.WARNING, logger="wfqueue.ratelimit.limiter"):
        dead.observe({**headers("requests", 5, 0, time.time() + 9), "retry-after": "9"}, 429)
    assert "cannot record what a response said" in caplog.text

    fixed = RateLimiter(redis_client(redis_url, 2.0), Limits(3, 0, 0, 0, 60), scope=f"t-{random.getrandbits(40):x}")
    fixed.observe({**headers("requests", 1, 0, time.time() + 9), "retry-after": "9"}, 429)
    assert fixed.client.exists(fixed.keys[4]) == 0 and fixed.effective_limits() == Limits(3, 0, 0, 0, 60)
