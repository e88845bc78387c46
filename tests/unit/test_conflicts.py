"""Conflict detection: each type found in a crafted plan, none in a clean one."""

from __future__ import annotations

from wfqueue.collab.conflicts import detect_conflicts
from wfqueue.collab.models import ModificationPoint, NoteTask
from wfqueue.collab.note import parse_note
from wfqueue.collab.note_blocks import note_tasks, render_conflicts

RANGES = {"api": (1, 100), "auth": (101, 200), "db": (201, 300)}


def task(tid: str, area: str, deps: list[str] | None = None, points: list[str] | None = None, risk: str = "low"):
    mods = [ModificationPoint(file=p.split(":")[0], location=p.split(":")[1] if ":" in p else "", summary="x")
            for p in points or []]
    return NoteTask(id=tid, title=f"task {tid}", area=area, depends_on=deps or [], modification_points=mods,
                    conflict_risk=risk)


def clean_plan() -> list[NoteTask]:
    return [
        task("TASK-001", "api", [], ["api/routes.py:Router.add"], "medium"),
        task("TASK-002", "api", ["TASK-001"], ["api/routes.py:Router.dispatch"], "high"),
        task("TASK-101", "auth", ["TASK-001"], ["auth/tokens.py:issue"], "high"),
        task("TASK-201", "db", ["TASK-101"], ["db/models.py:User"], "low"),
    ]


def test_clean_plan_has_no_conflicts() -> None:
    assert detect_conflicts(clean_plan(), RANGES) == []
    assert render_conflicts([]).strip() == "✅ 无冲突检测到"


def types(conflicts) -> list[str]:
    return [c.type for c in conflicts]


def test_file_conflict_same_location_from_two_agents() -> None:
    plan = [*clean_plan(), task("TASK-102", "auth", [], ["api/routes.py:Router.add"], "low")]
    found = detect_conflicts(plan, RANGES)
    assert types(found) == ["file_conflict"]
    conflict = found[0]
    assert conflict.severity == "high"
    assert conflict.location == "api/routes.py:Router.add"
    assert conflict.tasks_involved == ["TASK-001", "TASK-102"]
    assert conflict.agents_involved == ["api", "auth"]


def test_same_file_same_agent_is_not_a_conflict() -> None:
    plan = [*clean_plan(), task("TASK-003", "api", [], ["api/routes.py:Router.add"], "high")]
    assert detect_conflicts(plan, RANGES) == []


def test_dependency_cycle_reported_once_as_its_path() -> None:
    plan = clean_plan()
    plan[0] = task("TASK-001", "api", ["TASK-201"], ["api/routes.py:Router.add"], "medium")
    found = detect_conflicts(plan, RANGES)
    assert types(found) == ["dependency_cycle"]
    assert found[0].severity == "critical"
    assert found[0].tasks_involved == ["TASK-001", "TASK-201", "TASK-101"]
    assert "TASK-001 → TASK-201 → TASK-101 → TASK-001" in found[0].description


def test_self_dependency_is_a_cycle() -> None:
    plan = [*clean_plan(), task("TASK-202", "db", ["TASK-202"])]
    assert types(detect_conflicts(plan, RANGES)) == ["dependency_cycle"]


def test_strategy_conflict_risky_tasks_of_two_agents_on_one_file() -> None:
    plan = [*clean_plan(), task("TASK-203", "db", [], ["auth/tokens.py:verify"], "medium")]
    found = detect_conflicts(plan, RANGES)
    assert types(found) == ["strategy_conflict"]
    assert found[0].file == "auth/tokens.py"
    assert found[0].agents_involved == ["auth", "db"]
    low_risk = [*clean_plan(), task("TASK-203", "db", [], ["auth/tokens.py:verify"], "low")]
    assert detect_conflicts(low_risk, RANGES) == []


def test_dangling_dependency() -> None:
    plan = [*clean_plan(), task("TASK-003", "api", ["TASK-999"])]
    found = detect_conflicts(plan, RANGES)
    assert types(found) == ["dangling_dependency"]
    assert found[0].tasks_involved == ["TASK-003", "TASK-999"]


def test_id_out_of_range() -> None:
    plan = [*clean_plan(), task("TASK-150", "api")]
    found = detect_conflicts(plan, RANGES)
    assert types(found) == ["id_out_of_range"]
    assert "TASK-001..TASK-100" in found[0].description


def test_numbering_is_stable_and_ordered_by_severity() -> None:
    plan = [*clean_plan(), task("TASK-150", "api"),
            task("TASK-102", "auth", ["TASK-102", "TASK-998"], ["api/routes.py:Router.add"], "high")]
    first = detect_conflicts(plan, RANGES)
    second = detect_conflicts(list(reversed(plan)), RANGES)
    assert [c.model_dump() for c in first] == [c.model_dump() for c in second]
    assert [c.id for c in first] == [f"CONFLICT-{n:03d}" for n in range(1, len(first) + 1)]
    assert types(first)[0] == "dependency_cycle"
    assert set(types(first)) == {"dependency_cycle", "file_conflict", "dangling_dependency", "id_out_of_range",
                                 "strategy_conflict"}


CRAFTED = """---
session_id: CPLAN-x-2026-11-22
agent_sections:
  api: [任务池 - Api, 上下文证据 - Api]
  auth: [任务池 - Auth, 上下文证据 - Auth]
agent_task_id_ranges:
  api: [1, 100]
  auth: [101, 200]
status: planning
---

## 任务池 - Api

### TASK-001: Router limits [api]
**状态**: pending
**复杂度**: Medium
**依赖**: TASK-101
**范围**: -
**修改点**:
- `app/router.py:Router.dispatch`: check the limit
**冲突风险**: high

## 任务池 - Auth

### TASK-101: Identify the user [auth]
**状态**: pending
**复杂度**: Low
**依赖**: TASK-001, TASK-404
**范围**: -
**修改点**:
- `app/router.py:Router.dispatch`: attach the user
**冲突风险**: medium

### TASK-250: Out of range [auth]
**状态**: pending
**复杂度**: Low
**依赖**: -
**范围**: -
**修改点**:
**冲突风险**: low
"""


def test_every_type_found_in_a_crafted_note() -> None:
    note = parse_note(CRAFTED)
    tasks, problems = note_tasks(note)
    assert problems == []
    ranges = {k: tuple(v) for k, v in note.front_matter["agent_task_id_ranges"].items()}
    assert sorted(types(detect_conflicts(tasks, ranges))) == [
        "dangling_dependency", "dependency_cycle", "file_conflict", "id_out_of_range", "strategy_conflict",
    ]
    rendered = render_conflicts(detect_conflicts(tasks, ranges))
    assert rendered.count("**决策状态**: [ ] 待解决") == 5
    assert "### CONFLICT-001: dependency cycle TASK-001 → TASK-101 → TASK-001" in rendered


def test_large_cycle_does_not_hit_the_recursion_limit() -> None:
    chain = [task(f"TASK-{n:03d}", "api", [f"TASK-{n + 1:03d}"]) for n in range(1, 5000)]
    chain.append(task("TASK-5000", "api", ["TASK-001"]))
    found = detect_conflicts(chain, {})
    assert types(found) == ["dependency_cycle"]
    assert len(found[0].tasks_involved) == 5000
