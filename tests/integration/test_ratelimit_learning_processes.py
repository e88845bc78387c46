"""Separate OS processes share the limits one of them learned from the API's headers, through Redis.

The processes build their limiter from settings exactly as workers do
(``load_settings()`` -> ``limiter_from_settings``), with the settings at their
defaults (no caps), against a real embedded Redis over its unix socket.

The rate test talks to a small HTTP server in this process that behaves like
the API's limiter: a token bucket announcing 120 requests per minute in
``anthropic-ratelimit-requests-*`` headers and answering 429 when empty. To fit
the suite, the bucket holds 20 (refilled at 2/s: still 120/min), so it
enforces the limit over 10-second spans, and the limiter's window is 10 s
(``WFQUEUE_RATE_LIMIT_WINDOW_S=10``, the one setting changed); a bucket of 120
against a 60 s window is the same arithmetic, six times slower (simulated in
tests/unit/test_ratelimit_learned.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.integration.support import wfqueue_env
from wfqueue.embedded import EmbeddedRedis
from wfqueue.ratelimit import PAUSE, limiter_from_settings
from wfqueue.settings import Settings

pytestmark = pytest.mark.integration

SCOPE = "anthropic:test"

# Acquire permits until refused (max_wait 0), never calling observe: what binds them was learned elsewhere.
DRAIN = """
import json, sys
from wfqueue.errors import TransientProviderError
from wfqueue.ratelimit import limiter_from_settings
from wfqueue.settings import load_settings

limiter = limiter_from_settings(load_settings(), scope=sys.argv[1])
limiter.max_wait_s = 0
granted = 0
while True:
    try:
        limiter.acquire(0, 0).release()
    except TransientProviderError as exc:
        print(json.dumps({"granted": granted, "error": exc.message, "retry_after": exc.retry_after}))
        break
    granted += 1
"""

# Acquire, call the server, observe its answer, release; from `start` until `stop` (Unix time).
CALLER = """
import json, sys, time, urllib.error, urllib.request
from wfqueue.errors import TransientProviderError
from wfqueue.ratelimit import limiter_from_settings
from wfqueue.settings import load_settings

url, start, stop = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
limiter = limiter_from_settings(load_settings(), scope="anthropic:test")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, whatever the environment
print(json.dumps({"ready": True}), flush=True)
time.sleep(max(0.0, start - time.time()))
while time.time() < stop:
    limiter.max_wait_s = max(0.0, stop - time.time())  # so the last wait ends at the stop
    try:
        permit = limiter.acquire(0, 0)
    except TransientProviderError:
        break
    try:
        with opener.open(urllib.request.Request(url, data=b"{}", method="POST"), timeout=10) as response:
            status, headers = response.status, dict(response.headers.items())
    except urllib.error.HTTPError as exc:
        status, headers = exc.code, dict(exc.headers.items())
    limiter.observe(headers, status)
    permit.release()
    print(json.dumps({"granted_at": permit.granted_at, "status": status}), flush=True)
