"""A workflow plan's conflict strategies: asked one by one, each kept as it is chosen."""

from __future__ import annotations

import pytest

from wfqueue.memory_state import MemorySessionState
from wfqueue.workflow_session.coordinator import choose_strategies
from wfqueue.workflow_session.models import SessionConflict, Strategy


def conflict(number: int) -> SessionConflict:
    strategies = [Strategy(name=name, approach=f"{name} approach", complexity="Low", risk="Low")
                  for name in ("Extend the existing code", "New module, migrate callers", "Leave it")]
    return SessionConflict(id=f"CON-00{number}", category="Architecture", severity="High", title=f"conflict {number}",
                           description="d", strategies=strategies, recommended=0)


def test_a_strategy_chosen_before_ctrl_c_is_the_one_the_resume_takes() -> None:
    """Ctrl-C at the second conflict's question lost the first one's answer: the resume took the recommended
    strategy for both, without a word."""
    state, said = MemorySessionState(), []
    conflicts = [conflict(1), conflict(2)]

    def person(asked: SessionConflict) -> int:
        if asked.id == "CON-002":
            raise KeyboardInterrupt
        return 1

    with pytest.raises(KeyboardInterrupt):
        choose_strategies(state, conflicts, person, said.append)
    resumed = choose_strategies(state, conflicts, None, said.append)  # a resume asks nobody
    assert resumed == {"CON-001": 1, "CON-002": 0}
    assert said == ["CON-001: New module, migrate callers, as chosen before"]
    # Answered again on a terminal: the kept choice stands, only the new conflict is asked.
    asked: list[str] = []
    assert choose_strategies(MemorySessionState(), conflicts, lambda c: asked.append(c.id) or 2, said.append) == \
        {"CON-001": 2, "CON-002": 2} and asked == ["CON-001", "CON-002"]
