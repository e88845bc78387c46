"""An agent's process is SIGKILLed in the middle of its tool loop: the redelivered step resumes at its last
saved turn, and the model's server sees no completed turn a second time.

Real Redis, a real `wfqueue worker` (2 slots), the real CLI as coordinator with ``--provider anthropic``,
the real SDK in the workers, and the local Messages API server in this process. The fake model makes every
sub-domain agent call the ``read`` tool three times before it answers; the first agent to ask for its fourth
turn is held there and killed while it waits: with the prefork pool its pool child, with the threads pool
(what a remote provider gets) the whole worker, whose tasks a second worker takes over once their visibility
timeout has passed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from faults_support import (
    attempts,
    children,
    running_agents,
    start_worker,
    stop_group,
    wait_ready,
    write_report,
)
from support import wait_until, wfqueue_env

from tests.fake_anthropic import FakeAnthropic, Reply, error, tool_call
from tests.fake_model import FakeModel, code_files, first_user_text, step_kind
from wfqueue.embedded import EmbeddedRedis
from wfqueue.state import redis_client

pytestmark = pytest.mark.integration

TOOL_TURNS = 3  # read calls each agent makes before it answers
HELD_TURN = TOOL_TURNS + 1
VISIBILITY_S = 4  # how soon the tasks of a killed worker are delivered again (threads pool)


def turn_of(body: dict[str, Any]) -> int:
    """1 for the prompt alone, then one more per (reply, tool results) pair in the conversation."""
    return (len(body["messages"]) + 1) // 2


def area_of(body: dict[str, Any]) -> str:
    return re.search(r"Plan the sub-domain `([^`]+)`", first_user_text(body)).group(1)  # type: ignore[union-attr]


class HeldToolLoop:
    """The fake model, with longer tool loops for the agents and the first agent held at its fourth turn."""

    def __init__(self) -> None:
        self.model = FakeModel()
        self.held = threading.Event()
        self.release = threading.Event()
        self.victim: str | None = None
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if step_kind(body) != "plan_area" or (body.get("tool_choice") or {}).get("type") == "none":
            return self.model(body)
        turn = turn_of(body)
        if turn <= TOOL_TURNS:
            files = code_files(body)
            return tool_call("read", {"path": files[turn % len(files)], "max_lines": 5})
        with self._lock:
            hold = self.victim is None
            if hold:
                self.victim = area_of(body)
        if hold:
            self.held.set()
            self.release.wait(120)
            return error(500, message="the client of this request was killed")  # nobody reads it
        return self.model(body)


@pytest.mark.long
@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_sigkilled_agent_resumes_at_its_saved_turn(pool: str, sample_repo: Path, tmp_path: Path) -> None:
    model = HeldToolLoop()
    redis = EmbeddedRedis(tmp_path / "broker", password=secrets.token_hex(12))
    redis.start()
    proc: subprocess.Popen | None = None
    with FakeAnthropic(model) as fake:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake.base_url,
               "WFQUEUE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S)}
        worker = start_worker(redis.url, "turns", tmp_path / "worker", pool=pool, **env)
        successor = None
        try:
            wait_ready([worker])
            client = redis_client(redis.url, 5)
            logs = tmp_path / "plan"
            logs.mkdir()
            with (logs / "stdout").open("wb") as out, (logs / "stderr").open("wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", "Add per-user rate limiting to the API",
                     "--repo", str(sample_repo), "--max-agents", "2", "-y", "--provider", "anthropic", "--json"],
                    env=wfqueue_env(WFQUEUE_BROKER_URL=redis.url, **env), stdout=out, stderr=err,
                    stdin=subprocess.DEVNULL, start_new_session=True)
            assert model.held.wait(120), "no agent reached its fourth turn"
            planning = sample_repo / ".workflow" / ".planning"
            session = next(iter(p.name for p in planning.iterdir()))
            victim = wait_until(lambda: next((a for a in running_agents(client, session) if a["area"] == model.victim),
                                           None), 30, "the held agent's running record")
            if pool == "prefork":
                assert victim["pid"] in children(worker.pid)
                os.kill(victim["pid"], signal.SIGKILL)  # a pool child of the worker this test started
            else:
                assert victim["pid"] == worker.proc.pid and children(worker.pid) == []  # a thread of the worker
                os.kill(worker.proc.pid, signal.SIGKILL)
                successor = start_worker(redis.url, "successor", tmp_path / "worker", pool=pool, **env)
            model.release.set()
            proc.wait(timeout=180)
            assert proc.returncode == 0, (logs / "stderr").read_text()[-3000:]
            result = json.loads((logs / "stdout").read_text())
            tries = attempts(client, session)
            usage = [json.loads(raw) for raw in client.lrange(f"wfq:{session}:usage", 0, -1)]
        finally:
            model.release.set()
            if proc is not None:
                stop_group(proc)
            for started in (worker, successor):
                if started is not None:
                    stop_group(started.proc)
            redis.stop()
        repeated = fake.repeated_turns()
        # Killing a threads worker can cut a request another agent was sending: the server got its headers but
        # no body. It never reached a model, so it counts as no turn.
        victim_turns = [turn_of(body) for body in fake.requests
                        if body and step_kind(body) == "plan_area" and area_of(body) == model.victim]

    kinds = [u["kind"] for u in usage if u["step"] == f"plan_area:{model.victim}"]
    write_report("killed_agent_turns", {"repeated_turns": repeated, "victim_turns": victim_turns,
                                        "victim_deliveries": tries[model.victim], "victim_calls_billed": kinds})
    assert result["status"] == "completed" and result["tasks"] >= 2
    # The kill landed mid-task: its task was delivered again. With the 4 s visibility timeout used here, a
    # prefork run sometimes sees one more delivery (the kill's requeue, then the unacknowledged message
    # restored once more: seen in 2 of 4 runs on two cores). Delivery is at least once: what must hold is that
    # no delivery re-sends a saved turn or pays for one twice, asserted below.
    assert tries[model.victim] >= 2
    # Turns 1-3 were each sent once; the held turn 4 was sent again by the redelivered task (it never got its
    # reply) and answered. Without saved turns the retry would have started again at turn 1.
    assert victim_turns == [1, 2, 3, HELD_TURN, HELD_TURN]
    # With prefork only the victim's process died. Killing a threads worker also kills the other agent, which
    # was not held: an answer that had reached it but was not saved yet (it died in between) is asked again.
    assert repeated == 0 if pool == "prefork" else repeated <= 1
    assert kinds == [f"turn-{n}" for n in range(1, HELD_TURN + 1)]  # every completed call billed once