"""


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def run_all(script: str, args: list[list[str]], env: dict[str, str], cwd: Path, timeout: float) -> list[list[Any]]:
    """Start one process per argument list at once; the JSON lines each printed."""
    procs = [subprocess.Popen([sys.executable, "-c", script, *a], env=env, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for a in args]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err
            outputs.append([json.loads(line) for line in out.splitlines()])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs


def test_limits_and_a_429_learned_in_one_process_bind_the_others(redis_url: str, tmp_path: Path) -> None:
    learner = limiter_from_settings(Settings(broker_url=SecretStr(redis_url)), scope=SCOPE)
    assert learner is not None
    env = wfqueue_env(WFQUEUE_BROKER_URL=redis_url)
    reset = datetime.fromtimestamp(time.time() + 30, UTC).isoformat()
    learner.observe({"anthropic-ratelimit-requests-limit": "20", "anthropic-ratelimit-requests-remaining": "19",
                     "anthropic-ratelimit-requests-reset": reset}, 200)
    started = time.monotonic()
    drained = [lines[0] for lines in run_all(DRAIN, [[SCOPE]] * 3, env, tmp_path, timeout=60)]
    took = time.monotonic() - started  # the waits below shrink by however long the processes took to start
    assert sum(d["granted"] for d in drained) == 19  # 20/min at 0.95, shared by the three
    assert all("requests needs a wait" in d["error"] and 60 - took - 1 < d["retry_after"] <= 60
               for d in drained), drained

    paused_scope = SCOPE + ":paused"
    other = limiter_from_settings(Settings(broker_url=SecretStr(redis_url)), scope=paused_scope)
    assert other is not None
    other.observe({"retry-after": "30"}, 429)
    started = time.monotonic()
    paused = [lines[0] for lines in run_all(DRAIN, [[paused_scope]] * 3, env, tmp_path, timeout=60)]
    took = time.monotonic() - started
    assert all(d["granted"] == 0 and PAUSE in d["error"] and 30 - took - 1 < d["retry_after"] <= 30
               for d in paused), paused


class TokenBucket:
    """The API's limiter as seen from outside: ``capacity`` requests, refilled continuously."""

    def __init__(self, announced_per_minute: int, capacity: float, refill_per_s: float) -> None:
        self.announced, self.capacity, self.refill = announced_per_minute, capacity, refill_per_s
        self.level, self.at = capacity, time.time()
        self.statuses: list[int] = []
        self.lock = threading.Lock()

    def take(self) -> tuple[int, dict[str, str]]:
        with self.lock:
            now = time.time()
            self.level = min(self.capacity, self.level + (now - self.at) * self.refill)
            self.at = now
            status = 200 if self.level >= 1 else 429
            self.level -= 1 if status == 200 else 0
            self.statuses.append(status)
            reset = datetime.fromtimestamp(now + (self.capacity - self.level) / self.refill, UTC).isoformat()
            headers = {"anthropic-ratelimit-requests-limit": str(self.announced),
                       "anthropic-ratelimit-requests-remaining": str(int(self.level)),
                       "anthropic-ratelimit-requests-reset": reset}
            if status == 429:
                headers["retry-after"] = f"{(1 - self.level) / self.refill:.3f}"
            return status, headers


@pytest.fixture
def bucket_url() -> Iterator[tuple[str, TokenBucket]]:
    bucket = TokenBucket(announced_per_minute=120, capacity=20, refill_per_s=2)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            status, headers = bucket.take()
            self.send_response(status)
            for name, value in {**headers, "content-length": "2", "content-type": "application/json"}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/messages", bucket
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


WINDOW_S = 10
WINDOWS_MEASURED = 2
PROCESSES = 8


@pytest.mark.long
def test_eight_processes_share_the_announced_limit_and_never_get_a_429(
        redis_url: str, bucket_url: tuple[str, TokenBucket], tmp_path: Path) -> None:
    url, bucket = bucket_url
    env = wfqueue_env(WFQUEUE_BROKER_URL=redis_url, WFQUEUE_RATE_LIMIT_WINDOW_S=str(WINDOW_S))
    start = time.time() + 2.0  # time for every process to import before the race
    stop = start + WINDOW_S * WINDOWS_MEASURED + 1.0
    outputs = run_all(CALLER, [[url, str(start), str(stop)]] * PROCESSES, env, tmp_path,
                      timeout=stop - time.time() + 60)
    assert all(lines[0] == {"ready": True} for lines in outputs)
    calls = sorted((line["granted_at"], line["status"], index)
                   for index, lines in enumerate(outputs) for line in lines[1:])

    assert bucket.statuses.count(429) == 0 and {status for _, status, _ in calls} == {200}
    times = [at for at, _, _ in calls]
    measured_s = WINDOW_S * WINDOWS_MEASURED
    in_span = [at for at in times if at < times[0] + measured_s]
    rate = len(in_span) / measured_s * 60
    callers = {index for _, _, index in calls}
    print(f"\n{len(in_span)} requests in {measured_s} s from the first grant = {rate:.1f}/min (announced 120/min, "
          f"bucket of 20 at 2/s, window {WINDOW_S} s); {len(calls)} in all from {len(callers)} of {PROCESSES} "
          f"processes; 429s: {bucket.statuses.count(429)}")
    # The rate reached is a speed figure (bench/flaky_model.py, docs/BENCHMARKS.md): on a loaded machine the
    # processes themselves may be slower than the limit, so it is printed here, not asserted.
    # What bound them was learned and shared: no 10 s span ever held more than 120/min at 0.95.
    share = round(120 * 0.95 * WINDOW_S / 60)  # 19 per 10 s
    assert all(later - earlier >= WINDOW_S - 1e-3 for earlier, later in zip(times, times[share:], strict=False))
    assert len(callers) >= PROCESSES // 2, "the permits went to many processes, not one"
