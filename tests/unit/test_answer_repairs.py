"""Repairs of lite-plan and workflow-session answers that validate but cannot be used as they are."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from wfqueue.lite.angle_repair import repair_assessment
from wfqueue.lite.models import AngleFindings, Assessment
from wfqueue.lite.steps import run_exploration
from wfqueue.plan_check import check_plan
from wfqueue.providers.base import Step
from wfqueue.repair import break_cycles
from wfqueue.state import SessionState, redis_client
from wfqueue.tasks_file import LoadedTask
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.conflict_repair import repair_conflicts
from wfqueue.workflow_session.models import SessionConflict, Strategy
from wfqueue.workflow_session.session_conflicts import ConflictList, resolve


def assessment(angles: list[str], complexity: str = "Medium", needs: bool = True) -> Assessment:
    return Assessment(complexity=complexity, scope="s", depth="d", risk="r", dependencies="x",  # type: ignore[arg-type]
                      preset="feature", angles=angles, needs_exploration=needs)


def test_angle_names_are_slugified_and_alike_ones_merged() -> None:
    fixed, repairs = repair_assessment(
        assessment(["Integration_Points", "integration points", "Security", "data/flow"]), "Add OAuth", False)
    assert fixed.angles == ["integration-points", "security", "data-flow"]
    assert [r.kind for r in repairs] == ["renamed_angle", "renamed_angle", "merged_angle", "renamed_angle",
                                         "renamed_angle"]


def test_angles_past_four_are_dropped_and_none_gets_the_preset() -> None:
    fixed, repairs = repair_assessment(assessment(["a", "b", "c", "d", "e", "f"]), "x", False)
    assert fixed.angles == ["a", "b", "c", "d"]
    assert [(r.kind, r.task_id) for r in repairs] == [("dropped_angle", "e"), ("dropped_angle", "f")]
    fixed, repairs = repair_assessment(assessment(["!!"], complexity="High"), "Fix the broken login form", False)
    assert fixed.angles == ["error-handling", "dataflow", "state-management", "edge-cases"]
    assert [r.kind for r in repairs] == ["dropped_angle", "default_angles"]
    fixed, _ = repair_assessment(assessment([], complexity="Low"), "Add a field", False)
    assert fixed.angles == ["patterns"]


def test_forced_exploration_is_kept_and_a_good_answer_is_untouched() -> None:
    fixed, repairs = repair_assessment(assessment(["security"], needs=False), "x", True)
    assert fixed.needs_exploration and "--explore given" in fixed.exploration_reasons
    assert [r.kind for r in repairs] == ["forced_exploration"]
    good = assessment(["security", "unknown-angle"])
    assert repair_assessment(good, "x", False) == (good, [])  # an angle without vocabulary is explored generically


# -- lite plans: dependency cycles -----------------------------------------------------------------------



def task(task_id: str, deps: list[str]) -> UnifiedTask:
    return UnifiedTask.model_validate({
        "id": task_id, "title": f"title {task_id}", "description": "d", "depends_on": deps,
        "convergence": {"criteria": ["c"], "verification": "pytest", "definition_of_done": "done"}, "files": []})


def test_a_cycle_loses_the_dependency_on_the_later_task_only() -> None:
    tasks = [task("TASK-001", ["TASK-003"]), task("TASK-002", ["TASK-001"]), task("TASK-003", ["TASK-002"]),
             task("TASK-004", ["TASK-003", "TASK-005"]), task("TASK-005", [])]
    fixed, repairs = break_cycles(tasks)
    assert [t.depends_on for t in fixed] == [[], ["TASK-001"], ["TASK-002"], ["TASK-003", "TASK-005"], []]
    assert [(r.kind, r.task_id) for r in repairs] == [("removed_cyclic_dependency", "TASK-001")]
    assert check_plan([LoadedTask(task=t, location=t.id, legacy=False) for t in fixed], None) == []
    assert fixed[3] is tasks[3]  # a forward dependency that closes no cycle is kept, the task untouched


# -- workflow sessions: conflict ids and recommendations ----------------------------------------------------


def conflict(conflict_id: str, recommended: int = 0) -> SessionConflict:
    strategies = [Strategy(name=f"s{n}", approach="a", complexity="Low", risk="Low",
                           modifications=[f"{conflict_id} m{n}"])
                  for n in range(2)]
    return SessionConflict(id=conflict_id, category="API", severity="High", title="t", description="d",
                           strategies=strategies, recommended=recommended)


def test_conflicts_alike_in_id_are_renumbered_so_each_choice_resolves_its_own() -> None:
    answer = ConflictList(conflicts=[conflict("CON-001"), conflict("CON-001", recommended=1), conflict("C3", 7)])
    fixed, repairs = repair_conflicts(answer)
    assert [c.id for c in fixed.conflicts] == ["CON-001", "CON-002", "CON-003"]
    assert fixed.conflicts[2].recommended == 0
    assert [(r.kind, r.task_id) for r in repairs] == [("renumbered", "CON-002"), ("renumbered", "CON-003"),
                                                      ("reset_recommendation", "CON-003")]
    resolution = resolve("s", "t", fixed.conflicts, {c.id: c.recommended for c in fixed.conflicts})
    assert [r.strategy_name for r in resolution.resolved_conflicts] == ["s0", "s1", "s0"]
    good = ConflictList(conflicts=[conflict("CON-001")])
    assert repair_conflicts(good) == (good, [])


# -- explorations: the angle is the one asked for -----------------------------------------------------------


class Findings:
    name = "findings"
    model = None

    def run(self, step: Step) -> BaseModel:
        return AngleFindings(angle="../../etc/passwd")


def test_findings_naming_another_angle_are_filed_under_the_angle_asked_for(redis_url: str, tmp_path: Path) -> None:
    state = SessionState(redis_client(redis_url, 2.0), "S-angle", ttl_s=600)
    state.reset()
    exploration = run_exploration(state, Findings(), tmp_path, str(tmp_path), "r", "security",
                                  "w")  # type: ignore[arg-type]
    assert exploration.findings.angle == "security"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("exploration-")] == ["exploration-security.md"]
