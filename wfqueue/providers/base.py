"""The provider protocol: one method, ``run(step)``.

A step is a pydantic model naming its inputs and the model its answer must
validate against (``output_model``). The offline planner answers from its own
analysis of the repository; an LLM provider turns the same step into a prompt
and validates the reply against ``output_model``. Providers never write files.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from wfqueue.collab.models import AreaDraft, RequirementAnalysis, UnderstandingDraft
from wfqueue.lite.models import (
    AngleFindings,
    Assessment,
    ClarificationAnswer,
    LitePlanDraft,
    VerifiedExploration,
)
from wfqueue.workflow_session.models import ContextPackage, StructuredInput, WfsPlanDraft
from wfqueue.workflow_session.session_conflicts import ConflictList


class Step(BaseModel):
    """A unit of planning work for a provider."""

    name: ClassVar[str]
    output_model: ClassVar[type[BaseModel]]

    session_id: str
    repo: str
    requirement: str
    # The problems of the previous answer, for a step asked again (the one repair round of an
    # answer that validated but cannot be used). Providers that cannot use it may ignore it.
    feedback: list[str] = Field(default_factory=list)
    attempt: int = Field(default=1, ge=1, description="1 for the first ask; 2 for the repair round")

    @model_validator(mode="after")
    def _feedback_is_a_later_attempt(self) -> Step:
        # The attempt is part of the label, and the label keys everything saved per step (usage
        # records, a provider's saved conversation): a re-ask must never reuse the first one's.
        if self.feedback and self.attempt == 1:
            self.attempt = 2
        return self

    @property
    def subject(self) -> str:
        """The step name, plus the area or angle it is about."""
        return self.name

    @property
    def label(self) -> str:
        """Names this step in logs, usage records, saved conversations and scripts: the subject,
        plus ``#N`` for attempt N > 1 (``understand#2``)."""
        return self.subject if self.attempt == 1 else f"{self.subject}#{self.attempt}"


class UnderstandStep(Step):
    """Understand the requirement and split it into 2..max_agents sub-domains."""

    name: ClassVar[str] = "understand"
    output_model: ClassVar[type[BaseModel]] = UnderstandingDraft

    max_agents: int


class PlanAreaStep(Step):
    """Plan one sub-domain of a collaborative plan, using only its id range."""

    name: ClassVar[str] = "plan_area"
    output_model: ClassVar[type[BaseModel]] = AreaDraft

    analysis: RequirementAnalysis
    focus_area: str

    @property
    def subject(self) -> str:
        return f"{self.name}:{self.focus_area}"


class AssessStep(Step):
    """Judge complexity, pick exploration angles, decide whether to explore (lite plan)."""

    name: ClassVar[str] = "assess"
    output_model: ClassVar[type[BaseModel]] = Assessment

    force_explore: bool = False


class ExploreAngleStep(Step):
    """Explore the repository from one angle; findings are verified by code afterwards."""

    name: ClassVar[str] = "explore"
    output_model: ClassVar[type[BaseModel]] = AngleFindings

    angle: str

    @property
    def subject(self) -> str:
        return f"{self.name}:{self.angle}"


class LitePlanStep(Step):
    """Turn verified explorations and clarification answers into 2-7 unified tasks (one for tests of one file)."""

    name: ClassVar[str] = "lite_plan"
    output_model: ClassVar[type[BaseModel]] = LitePlanDraft

    assessment: Assessment
    explorations: list[VerifiedExploration]
    answers: list[ClarificationAnswer]


class DetectConflictsStep(Step):
    """Find conflicts between the change and the code, each with 2-4 strategies (workflow plan)."""

    name: ClassVar[str] = "detect_conflicts"
    output_model: ClassVar[type[BaseModel]] = ConflictList

    context: ContextPackage


class GenerateTasksStep(Step):
    """Generate at most 10 IMPL tasks for a workflow session."""

    name: ClassVar[str] = "generate_tasks"
    output_model: ClassVar[type[BaseModel]] = WfsPlanDraft

    structured: StructuredInput
    assessment: Assessment
    explorations: list[VerifiedExploration]
    constraints: list[str]
    # The context package's critical files: `wfqueue verify` holds a plan that touches none of them at
    # PROCEED_WITH_FIXES, so the planner is told which they are.
    critical_files: list[str] = Field(default_factory=list)


@runtime_checkable
class Provider(Protocol):
    """Anything that can answer a planning step."""

    name: str
    model: str | None

    def run(self, step: Step) -> BaseModel:
        """Answer ``step`` with an instance of ``step.output_model``; raise ProviderError
        (TransientProviderError when a later retry may succeed) otherwise."""
        ...
