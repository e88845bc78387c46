"""An execution's id, folder and outcome: where ``wfqueue execute`` keeps it, and what it reports at the end."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field

from wfqueue.execute.decisions import BranchGone, merge_hint
from wfqueue.execute.records import Execution
from wfqueue.sessions import WORKFLOW_DIR, SessionIds, repo_option
from wfqueue.workflow.contract import PlanOutcome

EXECUTION_DIR = ".execution"
EXEC_IDS = SessionIds(prefix="EXEC-", slug_length=40, dated=True)  # EXEC-{slug}-{date}


def execution_root(repo: Path) -> Path:
    return repo / WORKFLOW_DIR / EXECUTION_DIR


def plan_slug(session_id: str) -> str:
    """The plan's id without its own prefix and date, which the exec id adds again."""
    return re.sub(r"^(?:WFS|CPLAN)-|-\d{4}-\d{2}-\d{2}(?:-\d+)?$", "", session_id) or session_id


class ExecutionOutcome(PlanOutcome):
    """How an execution ended (``session_id`` is the exec id, ``tasks`` the number completed)."""

    branch: str
    task_states: dict[str, list[str]]
    total: int  # tasks in the plan (those after a red gate are in no state list yet)
    hint: str
    # What the terminal says of each task that did not complete: its own state (rejected is counted as failed
    # in ``task_states``) and why.
    unfinished: dict[str, str] = Field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "completed" else 1

    def execute_json(self) -> dict[str, Any]:
        """The one object `wfqueue execute --json` prints."""
        return {"exec_id": self.session_id, "exec_dir": self.session_dir, "status": self.status,
                "branch": self.branch, "tasks": self.task_states, "hint": self.hint, "usage": self.usage}


def outcome(execution: Execution, gone: BranchGone | None = None) -> ExecutionOutcome:
    counts = execution.counts()
    return ExecutionOutcome(session_id=execution.exec_id, session_dir=execution.exec_dir, status=execution.status,
                            tasks=len(counts["completed"]), conflicts=len(counts["blocked"]), branch=execution.branch,
                            task_states=counts, total=len(execution.tasks), usage=execution.usage,
                            hint=merge_hint(execution, repo_option(Path(execution.repo)), gone=gone),
                            unfinished={t: f"{r.state}" + (f": {r.reason}" if r.reason else "")
                                        for t, r in execution.tasks.items()
                                        if r.state in ("failed", "rejected", "skipped", "blocked")})
