"""What each task is sent: one pydantic model per task name, one way to send it, one way to read it.

The coordinator builds a payload and calls :meth:`TaskPayload.send` (or
:meth:`TaskPayload.signature` for a chord); the message carries the payload's
fields as keyword arguments under the task's name (``task_names.py``), on the
queue that name is routed to. A worker reads them back with
:meth:`TaskPayload.decode`, which refuses unknown or missing fields, so a field
renamed on one side fails in the tests instead of in a running plan. Chord
callbacks receive the header's results as their first positional argument, as
Celery sends them, and their payload as keywords.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from celery import Celery
from celery.canvas import Signature
from celery.result import AsyncResult
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from wfqueue.errors import InfrastructureError
from wfqueue.execute.executors import ExecutorName
from wfqueue.execute.model import ExecTask, PlanContext
from wfqueue.lite.models import ClarificationAnswer
from wfqueue.task_names import (
    COLLAB_FINALIZE,
    COLLAB_PLAN_AREA,
    COLLAB_UNDERSTAND,
    EXECUTE_TASK,
    EXPLORE_ANGLE,
    LITE_ASSESS,
    LITE_PLAN,
    LITE_SYNTHESIZE,
    ROUTES,
    SESSION_CONFLICTS,
    SESSION_CONTEXT,
    SESSION_GENERATE,
)
from wfqueue.transport.models import Transport


class TaskPayload(BaseModel):
    """The keyword arguments of one task, by name. Subclasses set ``task_name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    task_name: ClassVar[str]
    # None: the worker reads and writes the coordinator's paths (a shared disk). Otherwise the repository
    # and the session folder reach the worker through Redis (wfqueue.transport.workspace).
    transport: Transport | None = None

    def _kwargs(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def shown(self) -> str | None:
        """What Flower and `celery inspect` show as the task's arguments; None: the arguments themselves."""
        return None

    def _options(self) -> dict[str, Any]:
        shown = self.shown()
        return {"queue": ROUTES[self.task_name], **({"kwargsrepr": shown} if shown is not None else {})}

    def signature(self, app: Celery) -> Signature[Any]:
        """The task as a signature (for a chord's header or body), routed to its queue."""
        return app.signature(self.task_name, kwargs=self._kwargs(), **self._options())

    def send(self, app: Celery) -> AsyncResult[Any]:
        """Enqueue the task now, routed to its queue."""
        return app.send_task(self.task_name, kwargs=self._kwargs(), **self._options())

    def send_alone(self, app: Celery) -> AsyncResult[Any]:
        """Enqueue a chord callback without its chord (a late area, the watchdog): an empty list
        stands for the header's results, which callbacks read from Redis anyway."""
        return self.signature(app).apply_async(args=([],))

    @classmethod
    def decode(cls, kwargs: Mapping[str, Any]) -> Self:
        """The payload of a received message; a message that does not fit is an infrastructure error
        (a coordinator and workers of different wfqueue versions)."""
        try:
            return cls.model_validate(dict(kwargs))
        except ValidationError as exc:
            raise InfrastructureError(
                f"task {cls.task_name} received arguments it cannot read: {exc.errors(include_url=False)}",
                hint="run the same wfqueue version on the coordinator and every worker",
            ) from exc


class _Session(TaskPayload):
    session_id: str = Field(min_length=1)


class AgentTask(_Session):
    """A chord header task: one agent of a session (wfqueue.fanout)."""

    @property
    def agent(self) -> str:
        """The agent's name, as its record (``SessionStore.agent``) knows it."""
        raise NotImplementedError


class FanInCallback(_Session):
    """A chord callback: it runs once every agent of ``agents`` has finished (wfqueue.fanout)."""

    # Filled in by fanout.fan_out. Empty (sent alone by the watchdog or a late agent, or by a coordinator of an
    # earlier version): the callback runs at once.
    agents: list[str] = Field(default_factory=list)


class CollabUnderstand(_Session):
    task_name = COLLAB_UNDERSTAND
    session_dir: str
    repo: str
    requirement: str
    max_agents: int = Field(ge=1)
    provider: str


class CollabPlanArea(AgentTask):
    task_name = COLLAB_PLAN_AREA
    session_dir: str
    repo: str
    focus_area: str
    provider: str

    @property
    def agent(self) -> str:
        return self.focus_area


class CollabFinalize(FanInCallback):
    """Callback of the area chord (and sent alone when an area finishes after the callback ran)."""

    task_name = COLLAB_FINALIZE
    session_dir: str


class ExploreAngle(AgentTask):
    """Chord header shared by lite plans and workflow sessions."""

    task_name = EXPLORE_ANGLE
    session_dir: str  # transcripts go here
    output_dir: str  # the exploration files: the session folder, or a folder inside it
    repo: str
    requirement: str
    angle: str
    provider: str

    @property
    def agent(self) -> str:
        return self.angle


class LiteAssess(_Session):
    task_name = LITE_ASSESS
    session_dir: str  # transcripts go here
    repo: str
    requirement: str
    force_explore: bool
    provider: str


class LiteSynthesize(FanInCallback):
    """Callback of the exploration chord of a lite plan."""

    task_name = LITE_SYNTHESIZE
    session_dir: str
    requirement: str


class LitePlan(_Session):
    task_name = LITE_PLAN
    session_dir: str
    repo: str
    requirement: str
    answers: list[ClarificationAnswer] = Field(default_factory=list)
    provider: str
    # The plan is shown to the user before it counts: its plan.md says so from its first byte, so a command
    # stopped before the question (or while the step still ran on a worker) leaves a plan nobody accepted.
    awaiting_acceptance: bool = False


class SessionContext(FanInCallback):
    """Callback of the exploration chord of a workflow session: the context package."""

    task_name = SESSION_CONTEXT
    session_dir: str
    repo: str


class SessionConflicts(_Session):
    task_name = SESSION_CONFLICTS
    session_dir: str
    repo: str
    provider: str


class SessionGenerate(_Session):
    task_name = SESSION_GENERATE
    session_dir: str
    repo: str
    provider: str


class ExecuteTask(TaskPayload):
    """One task of an execution, run by a coding agent in its own worktree at ``base``."""

    task_name = EXECUTE_TASK
    exec_id: str = Field(min_length=1)
    exec_dir: str  # the execution folder: the executor's output is kept under it
    repo: str
    task: ExecTask
    context: PlanContext
    base: str  # commit the worktree starts at: the integration branch's head when the task was sent
    branch: str  # wfqueue/tasks/{exec_id}/{task id}
    # Where the plan's project sits in its git repository ("" at the top, else "proj/"), which the task's paths
    # are relative to. Sent because a worker without the shared disk has only its cache's bare repository,
    # which cannot say; None (a message from before this field) asks ``repo``.
    prefix: str | None = None
    attempt: int = Field(default=1, ge=1)
    executor: ExecutorName
    retry_feedback: str = ""  # why the previous attempt was not merged (a conflict), for the prompt

    @field_validator("prefix")
    @classmethod
    def _folder_inside(cls, prefix: str | None) -> str | None:
        """``git rev-parse --show-prefix`` form: relative, each part ending in "/", no "." or "..", so the
        task's folder stays inside its worktree."""
        if prefix and (not prefix.endswith("/") or "\x00" in prefix
                       or any(part in ("", ".", "..") for part in prefix[:-1].split("/"))):
            raise ValueError(f"{prefix!r} is not a folder inside the repository, like 'proj/' or ''")
        return prefix

    def shown(self) -> str:
        # The whole task and plan context would bury the ids a person looks for in Flower.
        return f"exec_id={self.exec_id} task={self.task.id} attempt={self.attempt} executor={self.executor}"


PAYLOADS: dict[str, type[TaskPayload]] = {
    model.task_name: model
    for model in (CollabUnderstand, CollabPlanArea, CollabFinalize, ExploreAngle, LiteAssess, LiteSynthesize,
                  LitePlan, SessionContext, SessionConflicts, SessionGenerate, ExecuteTask)
}
