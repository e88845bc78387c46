"""Offline task generation for a workflow session (phase 4). Pure.

The grouping is the lite planner's (one task per package, a new module first
when the code lacks the concept); here tasks get IMPL-N ids, carry the planning
constraints chosen in conflict resolution, and stay at ten at most.
"""

from __future__ import annotations

from wfqueue.analysis import RepoIndex
from wfqueue.lite.models import Assessment, VerifiedExploration
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.unified_task import TaskSource, UnifiedTask
from wfqueue.workflow_session.models import MAX_TASKS, StructuredInput, WfsPlanDraft
from wfqueue.workflow_session.render import execution_strategy
from wfqueue.workflow_session.structure import as_text


def renumber(tasks: list[UnifiedTask], session_id: str) -> list[UnifiedTask]:
    """TASK-00N -> IMPL-N, references included."""
    mapping = {t.id: f"IMPL-{n}" for n, t in enumerate(tasks, start=1)}
    return [
        t.model_copy(update={
            "id": mapping[t.id],
            "depends_on": [mapping[d] for d in t.depends_on if d in mapping],
            "source": TaskSource(tool="wfqueue-workflow", session_id=session_id, original_id=mapping[t.id]),
        })
        for t in tasks
    ]


def generate_tasks(index: RepoIndex, session_id: str, structured: StructuredInput, assessment: Assessment,
                   explorations: list[VerifiedExploration], constraints: list[str]) -> WfsPlanDraft:
    lite = plan_tasks(index, as_text(structured), session_id, assessment, explorations, [])
    tasks = renumber(lite.tasks[:MAX_TASKS], session_id)
    if constraints:
        tasks = [
            t.model_copy(update={
                "description": f"{t.description} Constraints: {'; '.join(constraints)}.",
                "implementation": [*t.implementation, *[f"Follow: {c}" for c in constraints]],
            })
            for t in tasks
        ]
    return WfsPlanDraft(
        summary=f"{structured.goal}: {len(tasks)} task(s), {assessment.complexity} complexity",
        approach=f"{execution_strategy(tasks)} execution over {len({f.path for t in tasks for f in t.files})} file(s); "
                 f"scope: {structured.scope}",
        design_decisions=[{"decision": c, "rationale": "chosen in conflict resolution", "tradeoff": "see CON-* entries"}
                          for c in constraints],
        tasks=tasks,
    )
