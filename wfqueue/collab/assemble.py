"""From provider answers to collaborative-plan artifacts. Pure.

``allocate`` turns the repaired split of an UnderstandingDraft into
requirement-analysis.json with id ranges assigned by code (never trusted to a
provider); ``assemble_area`` turns an AreaDraft into plan.json,
planning-context.md and the agent's two note sections.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from wfqueue.collab.models import (
    AgentPlan,
    AreaDraft,
    ModificationPoint,
    NoteTask,
    PlanMetadata,
    RequirementAnalysis,
    SubDomain,
    UnderstandingDraft,
    id_range_for,
)
from wfqueue.collab.note_blocks import render_evidence, render_task_pool
from wfqueue.collab.split import Split, repair_split
from wfqueue.unified_task import UnifiedTask

_EFFORT_COMPLEXITY = {"small": "Low", "medium": "Medium", "large": "High"}
_RISK_ORDER = ["low", "medium", "high"]


def allocate(draft: UnderstandingDraft, session_id: str, requirement: str, max_agents: int, *,
             split: Split | None = None) -> RequirementAnalysis:
    """The repaired split of ``draft`` (``wfqueue.collab.split``; ``split`` when already repaired) as
    requirement-analysis.json: agent k gets ids 100k+1..100k+100; the repairs are recorded with it."""
    if split is None:
        split = repair_split(draft, max_agents)
    subs = [
        SubDomain(
            focus_area=area.focus_area,
            description=area.description,
            task_id_range=id_range_for(k),
            estimated_effort=area.estimated_effort,
            dependencies=area.dependencies,
            focus_paths=area.focus_paths,
        )
        for k, area in enumerate(split.areas)
    ]
    return RequirementAnalysis(
        session_id=session_id,
        original_requirement=requirement,
        complexity=draft.complexity,
        sub_domains=subs,
        total_agents=len(subs),
        understanding=draft.understanding,
        repairs=split.repairs,
    )


def note_task_from(task: UnifiedTask, focus_area: str) -> NoteTask:
    """The plan-note summary of a unified task."""
    points = [
        ModificationPoint(file=f.path, location=f.target or "", summary="; ".join(f.changes) or f.action)
        for f in task.files
    ]
    risks = [f.conflict_risk for f in task.files if f.conflict_risk]
    return NoteTask(
        id=task.id,
        title=task.title,
        area=focus_area,
        status="pending",
        complexity=_EFFORT_COMPLEXITY.get(task.effort or "medium", "Medium"),
        depends_on=list(task.depends_on),
        scope=task.scope or task.description,
        modification_points=points,
        conflict_risk=max(risks, key=_RISK_ORDER.index) if risks else "low",
    )


class AreaArtifacts(BaseModel):
    """Everything one agent writes, JSON-ready so it can be cached in Redis as one value."""

    focus_area: str
    plan: dict[str, Any]
    planning_context: str
    task_pool: str
    evidence: str


def assemble_area(
    analysis: RequirementAnalysis, focus_area: str, draft: AreaDraft, metadata: PlanMetadata
) -> AreaArtifacts:
    sub = analysis.area(focus_area)
    plan = AgentPlan(
        summary=draft.summary,
        approach=draft.approach,
        task_ids=[t.id for t in draft.tasks],
        task_count=len(draft.tasks),
        complexity=analysis.complexity,
        recommended_execution=draft.recommended_execution,
        design_decisions=draft.design_decisions,
        tasks=draft.tasks,
        metadata=metadata,
    )
    note_tasks = [note_task_from(t, focus_area) for t in draft.tasks]
    first, last = sub.task_id_range
    context = "\n".join(
        [
            f"# Planning Context: {sub.title}",
            "",
            f"- **Session**: {analysis.session_id}",
            f"- **Focus area**: `{focus_area}` (TASK-{first:03d} .. TASK-{last:03d})",
            f"- **Description**: {sub.description}",
            "",
            "## Evidence",
            "",
            *[f"- `{f.path}` (relevance {f.relevance:.2f}): {f.reason}" for f in draft.evidence.related_files],
            "",
            "## Understanding",
            "",
            draft.understanding,
            "",
        ]
    )
    return AreaArtifacts(
        focus_area=focus_area,
        plan=plan.dump(),
        planning_context=context,
        task_pool=render_task_pool(note_tasks),
        evidence=render_evidence(draft.evidence),
    )
