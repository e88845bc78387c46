"""A chord whose callback fires while an agent still runs (a header part delivered twice counts twice on Redis).

Seen in a full run of the suite: during a Redis restart one area's message was delivered again after its retry
had finished it, the chord reached its count with the storage area still planning, and the callback wrote the
plan as "partial" (storage: "no result recorded (last state: running)"); the coordinator exited 1 though storage
finished a moment later. Here the second delivery is made exactly: a copy of a finished area's part (with another
attempt number, as a second run's would have) is added to the chord's count before the last-but-one area
finishes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faults_support import check_collab_session, start_coordinator, start_worker, stop_plan, wait_ready
from support import FOUR_AREAS, wait_until, write_script

from wfqueue import keys
from wfqueue.embedded import EmbeddedRedis
from wfqueue.state import redis_client

pytestmark = pytest.mark.integration


def count_a_finished_part_twice(client) -> None:
    """Add to the chord's count a copy of a finished part, as a second delivery of it would."""
    (joined,) = list(client.scan_iter(match="*celery-taskset-meta-*.j"))
    if client.type(joined) == "zset":  # Celery's default: the parts in header order
        member, score = client.zrange(joined, 0, 0, withscores=True)[0]
        part = json.loads(member)
        part[3]["attempts"] += 1
        client.zadd(joined, {json.dumps(part): score})
    else:
        part = json.loads(client.lindex(joined, 0))
        part[3]["attempts"] += 1
        client.rpush(joined, json.dumps(part))


def test_a_callback_fired_before_the_last_area_finished_waits_for_it_and_the_plan_completes(
        sample_repo: Path, tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "broker")
    redis.start()
    workers = [start_worker(redis.url, name, tmp_path / name, concurrency=3) for name in ("early-a", "early-b")]
    coordinator = None
    try:
        wait_ready(workers)
        storage, notes = tmp_path / "release-storage", tmp_path / "release-notes-api"
        provider = write_script(tmp_path / "script.json", latency_s=0.1,
                                hold={"plan_area:storage": str(storage), "plan_area:notes-api": str(notes)})
        logs = tmp_path / "coordinator"
        coordinator = start_coordinator(redis.url, FOUR_AREAS, sample_repo, provider, logs)
        planning = sample_repo / ".workflow" / ".planning"
        finished = lambda: {p.parent.name for p in planning.glob("*/agents/*/plan.json")}  # noqa: E731
        wait_until(lambda: {"api", "auth"} <= finished(), 120, "the api and auth areas to finish")
        folder = next(planning.iterdir())
        client = redis_client(redis.url, 5)
        count_a_finished_part_twice(client)

        notes.touch()  # notes-api finishes: its part makes the count whole while storage is held
        waiting = f"wfq:{folder.name}:{keys.CALLBACK_WAITING}"
        wait_until(lambda: client.exists(waiting) or coordinator.poll() is not None, 60,
                   "the callback to fire and hold back for storage")
        assert coordinator.poll() is None, f"the coordinator ended:\n{(logs / 'stderr').read_text()[-2000:]}"
        assert json.loads(client.hget(f"wfq:{folder.name}:agent:storage", "state")) == "running"
        assert not (folder / "plan.md").exists(), "a plan was written while an area still ran"

        storage.touch()
        coordinator.wait(timeout=120)
        err = (logs / "stderr").read_text()
        assert coordinator.returncode == 0, err[-2000:]
        assert json.loads((logs / "stdout").read_text())["status"] == "completed"  # no area failed
        assert json.loads(client.hget(f"wfq:{folder.name}:agent:storage", "state")) == "done"
        check = check_collab_session(folder)
        assert check.sections_lost == [] and check.duplicate_tasks == [] and check.problems == [], check
        assert not client.exists(waiting), "the run that found every area finished left the callback waiting"
    finally:
        stop_plan(coordinator, workers, redis)
