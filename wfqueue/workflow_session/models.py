"""Data of a workflow session (WFS-*): the session record, the context package,
conflict resolution, the plan overview, verification findings, replan history.

Field names are a contract (docs/ARTIFACTS.md sections 5-8); unknown fields are
kept on read and written back (``extra="allow"``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from wfqueue.unified_task import UnifiedTask

SessionStatus = Literal["planning", "active", "paused", "completed", "archived", "failed"]
PhaseState = Literal["pending", "running", "done", "skipped", "failed"]
RiskLevel = Literal["none", "low", "medium", "high", "resolved"]
PHASES = ("session", "context", "conflicts", "tasks")
MAX_TASKS = 10


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class StructuredInput(_Open):
    goal: str
    scope: str
    context: str
    constraints: list[str] = Field(default_factory=list)


class Progress(_Open):
    current_tasks: list[str] = Field(default_factory=list)
    last_replan: str | None = None


class ReplanEntry(_Open):
    timestamp: str
    reason: str
    scope: str
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    backup: str


def _all_pending() -> dict[str, PhaseState]:
    return {p: "pending" for p in PHASES}


class WorkflowSession(_Open):
    """workflow-session.json. ``phases`` records how far ``wfqueue plan`` got, so an
    interrupted plan resumes at its first unfinished phase."""

    session_id: str
    project: str
    description: str
    type: Literal["workflow"] = "workflow"
    status: SessionStatus = "planning"
    created_at: str
    updated_at: str | None = None
    progress: Progress = Field(default_factory=Progress)
    replan_history: list[ReplanEntry] = Field(default_factory=list)
    structured: StructuredInput | None = None
    repo: str | None = None
    provider: str | None = None  # what planned it: `wfqueue resume` finishes it with the same one
    phases: dict[str, PhaseState] = Field(default_factory=_all_pending)
    phases_done_at: dict[str, str] = Field(default_factory=dict)

    def next_phase(self) -> str | None:
        return next((p for p in PHASES if self.phases.get(p) not in ("done", "skipped")), None)

    def tasks_unfinished(self) -> str | None:
        """The state of the tasks phase while it has not finished (an interrupted `wfqueue plan`: no plan yet to
        verify or replan), else None. A session another tool wrote records no phases and counts as finished."""
        state = self.phases.get("tasks")
        return str(state) if "phases" in self.model_fields_set and state not in ("done", "skipped") else None


# -- context package (.process/context-package.json) ---------------------------------------


class SourceAsset(_Open):
    path: str
    role: str
    relevance_score: float


class InternalDependency(_Open):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    type: str = "import"


class RiskFactors(_Open):
    existing_implementations: list[str] = Field(default_factory=list)
    api_changes: bool = False
    architecture_changes: bool = False
    data_model_changes: bool = False
    breaking_changes: list[str] = Field(default_factory=list)


class ConflictDetection(_Open):
    risk_level: RiskLevel
    risk_factors: RiskFactors = Field(default_factory=RiskFactors)
    affected_modules: list[str] = Field(default_factory=list)
    mitigation_strategy: str = ""


class ContextPackage(_Open):
    metadata: dict[str, object]
    project_context: dict[str, object]
    assets: dict[str, list[object]]
    dependencies: dict[str, list[object]]
    conflict_detection: ConflictDetection
    exploration_results: dict[str, object]
    prioritized_context: dict[str, object]

    def aggregated_insights(self) -> dict[str, Any]:
        """``exploration_results.aggregated_insights``; empty when missing or not an object (a hand-edited file)."""
        insights = self.exploration_results.get("aggregated_insights")
        return insights if isinstance(insights, dict) else {}

    def critical_files(self) -> list[str]:
        """The insights' critical files, once each: paths, or ``{"path": ...}`` objects as other tools write them."""
        raw = self.aggregated_insights().get("critical_files", [])
        found = [e.get("path", "") if isinstance(e, dict) else str(e) for e in raw] if isinstance(raw, list) else []
        return list(dict.fromkeys(p for p in found if p))


# -- conflict resolution (.process/conflict-resolution.json) --------------------------------

ConflictCategory = Literal["Architecture", "API", "Data", "Dependency", "ModuleOverlap"]


class Strategy(_Open):
    name: str
    approach: str
    complexity: Literal["Low", "Medium", "High"]
    risk: Literal["Low", "Medium", "High"]
    pros: list[str] = Field(default_factory=list)
    cons: list[str] = Field(default_factory=list)
    modifications: list[str] = Field(default_factory=list, description="Constraints the plan must follow if chosen")


class SessionConflict(_Open):
    # CON-001, CON-002, ... in order; a provider's ids are renumbered by code (conflict_repair.py).
    id: str = Field(min_length=1, description="CON-001, CON-002, ... in order")
    category: ConflictCategory
    severity: Literal["Critical", "High", "Medium"]
    title: str
    description: str
    affected_files: list[str] = Field(default_factory=list)
    strategies: list[Strategy] = Field(min_length=2, max_length=4)
    recommended: int = Field(default=0, ge=0, description="Index of the recommended strategy")


class ResolvedConflict(_Open):
    conflict_id: str
    strategy_name: str
    strategy_approach: str
    modifications_applied: list[str] = Field(default_factory=list)


class ConflictResolution(_Open):
    session_id: str
    resolved_at: str
    summary: dict[str, int]
    resolved_conflicts: list[ResolvedConflict] = Field(default_factory=list)
    custom_conflicts: list[dict[str, object]] = Field(default_factory=list)
    planning_constraints: list[str] = Field(default_factory=list)
    failed_modifications: list[dict[str, object]] = Field(default_factory=list)


# -- plan overview (plan.json) --------------------------------------------------------------


class PlanOverviewMeta(_Open):
    timestamp: str
    source: str = "wfqueue-workflow"
    plan_type: str = "feature"


class PlanOverview(_Open):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    summary: str
    approach: str
    task_ids: list[str]
    task_count: int
    complexity: Literal["Low", "Medium", "High"] | None = None
    recommended_execution: Literal["Sequential", "Parallel", "Phased"] | None = None
    design_decisions: list[dict[str, str]] = Field(default_factory=list)
    shared_context: dict[str, list[str]] = Field(default_factory=dict)
    metadata: PlanOverviewMeta = Field(alias="_metadata")


# -- verification (.process/verification-findings.json) -------------------------------------

Severity = Literal["CRITICAL", "HIGH", "MEDIUM", "LOW"]
QualityGate = Literal["PROCEED", "PROCEED_WITH_CAUTION", "PROCEED_WITH_FIXES", "BLOCK_EXECUTION"]
# The gates under which execution may start as the plan stands: `verify`, and `plan` when it verified, exit 0.
GATES_READY: frozenset[str] = frozenset({"PROCEED", "PROCEED_WITH_CAUTION"})


class Finding(_Open):
    id: str = Field(description="C1, H2, M3, L4 ... by severity")
    dimension: Literal["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]
    dimension_name: str
    severity: Severity
    location: list[str] = Field(description="e.g. IMPL_PLAN.md:L45, task:IMPL-2")
    summary: str
    recommendation: str


class WfsPlanDraft(BaseModel):
    """What a provider answers for task generation: at most 10 IMPL tasks."""

    summary: str
    approach: str
    design_decisions: list[dict[str, str]] = Field(default_factory=list)
    tasks: list[UnifiedTask] = Field(min_length=1, max_length=MAX_TASKS)
