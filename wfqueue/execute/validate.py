"""Refusing a plan that cannot be executed, with every problem at once.

The checks themselves are those of ``wfqueue validate`` (:mod:`wfqueue.tasks_file`: schema, duplicate ids,
dangling dependencies, cycles, files to modify or delete that do not exist); this module turns what they
found into the one error `wfqueue execute` exits 2 with.
"""

from __future__ import annotations

from collections.abc import Sequence

from wfqueue.errors import PlanRejectedError
from wfqueue.tasks_file import TaskProblem

HINT = "fix the tasks named above (`wfqueue validate PATH` re-checks a plan), then run the command again"


def rejected(problems: Sequence[TaskProblem | str], hint: str = HINT) -> PlanRejectedError:
    """The error naming every problem, one per line, each saying what to fix."""
    lines = [str(p) for p in problems]
    listing = "\n".join(f"  - {line}" for line in lines)
    count = f"{len(lines)} problem{'s' if len(lines) != 1 else ''}"
    return PlanRejectedError(f"the plan cannot be executed ({count}):\n{listing}", hint=hint, problems=lines)


def refuse_problems(problems: Sequence[TaskProblem | str]) -> None:
    if problems:
        raise rejected(problems)
