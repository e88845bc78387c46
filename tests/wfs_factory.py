"""Build complete workflow sessions on disk for tests, in the format `wfqueue plan` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wfqueue.fsio import atomic_write_json, atomic_write_text
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import ContextPackage, PlanOverview, StructuredInput, WorkflowSession
from wfqueue.workflow_session.render import PlanningNotes, render_impl_plan, render_notes, render_todo
from wfqueue.workflow_session.session import (
    IMPL_PLAN_FILE,
    NOTES_FILE,
    PLAN_FILE,
    PROCESS_DIR,
    TODO_FILE,
    active_root,
    save_session,
    task_path,
)


def task(n: int, title: str, files: list[str], depends: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": f"IMPL-{n}",
        "title": title,
        "description": f"{title}: change {', '.join(files)}",
        "depends_on": [f"IMPL-{d}" for d in depends or []],
        "type": "feature",
        "effort": "medium",
        "focus_paths": files,
        "files": [{"path": f, "action": "modify", "conflict_risk": "low"} for f in files],
        "convergence": {
            "criteria": [f"{files[0]} implements {title.lower()}"],
            "verification": "python -m pytest -q",
            "definition_of_done": f"{title} done and tests pass",
        },
    }
    data.update(extra)
    return data


def make_session(repo: Path, goal: str, tasks: list[dict[str, Any]], session_id: str = "WFS-test-session",
                 risk: str = "low") -> Path:
    """A session as `wfqueue plan -y` leaves it: every artifact present and consistent."""
    folder = active_root(repo) / session_id
    (folder / PROCESS_DIR).mkdir(parents=True, exist_ok=True)
    parsed = [UnifiedTask.model_validate(t) for t in tasks]
    session = WorkflowSession(
        session_id=session_id, project=repo.name, description=goal, status="active",
        created_at="2026-11-22T08:00:00+00:00", repo=str(repo),
        structured=StructuredInput(goal=goal, scope="the files named by the tasks", context="existing code"),
        phases={"session": "done", "context": "done", "conflicts": "skipped", "tasks": "done"},
    )
    session.progress.current_tasks = [t.id for t in parsed]
    save_session(folder, session)
    for t in parsed:
        atomic_write_json(task_path(folder, t.id), t.dump())
    overview = PlanOverview(summary=goal, approach="change the named files", task_ids=[t.id for t in parsed],
                            task_count=len(parsed), complexity="Medium", recommended_execution="Sequential",
                            _metadata={"timestamp": "2026-11-22T08:00:00+00:00", "source": "wfqueue-workflow",
                                       "plan_type": "feature"})
    atomic_write_json(folder / PLAN_FILE, overview.model_dump(mode="json", by_alias=True, exclude_none=True))
    context = ContextPackage(
        metadata={"task_description": goal, "timestamp": "2026-11-22T08:00:00+00:00", "keywords": goal.lower().split(),
                  "complexity": "Medium", "session_id": session_id},
        project_context={"architecture_patterns": [], "coding_conventions": {},
                         "tech_stack": {"language": "python", "frameworks": [], "libraries": [],
                                        "testing": ["pytest"]}},
        assets={"documentation": [], "source_code": [{"path": f, "role": "modify", "relevance_score": 0.9}
                                                     for t in parsed for f in t.focus_paths], "config": [],
                                                     "tests": []},
        dependencies={"internal": [], "external": []},
        conflict_detection={"risk_level": risk},
        exploration_results={"angles": [], "aggregated_insights": {"critical_files": [], "conflict_indicators": [],
                                                                   "clarification_needs": [], "constraints": []}},
        prioritized_context={"user_intent": {"goal": goal, "scope": "", "key_constraints": []},
                             "priority_tiers": {"critical": [], "high": [], "medium": [], "low": []},
                             "dependency_order": []},
    )
    atomic_write_json(folder / PROCESS_DIR / "context-package.json", context.model_dump(mode="json", by_alias=True))
    atomic_write_text(folder / IMPL_PLAN_FILE, render_impl_plan(session, overview, parsed, context, []))
    atomic_write_text(folder / TODO_FILE, render_todo(goal, parsed))
    notes = PlanningNotes(goal=goal, task_generation=[f"{len(parsed)} tasks"])
    atomic_write_json(folder / PROCESS_DIR / "planning-notes.json", notes.model_dump(mode="json"))
    atomic_write_text(folder / NOTES_FILE, render_notes(notes))
    return folder
