"""One typed model of an executable plan, whatever format it was planned in.

A collaborative plan, a lite plan and a workflow session all hold unified tasks
(docs/ARTIFACTS.md section 2); execution needs the same few things from each:
what to do, which files it may write, what it waits for, and how to tell it is
done. :func:`exec_task` maps a unified task to that; nothing here reads a file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from wfqueue.plan_check import repo_relative
from wfqueue.unified_task import TaskType, UnifiedTask

PlanKind = Literal["collab", "lite", "workflow"]


class TaskFiles(BaseModel):
    """Repository-relative paths the task may write, by what it does to them."""

    modify: list[str] = Field(default_factory=list)
    create: list[str] = Field(default_factory=list)
    delete: list[str] = Field(default_factory=list)

    def written(self) -> list[str]:
        """Every path the task writes, each once: two tasks sharing one never run at the same time."""
        return list(dict.fromkeys([*self.modify, *self.create, *self.delete]))


class ExecTask(BaseModel):
    id: str
    title: str
    description: str
    type: TaskType | None = None
    files: TaskFiles = Field(default_factory=TaskFiles)
    depends_on: list[str] = Field(default_factory=list)
    implementation: list[str] = Field(default_factory=list)
    criteria: list[str] = Field(default_factory=list)
    verification: str
    definition_of_done: str
    # Where the task was read from (``tasks.jsonl:3``, ``.task/IMPL-2.json``), to point the user at it.
    location: str
    # Estimated duration in any unit shared by the plan's tasks; None counts as one unit in the critical path.
    estimate: float | None = Field(default=None, gt=0)


class PlanContext(BaseModel):
    """What every task's executor is told about the plan as a whole."""

    requirement: str = ""
    # The whole requirement's length in characters when ``requirement`` is only its beginning (0: it is whole;
    # plan_context.REQUIREMENT_SHOWN).
    requirement_length: int = 0
    summary: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    # Planning documents an executor may read for more (relative to the repository when inside it); a task's
    # prompt lists those its executor can reach (plan_context.for_executor).
    documents: list[str] = Field(default_factory=list)


class PlanVerdict(BaseModel):
    """A workflow session's last `wfqueue verify`, as execution weighs it."""

    quality_gate: str
    # "C1 task:IMPL-2: summary" for every CRITICAL finding: what blocks the plan.
    critical: list[str] = Field(default_factory=list)
    # A task file changed after the verification: its verdict may no longer hold.
    stale: bool = False

    @property
    def blocks(self) -> bool:
        return self.quality_gate == "BLOCK_EXECUTION"


class ExecutablePlan(BaseModel):
    kind: PlanKind
    session_id: str
    # The file or folder the tasks came from, and the repository they change.
    source: str
    repo: str
    tasks: list[ExecTask]
    context: PlanContext = Field(default_factory=PlanContext)
    verdict: PlanVerdict | None = None  # workflow sessions that were verified only

    def task(self, task_id: str) -> ExecTask:
        return next(t for t in self.tasks if t.id == task_id)


def _step_text(step: str | dict[str, object]) -> str:
    """An implementation step as one line: a string as is, ``{step, description}`` as ``step: description``."""
    if isinstance(step, str):
        return step
    head = str(step.get("step") or step.get("title") or "").strip()
    body = str(step.get("description") or step.get("action") or "").strip()
    return f"{head}: {body}" if head and body else head or body or str(step)


def exec_task(task: UnifiedTask, location: str) -> ExecTask:
    """A validated unified task as execution sees it (paths normalised, each listed once per action)."""
    files = TaskFiles()
    for entry in task.files:
        path = repo_relative(entry.path) or entry.path  # an escaping path was refused by validation already
        bucket = getattr(files, entry.action)
        if path not in bucket:
            bucket.append(path)
    return ExecTask(
        id=task.id, title=task.title, description=task.description, type=task.type, files=files,
        depends_on=list(dict.fromkeys(task.depends_on)),
        implementation=[_step_text(step) for step in task.implementation],
        criteria=list(task.convergence.criteria), verification=task.convergence.verification,
        definition_of_done=task.convergence.definition_of_done, location=location,
    )


TaskRunStatus = Literal["committed", "failed"]


class TaskRun(BaseModel):
    """What one run of one task on a worker ended with (the ``wfqueue.execute.task`` result).

    ``committed``: the executor's change passed the task's verification (or it has none that can run)
    and is the single commit on top of ``base`` on ``branch``. ``failed``: ``error`` says why (executor
    error or timeout, verification still failing, nothing changed); the branch holds no commit of it.
    """

    task_id: str
    attempt: int
    status: TaskRunStatus
    branch: str
    base: str  # the integration head the worktree started at
    commit: str | None = None
    files_changed: list[str] = Field(default_factory=list)
    verification: Literal["passed", "failed", "not_run"] = "not_run"
    verification_output: str = ""  # its tail, for the records and a retry's prompt
    error: str | None = None
    log: str | None = None  # the executor's kept output, relative to the execution folder
    worker: str = ""
    started_at: float = 0.0
    finished_at: float = 0.0
