"""Three OS processes share one limiter in Redis and together hold 60 requests per minute.

Scaling: a full minute is too long for the suite, so the limit is enforced over
a 6-second window (``WFQUEUE_RATE_LIMIT_WINDOW_S=6`` with
``WFQUEUE_RATE_LIMIT_RPM=60``: 6 requests per 6 s, the same 60/min rate). The
processes build their limiter from settings exactly as workers do
(``load_settings()`` -> ``limiter_from_settings``), against a real embedded
Redis over its unix socket; only the window length differs from production.

Each process acquires permits as fast as the limiter allows for a bounded
time. Grant times come from Redis's clock (the one the limiter uses), so the
rate is measured on the limiter's own timeline: requests granted within three
windows (18 s) from the first grant, per minute. It must be within 10 % of 60.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.support import wfqueue_env
from wfqueue.embedded import EmbeddedRedis

pytestmark = pytest.mark.integration

RPM = 60
WINDOW_S = 6
WINDOWS_MEASURED = 3
PROCESSES = 3

CLIENT = """
import json, sys, time
from wfqueue.errors import TransientProviderError
from wfqueue.ratelimit import limiter_from_settings
from wfqueue.settings import load_settings

start, stop = float(sys.argv[1]), float(sys.argv[2])
limiter = limiter_from_settings(load_settings(), scope="anthropic:test")
print(json.dumps({"ready": True}), flush=True)
time.sleep(max(0.0, start - time.time()))
while time.time() < stop:
    limiter.max_wait_s = max(0.0, stop - time.time())  # so the last wait ends at the stop, not a window later
    try:
        permit = limiter.acquire(0, 0)
    except TransientProviderError:
        break  # the next slot is after the stop
    permit.release()
    print(json.dumps({"granted_at": permit.granted_at, "waited_s": permit.waited_s}), flush=True)
"""


@pytest.mark.long
def test_three_processes_share_60_requests_per_minute(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    procs: list[subprocess.Popen[str]] = []
    try:
        env = wfqueue_env(WFQUEUE_BROKER_URL=server.url, WFQUEUE_RATE_LIMIT_RPM=str(RPM),
                          WFQUEUE_RATE_LIMIT_WINDOW_S=str(WINDOW_S), WFQUEUE_RATE_LIMIT_MAX_WAIT_S="30")
        start = time.time() + 2.0  # time for every process to import (~0.4 s) before the race
        stop = start + WINDOW_S * WINDOWS_MEASURED + 0.5
        for _ in range(PROCESSES):
            procs.append(subprocess.Popen([sys.executable, "-c", CLIENT, str(start), str(stop)], env=env,
                                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        grants: list[tuple[float, int]] = []
        for index, proc in enumerate(procs):
            out, err = proc.communicate(timeout=stop - time.time() + 60)
            assert proc.returncode == 0, err
            lines = [json.loads(line) for line in out.splitlines()]
            assert lines[0] == {"ready": True}
            grants += [(line["granted_at"], index) for line in lines[1:]]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stop()

    grants.sort()
    times = [at for at, _ in grants]
    first = times[0]
    measured_s = WINDOW_S * WINDOWS_MEASURED
    in_window = [at for at in times if at < first + measured_s]
    rate = len(in_window) / measured_s * 60
    per_process = {index: sum(1 for _, i in grants if i == index) for index in range(PROCESSES)}
    next_after = f"{times[len(in_window)] - first:.3f} s" if len(times) > len(in_window) else "none"
    print(f"\nmeasured {len(in_window)} requests in {measured_s} s from the first grant = {rate:.1f}/min "
          f"(limit {RPM}/min over a {WINDOW_S} s window; {len(times)} grants in all, per process {per_process}; "
          f"the next grant came at +{next_after})")
    assert abs(rate - RPM) <= 0.10 * RPM, f"{rate:.1f}/min is not within 10 % of {RPM}/min"
    # The hard guarantee behind it: no window of WINDOW_S seconds ever held more than its share.
    share = RPM * WINDOW_S // 60
    assert all(later - earlier >= WINDOW_S - 1e-3 for earlier, later in zip(times, times[share:], strict=False))
    assert all(count > 0 for count in per_process.values()), "every process got requests through"
