"""A single step's note on what it waits for: written where the command waiting for the step reads it, and
taken away when the step ends, so that the next step does not show it as its own."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from wfqueue import agent_notes, keys
from wfqueue.payloads import LiteAssess
from wfqueue.settings import Settings
from wfqueue.state import StateFactory
from workers.registry import step_notes


def test_a_steps_note_is_in_its_session_while_it_waits_and_gone_when_it_ends(redis_url: str) -> None:
    states = StateFactory(Settings(broker_url=SecretStr(redis_url)))
    payload = LiteAssess(session_id="S-notes", session_dir="/r/.workflow/.lite-plan/S-notes", repo="/r",
                         requirement="x", force_explore=False, provider="offline")
    state = states.session("S-notes")
    with pytest.raises(RuntimeError), step_notes(states, payload):
        agent_notes.note("the Anthropic API answered 529: overloaded; sending again in 4s (7 re-sends left)")
        assert state.recall(keys.STEP_NOTE) == "the Anthropic API answered 529: overloaded; sending again in 4s " \
                                               "(7 re-sends left)"
        raise RuntimeError("the step failed while it waited")
    assert state.recall(keys.STEP_NOTE) is None
