"""Refusing a plan that cannot be executed, with every problem at once.

The checks themselves are those of ``wfqueue validate`` (:mod:`wfqueue.tasks_file`: schema, duplicate ids,
dangling dependencies, cycles, files to modify or delete that do not exist); this module turns what they
found into the one error `wfqueue execute` exits 2 with.
"""

from __future__ import annotations

from collections.abc import Sequence

from wfqueue.errors import PlanRejectedError
from wfqueue.execute.model import ExecutablePlan
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


def refuse_blocked(plan: ExecutablePlan, repo_option: str) -> None:
    """A workflow session whose verification says BLOCK_EXECUTION is not run without ``--force``: its report
    says not to execute it (ARTIFACTS.md section 7). ``repo_option`` is `` --repo R`` when the command had one."""
    verdict = plan.verdict
    if verdict is None or not verdict.blocks:
        return
    session = f"--session {plan.session_id}{repo_option}"
    listing = "".join(f"\n  - {line}" for line in verdict.critical)
    if verdict.stale:
        hint = (f"its tasks changed after that verification: run `wfqueue verify {session}` again, or pass --force "
                "to execute the plan as it is")
    else:
        hint = (f"resolve the CRITICAL findings (`wfqueue replan \"what to change\" {session}`), run `wfqueue verify "
                f"{session}` again, then execute; or pass --force to execute the plan as it is")
    raise PlanRejectedError(f"{plan.session_id}: its verification says BLOCK_EXECUTION{listing}", hint=hint,
                            problems=verdict.critical)
