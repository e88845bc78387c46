"""Semantic repair of a conflict-detection answer. Pure.

A conflict's id is what the user's choice of strategy is keyed by, and
``recommended`` is what ``-y`` takes, so an answer that validates can still not
be resolved as it is. The rules:

- ids are ``CON-001``, ``CON-002``, ... in answer order: an id that is not, or
  that repeats an earlier one, is renumbered (``renumbered``);
- ``recommended`` indexes one of the conflict's strategies: an index past the
  last becomes 0, the first strategy (``reset_recommendation``).
"""

from __future__ import annotations

from wfqueue.repair import Repair
from wfqueue.workflow_session.session_conflicts import ConflictList

__all__ = ["repair_conflicts"]


def repair_conflicts(answer: ConflictList) -> tuple[ConflictList, list[Repair]]:
    repairs: list[Repair] = []
    conflicts = []
    for number, conflict in enumerate(answer.conflicts, start=1):
        changes: dict[str, object] = {}
        wanted = f"CON-{number:03d}"
        if conflict.id != wanted:
            changes["id"] = wanted
            repairs.append(Repair(kind="renumbered", task_id=wanted,
                                  detail=f"{conflict.id} -> {wanted} (conflicts are numbered in order)"))
        if conflict.recommended >= len(conflict.strategies):
            changes["recommended"] = 0
            repairs.append(Repair(kind="reset_recommendation", task_id=wanted,
                                  detail=f"recommended strategy {conflict.recommended} does not exist "
                                         f"({len(conflict.strategies)} strategies): the first is recommended"))
        conflicts.append(conflict.model_copy(update=changes) if changes else conflict)
    if not repairs:
        return answer, []
    return answer.model_copy(update={"conflicts": conflicts}), repairs
