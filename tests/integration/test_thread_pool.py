"""Agents that wait on a remote model run as threads of one worker process (Settings.effective_worker_pool):
a collab-plan with the anthropic provider, embedded mode, the real CLI and SDK against the local fake
Messages API. The fake holds each agent's first request until both agents are waiting on it (at most
BARRIER_TIMEOUT_S), and records how many waited at once and, at that moment, the worker's processes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from support import processes_mentioning, run_cli, session_dir, wfqueue_env

from tests.fake_anthropic import FakeAnthropic, Outcome
from tests.fake_model import FakeModel, step_kind

pytestmark = pytest.mark.integration

AGENTS = 2  # what the fake model's understanding step splits this requirement into
BARRIER_TIMEOUT_S = 30.0  # only reached when the agents cannot wait at the same time


class AgentsMeetHere(FakeAnthropic):
    """Holds the first request of each agent until ``AGENTS`` of them are waiting; then records who
    runs the worker at that moment. The server answers each request on its own thread: ``handle`` and
    then ``deliver`` on that thread."""

    def __init__(self, worker_marker: str) -> None:
        super().__init__(FakeModel())
        self.worker_marker = worker_marker
        self.waiting = 0
        self.peak = 0
        self.met = threading.Event()
        self.worker_processes: list[str] = []
        self._count = threading.Lock()
        self._request = threading.local()

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> Outcome:
        body = json.loads(raw or b"{}")
        self._request.agent = bool(body.get("system")) and step_kind(body) == "plan_area"
        return super().handle(path, headers, raw)

    def deliver(self, handler: BaseHTTPRequestHandler, outcome: Outcome) -> None:
        if self._request.agent and not self.met.is_set():
            with self._count:
                self.waiting += 1
                self.peak = max(self.peak, self.waiting)
                if self.waiting >= AGENTS:
                    self.worker_processes = processes_mentioning(self.worker_marker)
                    self.met.set()
            self.met.wait(BARRIER_TIMEOUT_S)
            with self._count:
                self.waiting -= 1
        super().deliver(handler, outcome)


def test_remote_agents_wait_together_as_threads_of_one_worker_process(sample_repo: Path) -> None:
    worker_log = str(sample_repo / ".workflow" / ".queue" / "worker.log")  # on the worker's command line only
    with AgentsMeetHere(worker_log) as fake:
        env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1")
        run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo),
                      "--provider", "anthropic", "--max-agents", "3", "-y", "--json", env=env, timeout=240)
    assert run.code == 0, run.stderr
    assert "threads slot(s)" in run.stderr, run.stderr
    assert fake.peak == AGENTS, f"at most {fake.peak} agent(s) waited on the model at once"
    assert len(fake.worker_processes) == 1, fake.worker_processes  # no pool children: the slots are threads
    worker_pid = int(fake.worker_processes[0].split(":", 1)[0])
    pids = {json.loads(plan.read_text())["_metadata"]["pid"] for plan in session_dir(run).glob("agents/*/plan.json")}
    assert pids == {worker_pid}, (pids, worker_pid)
