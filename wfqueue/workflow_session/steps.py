"""The phases of `wfqueue plan` that workers run (context, conflicts, task generation),
and the small file updates the coordinator makes between them.

Provider answers are remembered in Redis before files are written, so a phase
that runs twice (redelivery, or a resumed plan) writes the same bytes.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

from wfqueue import keys
from wfqueue.analysis.files import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_INDEXED_FILES
from wfqueue.analysis.index_cache import cached_index
from wfqueue.collab.steps import now_iso
from wfqueue.errors import ProviderError
from wfqueue.fsio import atomic_write_json, atomic_write_text, remove
from wfqueue.lite.models import Assessment, VerifiedExploration
from wfqueue.lite.steps import assessment_repairs, explorations_for, recalled_repairs, with_repairs
from wfqueue.lite.synthesis import manifest
from wfqueue.metering import usage_line, write_usage_file
from wfqueue.plan_check import check_plan, leaves_repository
from wfqueue.providers import DetectConflictsStep, GenerateTasksStep, Provider
from wfqueue.repair import Repair, fill_source, repair_tasks
from wfqueue.state import SessionStore
from wfqueue.tasks_file import LoadedTask
from wfqueue.usage import PriceTable
from wfqueue.workflow_session.conflict_repair import repair_conflicts
from wfqueue.workflow_session.context import build_context_package
from wfqueue.workflow_session.models import (
    ConflictResolution,
    ContextPackage,
    PlanOverview,
    SessionConflict,
    WfsPlanDraft,
)
from wfqueue.workflow_session.render import (
    Decision,
    PlanningNotes,
    execution_strategy,
    render_impl_plan,
    render_notes,
    render_todo,
)
from wfqueue.workflow_session.session import (
    EXPLORATIONS_MANIFEST,
    IMPL_PLAN_FILE,
    NOTES_FILE,
    PLAN_FILE,
    PROCESS_DIR,
    TASK_DIR,
    TODO_FILE,
    load_session,
    task_files,
    task_path,
)
from wfqueue.workflow_session.session_conflicts import ConflictList

CONTEXT_FILE = "context-package.json"
ASSESSMENT_FILE = "assessment.json"  # the assessment as Redis kept it (repairs included), to recall it from
RESOLUTION_FILE = "conflict-resolution.json"
NOTES_STATE = "planning-notes.json"
_MANIFESTS = ("pyproject.toml", "requirements.txt")


def load_notes(folder: Path) -> PlanningNotes:
    return PlanningNotes.model_validate_json((folder / PROCESS_DIR / NOTES_STATE).read_text(encoding="utf-8"))


def save_notes(folder: Path, notes: PlanningNotes) -> None:
    atomic_write_json(folder / PROCESS_DIR / NOTES_STATE, notes.model_dump(mode="json"))
    atomic_write_text(folder / NOTES_FILE, render_notes(notes))


def load_context(folder: Path) -> ContextPackage:
    return ContextPackage.model_validate_json((folder / PROCESS_DIR / CONTEXT_FILE).read_text(encoding="utf-8"))


def save_context(folder: Path, context: ContextPackage) -> None:
    atomic_write_json(folder / PROCESS_DIR / CONTEXT_FILE, context.model_dump(mode="json", by_alias=True))


def recall_context(state: SessionStore, folder: Path) -> bool:
    """Put a gathered context back into Redis from the session's files (after Redis forgot it, when the state
    outlived ``WFQUEUE_STATE_TTL_S`` or was removed), so that task generation pays for no exploration twice.
    False when the files do not hold it (a session gathered before they were written): gather it again."""
    process = folder / PROCESS_DIR
    try:
        recorded = (process / ASSESSMENT_FILE).read_text(encoding="utf-8")
        assessment = Assessment.model_validate_json(recorded)
        timestamp = load_context(folder).metadata.get("timestamp")
        found: dict[str, str] = {}
        for angle in assessment.angles if assessment.needs_exploration else []:
            path = process / f"exploration-{angle}.json"
            if path.is_file():  # absent: the angle had failed, and stays failed
                found[angle] = VerifiedExploration.model_validate_json(path.read_bytes()).model_dump_json()
    except (OSError, ValueError):
        return False
    state.remember_once(keys.ASSESSMENT, recorded)
    for angle, exploration in found.items():
        state.remember_once(keys.exploration_key(angle), exploration)
    if isinstance(timestamp, str):
        state.remember_once(keys.CONTEXT_AT, timestamp)
    return True


def run_context_phase(state: SessionStore, folder: Path, repo: str, shown_folder: Path | None = None, *,
                      max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, max_files: int = DEFAULT_MAX_INDEXED_FILES) -> str:
    """Phase 2 after its explorations: the context package and Context Findings. Returns the risk level.
    The explorations manifest names the files in ``shown_folder`` (the session folder as the user sees it,
    when ``folder`` is a worker's copy)."""
    session = load_session(folder)
    assert session.structured is not None, "phase 1 always records the structured input"
    assessment = Assessment.model_validate_json(state.recall(keys.ASSESSMENT) or "")
    explorations, failed = explorations_for(state, assessment.angles if assessment.needs_exploration else [])
    process = folder / PROCESS_DIR
    for exploration in explorations:
        atomic_write_json(process / f"exploration-{exploration.findings.angle}.json",
                          exploration.model_dump(mode="json"))
    atomic_write_text(process / ASSESSMENT_FILE, state.recall(keys.ASSESSMENT) or "")
    timestamp = state.remember_once(keys.CONTEXT_AT, now_iso())
    atomic_write_json(process / EXPLORATIONS_MANIFEST,
                      manifest(session.session_id, session.description, timestamp, assessment.complexity,
                               explorations, str((shown_folder or folder) / PROCESS_DIR), failed))
    index = cached_index(Path(repo), max_bytes=max_file_bytes, max_files=max_files)  # the planners' index
    texts = {f.path: (Path(repo) / f.path).read_text(encoding="utf-8", errors="replace")
             for f in index.files if posixpath.basename(f.path) in _MANIFESTS}
    context = build_context_package(index, session.session_id, timestamp, session.structured, assessment,
                                    explorations, texts)
    save_context(folder, context)
    notes = load_notes(folder)
    insights = context.aggregated_insights()
    internal = [d for d in context.dependencies["internal"] if isinstance(d, dict)]  # {"from", "to"} each
    notes = notes.model_copy(update={
        "critical_files": list(insights["critical_files"]),
        "architecture": [f"{d['from']} imports {d['to']}" for d in internal][:10]
        or [f"affected modules: {', '.join(context.conflict_detection.affected_modules) or 'none'}"],
        "conflict_risk": context.conflict_detection.risk_level,
        "constraints": list(insights["constraints"])[:10],
    })
    if failed:  # each once: the phase run again (a redelivered task, a resumed session) adds nothing twice
        notes.deferred = list(dict.fromkeys([*notes.deferred,
                                             *[f"re-explore angle {a} (failed: {e})" for a, e in failed.items()]]))
    save_notes(folder, notes)
    return context.conflict_detection.risk_level


def run_conflict_detection(state: SessionStore, provider: Provider, folder: Path, repo: str) -> list[SessionConflict]:
    """The conflicts, repaired (conflict_repair.py); the repaired answer is remembered with its repairs."""
    cached = state.recall(keys.SESSION_CONFLICTS)
    if cached is None:
        session = load_session(folder)
        answer = provider.run(DetectConflictsStep(session_id=session.session_id, repo=repo,
                                                  requirement=session.description, context=load_context(folder)))
        assert isinstance(answer, ConflictList)
        fixed, repairs = repair_conflicts(answer)
        cached = state.remember_once(keys.SESSION_CONFLICTS, with_repairs(fixed, repairs))
    return ConflictList.model_validate_json(cached).conflicts


def answer_repairs(state: SessionStore) -> list[Repair]:
    """The repairs of the session's assessment and conflict answers (its tasks' are added by generation)."""
    conflicts = state.recall(keys.SESSION_CONFLICTS)
    return [*assessment_repairs(state), *(recalled_repairs(conflicts) if conflicts is not None else [])]


def apply_resolution(folder: Path, conflicts: list[SessionConflict], resolution: ConflictResolution) -> None:
    """Record the chosen strategies; the context's risk becomes ``resolved``."""
    atomic_write_json(folder / PROCESS_DIR / RESOLUTION_FILE, resolution.model_dump(mode="json"))
    context = load_context(folder)
    context.conflict_detection.risk_level = "resolved"
    save_context(folder, context)
    notes = load_notes(folder)
    titles = {c.id: c.title for c in conflicts}
    notes.conflict_decisions = [
        f"{r.conflict_id} {titles.get(r.conflict_id, '')}: {r.strategy_name} ({r.strategy_approach})"
        for r in resolution.resolved_conflicts
    ]
    notes.constraints = [*notes.constraints,
                         *[c for c in resolution.planning_constraints if c not in notes.constraints]]
    notes.decisions = [*notes.decisions, *[Decision(decision=r.strategy_name, rationale=f"resolves {r.conflict_id}")
                                           for r in resolution.resolved_conflicts]]
    save_notes(folder, notes)


def planning_constraints(folder: Path) -> list[str]:
    path = folder / PROCESS_DIR / RESOLUTION_FILE
    if not path.is_file():
        return []
    return ConflictResolution.model_validate_json(path.read_text(encoding="utf-8")).planning_constraints


def repair_wfs_draft(draft: WfsPlanDraft, repo: str, session_id: str) -> tuple[WfsPlanDraft, list[Repair]]:
    """Ids IMPL-1.. in task order, files that exist, dependencies on tasks of the plan only."""
    root = Path(repo)
    tasks = fill_source(draft.tasks, tool="wfqueue-workflow", session_id=session_id)
    tasks, repairs = repair_tasks(tasks, id_prefix="IMPL-", id_range=(1, len(tasks)), digits=1,
                                  exists=lambda rel: (root / rel).exists(), is_folder=lambda rel: (root / rel).is_dir(),
                                  leaves=leaves_repository(root),
                                  sequential=True)
    return draft.model_copy(update={"tasks": tasks}), repairs


def run_generation(state: SessionStore, provider: Provider, folder: Path, repo: str, *,
                   prices: PriceTable | None = None) -> WfsPlanDraft:
    """Phase 4: plan.json, .task/IMPL-N.json, IMPL_PLAN.md, TODO_LIST.md, Task Generation notes; with
    ``prices`` also usage.json and the usage in plan.json's _metadata (the last LLM step of the plan)."""
    session = load_session(folder)
    assert session.structured is not None
    assessment = Assessment.model_validate_json(state.recall(keys.ASSESSMENT) or "")
    cached = state.recall(keys.WFS_PLAN)
    if cached is None:
        explorations, _ = explorations_for(state, assessment.angles if assessment.needs_exploration else [])
        answer = provider.run(GenerateTasksStep(session_id=session.session_id, repo=repo,
                                                requirement=session.description, structured=session.structured,
                                                assessment=assessment, explorations=explorations,
                                                constraints=planning_constraints(folder),
                                                critical_files=load_context(folder).critical_files()))
        assert isinstance(answer, WfsPlanDraft)
        fixed, repairs = repair_wfs_draft(answer, repo, session.session_id)
        cached = state.remember_once(keys.WFS_PLAN, with_repairs(fixed, repairs))
    draft, repairs = WfsPlanDraft.model_validate_json(cached), recalled_repairs(cached)
    draft, again = repair_wfs_draft(draft, repo, session.session_id)  # a no-op unless the repository changed
    repairs = [*answer_repairs(state), *repairs, *again]
    problems = check_plan([LoadedTask(task=t, location=f".task/{t.id}.json", legacy=False) for t in draft.tasks],
                          Path(repo))
    # A dependency cycle is written as it is: `wfqueue verify` (run by `plan -y`) reports it for a fix.
    problems = [p for p in problems if p.code != "dependency_cycle"]
    if problems:
        raise ProviderError("the generated tasks do not validate: " + "; ".join(str(p) for p in problems[:5]),
                            hint="rerun `wfqueue plan --session` once the provider's answer is fixed")
    timestamp = state.remember_once(keys.GENERATED_AT, now_iso())
    metadata: dict[str, Any] = {"timestamp": timestamp, "source": "wfqueue-workflow",
                                "plan_type": draft.tasks[0].type or "feature",
                "provider": provider.name, "repairs": [r.model_dump() for r in repairs]}
    if prices is not None:
        # The generation's own calls are recorded already (the metered provider records before it returns).
        # Kept in plan.json so IMPL_PLAN.md re-rendered by replan still says what planning used.
        report = write_usage_file(state, prices, folder)
        metadata["usage"] = {"summary": usage_line(report), "tokens": report.total.usage.total,
                             "cost_usd": round(report.total.cost_usd, 6), "calls": report.total.calls}
    overview = PlanOverview(summary=draft.summary, approach=draft.approach, task_ids=[t.id for t in draft.tasks],
                            task_count=len(draft.tasks), complexity=assessment.complexity,
                            recommended_execution=execution_strategy(draft.tasks),
                            design_decisions=draft.design_decisions,
                            metadata=metadata)
    (folder / TASK_DIR).mkdir(parents=True, exist_ok=True)
    keep = {f"{t.id}.json" for t in draft.tasks}
    for stale in task_files(folder):
        if stale.name not in keep:  # left by an earlier, interrupted generation
            remove(stale)  # through fsio: a copy of the folder on another machine loses it too
    for task in draft.tasks:
        atomic_write_json(task_path(folder, task.id), task.dump())
    atomic_write_json(folder / PLAN_FILE, overview.model_dump(mode="json", by_alias=True, exclude_none=True))
    context = load_context(folder)
    atomic_write_text(folder / IMPL_PLAN_FILE, render_impl_plan(session, overview, draft.tasks, context,
                                                                planning_constraints(folder)))
    atomic_write_text(folder / TODO_FILE, render_todo(session.structured.goal, draft.tasks))
    notes = load_notes(folder)
    notes.task_generation = [f"{len(draft.tasks)} task(s): {', '.join(t.id for t in draft.tasks)}",
                             f"execution: {overview.recommended_execution}", draft.approach]
    save_notes(folder, notes)
    return draft
