"""Data of a collaborative plan (CPLAN): what the files hold, as models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from wfqueue.repair import Repair
from wfqueue.unified_task import UnifiedTask

Complexity = Literal["Low", "Medium", "High"]
Risk = Literal["low", "medium", "high"]
# partial: at least one area was planned and at least one agent failed; failed: no area was.
NoteStatus = Literal["planning", "conflicts_detected", "completed", "partial", "failed"]
IDS_PER_AGENT = 100
FOCUS_AREA_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
FOCUS_AREA_MAX = 40


def task_id(number: int) -> str:
    """``TASK-007``; ids past 999 simply grow a digit (``TASK-1201``)."""
    return f"TASK-{number:03d}"


def id_range_for(agent_index: int) -> tuple[int, int]:
    """Agent k (0-based) owns TASK-{100k+1} .. TASK-{100k+100}."""
    first = agent_index * IDS_PER_AGENT + 1
    return first, first + IDS_PER_AGENT - 1


def area_title(focus_area: str) -> str:
    """The section title for a focus-area slug: ``rate-limits`` -> ``Rate Limits``."""
    return " ".join(part.capitalize() for part in focus_area.split("-") if part)


class SubDomain(BaseModel):
    model_config = ConfigDict(extra="allow")

    focus_area: str = Field(pattern=FOCUS_AREA_PATTERN)
    description: str
    task_id_range: tuple[int, int]
    estimated_effort: Literal["small", "medium", "large"] = "medium"
    dependencies: list[str] = Field(default_factory=list)
    focus_paths: list[str] = Field(default_factory=list)

    @property
    def title(self) -> str:
        return area_title(self.focus_area)

    @property
    def task_pool_heading(self) -> str:
        return f"任务池 - {self.title}"

    @property
    def evidence_heading(self) -> str:
        return f"上下文证据 - {self.title}"


class Understanding(BaseModel):
    """What the understanding step concluded about the requirement."""

    objectives: list[str] = Field(min_length=1)
    key_points: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    split_strategy: str
    clarifications: list[str] = Field(default_factory=list)


class RequirementAnalysis(BaseModel):
    """requirement-analysis.json."""

    model_config = ConfigDict(extra="allow")

    session_id: str
    original_requirement: str
    complexity: Complexity
    # One only when the understanding step kept proposing one (the repairs say so).
    sub_domains: list[SubDomain] = Field(min_length=1)
    total_agents: int
    understanding: Understanding
    repairs: list[Repair] = Field(default_factory=list)  # made to the understanding answer (wfqueue.collab.split)

    def area(self, focus_area: str) -> SubDomain:
        for sub in self.sub_domains:
            if sub.focus_area == focus_area:
                return sub
        raise KeyError(focus_area)


class ModificationPoint(BaseModel):
    file: str
    location: str
    summary: str


class NoteTask(BaseModel):
    """One ``### TASK-NNN: title [area]`` block of a task pool."""

    id: str = Field(pattern=r"^TASK-\d+$")
    title: str
    area: str
    status: str = "pending"
    complexity: str = "Medium"
    depends_on: list[str] = Field(default_factory=list)
    scope: str = ""
    modification_points: list[ModificationPoint] = Field(default_factory=list)
    conflict_risk: str = "low"
    line: int | None = Field(default=None, exclude=True, description="1-based line in plan-note.md")

    @property
    def number(self) -> int:
        return int(self.id[5:])  # after "TASK-", which the id's pattern guarantees


class EvidenceFile(BaseModel):
    path: str
    relevance: float
    reason: str


class Evidence(BaseModel):
    """An agent's context evidence: 相关文件 / 现有模式 / 约束."""

    related_files: list[EvidenceFile] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)


class PlanMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    timestamp: str
    source: str = "wfqueue-collab-agent"
    plan_type: str = "collaborative"
    provider: str | None = None
    model: str | None = None


class AgentPlan(BaseModel):
    """agents/{area}/plan.json (plan overview plus the agent's unified tasks)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    summary: str
    approach: str
    task_ids: list[str]
    task_count: int
    complexity: Complexity | None = None
    recommended_execution: Literal["Sequential", "Parallel", "Phased"] | None = None
    design_decisions: list[dict[str, str]] = Field(default_factory=list)
    shared_context: dict[str, list[str]] = Field(default_factory=dict)
    tasks: list[UnifiedTask] = Field(default_factory=list)
    metadata: PlanMetadata = Field(alias="_metadata")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ProposedArea(BaseModel):
    """A sub-domain as a provider proposes it; ids are allocated by code, not by the provider."""

    # Not validated against the slug rule here: a name that breaks it is slugified by code
    # (wfqueue.collab.split) instead of failing the answer.
    # No minimum length: an empty name is named `area-N` by the split's repair, as a name with nothing to slugify
    # is (refused by the schema, it cost a repair round and then failed the whole plan).
    focus_area: str = Field(description=f"A kebab-case slug of at most {FOCUS_AREA_MAX} characters "
                            "(lowercase letters, digits, hyphens), distinct across sub-domains")
    description: str
    focus_paths: list[str] = Field(default_factory=list)
    estimated_effort: Literal["small", "medium", "large"] = "medium"
    dependencies: list[str] = Field(default_factory=list)


class UnderstandingDraft(BaseModel):
    """What a provider answers for the understanding step."""

    complexity: Complexity
    understanding: Understanding
    sub_domains: list[ProposedArea] = Field(min_length=1)


class AreaDraft(BaseModel):
    """What a provider answers for one sub-domain; plan.json and the note's sections derive from it."""

    summary: str
    approach: str
    recommended_execution: Literal["Sequential", "Parallel", "Phased"] = "Sequential"
    design_decisions: list[dict[str, str]] = Field(default_factory=list)
    tasks: list[UnifiedTask]
    evidence: Evidence
    understanding: str = Field(description="The agent's synthesis, for planning-context.md")


class AgentOutcome(BaseModel):
    """The record a header task returns: it never raises out of the chord."""

    focus_area: str
    status: Literal["done", "failed"]
    task_count: int = 0
    error: str | None = None
    worker: str | None = None
    pid: int | None = None
    attempts: int = 1


ConflictType = Literal[
    "file_conflict", "dependency_cycle", "strategy_conflict", "dangling_dependency", "id_out_of_range"
]


class Conflict(BaseModel):
    id: str
    type: ConflictType
    severity: Literal["critical", "high", "medium", "low"]
    tasks_involved: list[str]
    agents_involved: list[str]
    description: str
    suggested_resolution: str
    location: str | None = None
    file: str | None = None
    details: str = ""


class ConflictReport(BaseModel):
    """conflicts.json."""

    detected_at: str
    total_tasks: int
    total_agents: int
    conflicts: list[Conflict]
