"""The provider protocol: one method, ``run(step)``.

A step is a pydantic model naming its inputs and the model its answer must
validate against (``output_model``). The offline planner answers from its own
analysis of the repository; an LLM provider turns the same step into a prompt
and validates the reply against ``output_model``. Providers never write files.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from wfqueue.collab.models import AreaDraft, RequirementAnalysis, UnderstandingDraft
from wfqueue.lite.models import (
    AngleFindings,
    Assessment,
    ClarificationAnswer,
    LitePlanDraft,
    VerifiedExploration,
)
from wfqueue.wfs.models import ContextPackage, StructuredInput, WfsPlanDraft
from wfqueue.wfs.session_conflicts import ConflictList


class Step(BaseModel):
    """A unit of planning work for a provider."""

    name: ClassVar[str]
    output_model: ClassVar[type[BaseModel]]

    session_id: str
    repo: str
    requirement: str

    @property
    def label(self) -> str:
        """Names this step in logs, usage records and scripts: the step name, plus the area or angle."""
        return self.name


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
    def label(self) -> str:
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
    def label(self) -> str:
        return f"{self.name}:{self.angle}"


class LitePlanStep(Step):
    """Turn verified explorations and clarification answers into 2-7 unified tasks."""

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


@runtime_checkable
class Provider(Protocol):
    """Anything that can answer a planning step."""

    name: str
    model: str | None

    def run(self, step: Step) -> BaseModel:
        """Answer ``step`` with an instance of ``step.output_model``; raise ProviderError
        (TransientProviderError when a later retry may succeed) otherwise."""
        ...
