"""A chord's callback that fired before every agent of its header finished holds back, and runs once."""

from __future__ import annotations

from typing import Any

import pytest

from wfqueue import keys
from wfqueue.errors import InfrastructureError
from wfqueue.fanout import fail, hold_back, late_result, send_waiting_callback, settle, settled_result, waiting_for
from wfqueue.keys import AgentState
from wfqueue.memory_state import MemorySessionState
from wfqueue.payloads import CollabFinalize, TaskPayload

CALLBACK = CollabFinalize(session_id="S", session_dir="/tmp/S", agents=["api", "auth"])


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[TaskPayload]:
    """What send_alone would have enqueued (no broker here)."""
    out: list[TaskPayload] = []
    monkeypatch.setattr(TaskPayload, "send_alone", lambda self, app: out.append(self))
    return out


def agents(state: MemorySessionState, **states: AgentState) -> MemorySessionState:
    for name, value in states.items():
        state.set_agent(name, state=value)
    return state


def test_a_callback_whose_agents_all_finished_runs_and_one_that_fired_early_holds_back(sent: list[TaskPayload]) -> None:
    state = agents(MemorySessionState(), api=AgentState.DONE, auth=AgentState.FAILED)
    assert hold_back(state, CALLBACK) is None
    assert hold_back(state, CollabFinalize(session_id="S", session_dir="/tmp/S")) is None  # sent alone: no agents
    state.set_agent("auth", state=AgentState.RUNNING)
    assert hold_back(state, CALLBACK) == ["auth"]
    assert waiting_for({"waiting_for": ["auth"]}) == ["auth"] and waiting_for({"status": "completed"}) is None
    # auth finishes: it sends the callback, once, with its agents; the next agent to finish finds nothing to send
    state.set_agent("auth", state=AgentState.DONE)
    assert send_waiting_callback(object(), state) is True and sent == [CALLBACK]  # type: ignore[arg-type]
    assert send_waiting_callback(object(), state) is False and len(sent) == 1  # type: ignore[arg-type]
    assert hold_back(state, sent[0]) is None  # the run it sent finds every agent finished


class _Racing(MemorySessionState):
    """Between the callback's two looks at the records, the last agent finishes (and, with ``agent_sends``, takes
    the stored payload and sends it)."""

    def __init__(self, agent_sends: bool) -> None:
        super().__init__()
        self.looks, self.agent_sends, self.sent_by_agent = 0, agent_sends, False

    def agents(self, areas: list[str]) -> dict[str, dict[str, Any]]:
        self.looks += 1
        if self.looks == 2:
            self.set_agent("auth", state=AgentState.DONE)
            if self.agent_sends:
                self.sent_by_agent = self.take(keys.CALLBACK_WAITING) is not None
        return super().agents(areas)


@pytest.mark.parametrize("agent_sends", [False, True])
def test_of_the_callback_and_the_agent_finishing_as_it_looks_again_one_runs(agent_sends: bool) -> None:
    state = _Racing(agent_sends)
    agents(state, api=AgentState.DONE, auth=AgentState.RUNNING)
    held = hold_back(state, CALLBACK)
    if agent_sends:  # the agent took the payload first: its run goes on, this one holds back for nothing
        assert state.sent_by_agent and held == []
    else:  # the agent looked before the payload was there: this run takes it back and goes on
        assert held is None
    assert state.recall(keys.CALLBACK_WAITING) is None  # nobody can send it a second time


def test_the_coordinator_gets_the_late_runs_result_or_why_it_failed() -> None:
    state = MemorySessionState()
    check = late_result(state, lambda: None)
    assert check() is None
    settle(state, {"status": "completed"})
    assert check() == {"status": "completed"}
    assert late_result(state, lambda: {"status": "partial"})() == {"status": "partial"}  # the watchdog's, first
    fail(state, "OSError: disk full")
    with pytest.raises(InfrastructureError, match="disk full"):
        settled_result(state)
