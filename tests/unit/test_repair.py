"""Semantic repair of provider tasks: each repair kind, determinism, offline answers untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wfqueue.collab.assemble import allocate
from wfqueue.collab.steps import repair_area
from wfqueue.lite.finding_checks import verify_findings
from wfqueue.lite.models import LitePlanDraft, VerifiedExploration
from wfqueue.lite.steps import recalled_repairs, repair_lite_draft, with_repairs
from wfqueue.plan_check import check_plan
from wfqueue.providers.base import AssessStep, GenerateTasksStep, LitePlanStep, PlanAreaStep, UnderstandStep
from wfqueue.providers.offline.explore import explore_angle
from wfqueue.providers.offline.provider import OfflineProvider
from wfqueue.repair import IdRanges, Repair, fill_source, format_id, repair_tasks
from wfqueue.tasks_file import LoadedTask
from wfqueue.unified_task import TaskSource, UnifiedTask
from wfqueue.workflow_session.steps import repair_wfs_draft
from wfqueue.workflow_session.structure import structure_input

EXISTING = {"pkg/a.py", "pkg/b.py", "README.md"}


def exists(rel: str) -> bool:
    return rel in EXISTING


def task(task_id: str, *, deps: list[str] | None = None, files: list[dict[str, Any]] | None = None,
         **extra: Any) -> UnifiedTask:
    return UnifiedTask.model_validate({
        "id": task_id, "title": f"title {task_id}", "description": "d", "depends_on": deps or [],
        "convergence": {"criteria": ["c"], "verification": "pytest", "definition_of_done": "done"},
        "files": files if files is not None else [{"path": "pkg/a.py", "action": "modify"}], **extra,
    })


def collab(tasks: list[UnifiedTask], id_range: tuple[int, int] = (1, 100), external: IdRanges | None = None):
    return repair_tasks(tasks, id_prefix="TASK-", id_range=id_range, exists=exists,
                        known_external_ids=external or set())


def kinds(repairs: list[Repair]) -> list[tuple[str, str]]:
    return [(r.kind, r.task_id) for r in repairs]


# -- each repair kind --------------------------------------------------------------------------


def test_ids_outside_the_range_are_renumbered_and_references_follow() -> None:
    tasks = [task("TASK-101"), task("TASK-007", deps=["TASK-101"]), task("TASK-950", deps=["TASK-101", "TASK-007"])]

    fixed, repairs = collab(tasks, (101, 200))

    assert [t.id for t in fixed] == ["TASK-101", "TASK-102", "TASK-103"]
    assert fixed[1].depends_on == ["TASK-101"]
    assert fixed[2].depends_on == ["TASK-101", "TASK-102"]
    assert kinds(repairs) == [("renumbered", "TASK-102"), ("renumbered", "TASK-103")]
    assert repairs[0].detail == "TASK-007 -> TASK-102 (outside the range TASK-101..TASK-200); " \
                                "references rewritten in TASK-103"
    assert repairs[1].detail == "TASK-950 -> TASK-103 (outside the range TASK-101..TASK-200)"
    assert all(check_plan([LoadedTask(task=t, location=t.id, legacy=False)], None) == [] for t in fixed[:1])


def test_own_task_wins_over_an_external_id_and_free_ids_are_the_smallest() -> None:
    # Agent 1 (TASK-001..100) wrote TASK-150, which is agent 2's range: a reference to it means its own task.
    tasks = [task("TASK-150"), task("TASK-001", deps=["TASK-150", "TASK-101"]), task("TASK-003")]

    fixed, repairs = collab(tasks, external=IdRanges("TASK-", [(101, 200)]))

    assert [t.id for t in fixed] == ["TASK-002", "TASK-001", "TASK-003"]
    assert fixed[1].depends_on == ["TASK-002", "TASK-101"]
    assert kinds(repairs) == [("renumbered", "TASK-002")]


def test_duplicates_and_malformed_ids_are_renumbered() -> None:
    tasks = [task("TASK-001"), task("TASK-001", deps=["TASK-001"]), task("TASK-1"), task("task-4"),
             task("TASK-005", deps=["TASK-001"])]

    fixed, repairs = collab(tasks)

    assert [t.id for t in fixed] == ["TASK-001", "TASK-002", "TASK-003", "TASK-004", "TASK-005"]
    assert fixed[4].depends_on == ["TASK-001"], "a reference to a duplicated id means its first task"
    assert fixed[1].depends_on == ["TASK-001"], "also from the duplicate itself"
    assert [r.detail for r in repairs] == [
        "TASK-001 -> TASK-002 (duplicate id)",
        "TASK-1 -> TASK-003 (not a TASK-001-style id)",
        "task-4 -> TASK-004 (not a TASK-001-style id)",
    ]


def test_sequential_ids_follow_the_task_order() -> None:
    tasks = [task("IMPL-2"), task("IMPL-1", deps=["IMPL-2"]), task("IMPL-7", deps=["IMPL-1", "IMPL-2"])]

    fixed, repairs = repair_tasks(tasks, id_prefix="IMPL-", id_range=(1, 3), exists=exists, digits=1,
                                  sequential=True)

    assert [t.id for t in fixed] == ["IMPL-1", "IMPL-2", "IMPL-3"]
    assert fixed[1].depends_on == ["IMPL-1"] and fixed[2].depends_on == ["IMPL-2", "IMPL-1"]
    assert kinds(repairs) == [("renumbered", "IMPL-1"), ("renumbered", "IMPL-2"), ("renumbered", "IMPL-3")]
    assert repairs[0].detail.startswith("IMPL-2 -> IMPL-1 (ids follow the task order)")


def test_files_that_do_not_exist_are_dropped_unless_created() -> None:
    tasks = [
        task("TASK-001", files=[{"path": "pkg/a.py"}, {"path": "pkg/ghost.py", "action": "modify"},
                                {"path": "pkg/new.py", "action": "create"}, {"path": "./pkg/b.py", "action": "delete"},
                                {"path": "pkg/gone.py", "action": "delete"}]),
        task("TASK-002", files=[{"path": "../outside.py", "action": "create"}, {"path": "/etc/passwd"}]),
        task("TASK-003", files=[]),
    ]

    fixed, repairs = collab(tasks)

    assert [f.path for f in fixed[0].files] == ["pkg/a.py", "pkg/new.py", "./pkg/b.py"]
    # A task none of whose files can be changed is dropped: kept with no files, it read as planned and validated,
    # and its execution paid an agent whose every change was rejected. One naming no file is left as it is.
    assert [t.id for t in fixed] == ["TASK-001", "TASK-003"] and fixed[1] is tasks[2]
    assert [(r.kind, r.task_id, r.detail) for r in repairs] == [
        ("dropped_task", "TASK-002", "dropped TASK-002 (title TASK-002): none of its files can be changed "
                                     "(../outside.py is outside the repository; /etc/passwd is outside the "
                                     "repository)"),
        ("dropped_file", "TASK-001", "dropped pkg/ghost.py (modify): it does not exist but is to be modified"),
        ("dropped_file", "TASK-001", "dropped pkg/gone.py (delete): it does not exist but is to be deleted"),
    ]
    assert check_plan([LoadedTask(task=t, location=t.id, legacy=False) for t in fixed], None, exists) == []


def test_a_file_the_repository_has_is_modified_not_created() -> None:
    """A coding agent told to create a file that is there writes it from scratch: its code would be lost."""
    tasks = [task("TASK-007", files=[{"path": "./pkg/b.py", "action": "create"}, {"path": "pkg/new.py",
                                                                                  "action": "create"}])]

    fixed, repairs = collab(tasks)

    assert [(f.path, f.action) for f in fixed[0].files] == [("./pkg/b.py", "modify"), ("pkg/new.py", "create")]
    assert [(r.kind, r.task_id, r.detail) for r in repairs] == [
        ("created_to_modified", "TASK-007", "./pkg/b.py is to be modified, not created: the repository has it")]
    assert collab(fixed)[1] == []  # repaired once, nothing left to repair


def test_files_no_task_may_change_as_named_are_dropped_so_the_plan_still_checks() -> None:
    """check_plan refuses a folder named as a file, a file under .git/ or .workflow/ and one file given two
    actions; the planners' repair kept them, so a plan a model wrote that way failed as if the repository had
    changed while it was planned."""
    tasks = [task("TASK-001", files=[{"path": "pkg/a.py"}, {"path": "pkg", "action": "modify"},
                                     {"path": ".git/config", "action": "modify"},
                                     {"path": ".workflow/notes.md", "action": "create"},
                                     {"path": "pkg/a.py", "action": "delete"}])]
    fixed, repairs = repair_tasks(tasks, id_prefix="TASK-", id_range=(1, 100), exists=exists,
                                  is_folder=lambda rel: rel == "pkg")
    assert [(f.path, f.action) for f in fixed[0].files] == [("pkg/a.py", "modify")]
    assert [r.detail for r in repairs] == [
        "dropped pkg (modify): it is a folder, not a file",
        "dropped .git/config (modify): it is inside .git/, which no task may change",
        "dropped .workflow/notes.md (create): it is inside .workflow/, which no task may change",
        "dropped pkg/a.py (delete): it is both modified and deleted by this task",
    ]
    assert check_plan([LoadedTask(task=t, location=t.id, legacy=False) for t in fixed], None, exists) == []


def test_the_repair_drops_exactly_what_validate_refuses_on_disk(tmp_path: Path) -> None:
    """A plan's files are judged by one rule: what `wfqueue validate` refuses in a real repository is what the
    planners' repair drops, entry for entry, and nothing else; but a create of a file the repository has, which
    the repair makes a modify."""
    (tmp_path / "pkg").mkdir()
    for rel in EXISTING:
        (tmp_path / rel).write_text("x\n")
    entries = [{"path": "pkg/a.py"}, {"path": "pkg", "action": "modify"}, {"path": "pkg/ghost.py", "action": "delete"},
               {"path": "./pkg/b.py", "action": "delete"}, {"path": "pkg/b.py", "action": "modify"},
               {"path": "pkg/new.py", "action": "create"}, {"path": ".git/HEAD"}, {"path": "../x.py"},
               {"path": "README.md", "action": "create"}]
    planned = task("TASK-001", files=entries)
    problems = check_plan([LoadedTask(task=planned, location="TASK-001", legacy=False)], tmp_path)
    _, repairs = repair_tasks([planned], id_prefix="TASK-", id_range=(1, 100),
                              exists=lambda rel: (tmp_path / rel).exists(),
                              is_folder=lambda rel: (tmp_path / rel).is_dir())
    refused = [p.message.removeprefix("file ").split(";")[0] for p in problems]
    dropped = [r.detail.removeprefix("dropped ").split(";")[0].replace(f" ({a}): it ", " ")
               for r in repairs for a in ("modify", "delete", "create") if f" ({a}): it " in r.detail]
    assert dropped == [
        "pkg is a folder, not a file",
        "pkg/ghost.py does not exist but is to be deleted",
        "pkg/b.py is both deleted and modified by this task",
        ".git/HEAD is inside .git/, which no task may change",
        "../x.py is outside the repository",
    ]
    assert refused == [*dropped, "README.md is in the repository already but is to be created"]
    assert [r.detail for r in repairs if r.kind == "created_to_modified"] == [
        "README.md is to be modified, not created: the repository has it"]


def test_a_file_the_answer_creates_is_kept_for_the_tasks_that_come_after_its_creator() -> None:
    """The repair dropped "modify src/new.py" from a task depending on the one creating it (the file is not on
    disk yet), so the plan lost the change that extends the new module. Only a task that does not come after
    the creator loses the entry, and the repair says why, naming the creator by its id after the repair."""
    tasks = [task("T-1", files=[{"path": "pkg/new.py", "action": "create"}]),
             task("T-2", deps=["T-1"], files=[{"path": "pkg/new.py", "action": "modify"}]),
             task("T-3", files=[{"path": "pkg/new.py", "action": "modify"}, {"path": "pkg/a.py"}])]
    fixed, repairs = collab(tasks)
    assert [[(f.path, f.action) for f in t.files] for t in fixed] == [
        [("pkg/new.py", "create")], [("pkg/new.py", "modify")], [("pkg/a.py", "modify")]]
    assert fixed[1].depends_on == ["TASK-001"]
    assert [r.detail for r in repairs if r.kind == "dropped_file"] == [
        "dropped pkg/new.py (modify): it does not exist until TASK-001 creates it, and this task does not depend "
        "on TASK-001"]
    assert check_plan([LoadedTask(task=t, location=t.id, legacy=False) for t in fixed], None, exists) == []


def test_a_dependency_named_twice_is_kept_once() -> None:
    """["IMPL-1", "IMPL-1"] was written as it came; validate and verify said nothing."""
    tasks = [task("TASK-001"), task("TASK-002", deps=["TASK-001", "TASK-001", "TASK-120", "TASK-120"])]

    fixed, repairs = collab(tasks, external=IdRanges("TASK-", [(101, 200)]))

    assert fixed[1].depends_on == ["TASK-001", "TASK-120"]
    assert [(r.kind, r.task_id, r.detail) for r in repairs] == [
        ("removed_duplicate_dependency", "TASK-002", "TASK-002 named TASK-001 more than once"),
        ("removed_duplicate_dependency", "TASK-002", "TASK-002 named TASK-120 more than once")]


def test_unknown_and_self_dependencies_are_removed_external_ones_kept() -> None:
    tasks = [task("TASK-001", deps=["TASK-001", "TASK-102", "TASK-999", "TASK-150"]),
             task("TASK-150", deps=["TASK-150", "TASK-003"])]

    fixed, repairs = collab(tasks, external=IdRanges("TASK-", [(101, 200)]))

    assert fixed[0].depends_on == ["TASK-102", "TASK-002"]
    assert fixed[1].id == "TASK-002" and fixed[1].depends_on == []
    assert [(r.kind, r.task_id, r.detail) for r in repairs] == [
        ("removed_self_dependency", "TASK-001", "TASK-001 depended on itself (TASK-001)"),
        ("removed_unknown_dependency", "TASK-001", "removed dependency on TASK-999: no task has this id"),
        ("renumbered", "TASK-002", "TASK-150 -> TASK-002 (outside the range TASK-001..TASK-100); "
                                   "references rewritten in TASK-001"),
        ("removed_self_dependency", "TASK-002", "TASK-002 depended on itself (TASK-150)"),
        ("removed_unknown_dependency", "TASK-002", "removed dependency on TASK-003: no task has this id"),
    ]


def test_a_dependency_on_an_id_the_repair_frees_is_not_resurrected() -> None:
    # TASK-002 is unknown when the provider answers; the repair later gives that id to TASK-500.
    tasks = [task("TASK-001", deps=["TASK-002"]), task("TASK-500")]

    fixed, repairs = collab(tasks)

    assert fixed[1].id == "TASK-002" and fixed[0].depends_on == []
    assert kinds(repairs) == [("removed_unknown_dependency", "TASK-001"), ("renumbered", "TASK-002")]


def test_cycles_are_left_for_conflict_detection() -> None:
    tasks = [task("TASK-001", deps=["TASK-002"]), task("TASK-002", deps=["TASK-001"]),
             task("TASK-003", deps=["TASK-101"])]

    fixed, repairs = collab(tasks, external=IdRanges("TASK-", [(101, 200)]))

    assert repairs == [] and fixed == tasks
    loaded = [LoadedTask(task=t, location=t.id, legacy=False) for t in fixed[:2]]
    assert [p.code for p in check_plan(loaded, None, exists)] == ["dependency_cycle"]


def test_a_task_a_full_range_has_no_id_for_is_dropped_and_references_to_it_removed() -> None:
    """Kept under its own id, an agent's 101st task took the next agent's first id: two TASK-101 in one plan, its
    graph and dependency section mixing the two agents up, and `validate` and `execute` refused the plan."""
    tasks = [task("TASK-001"), task("TASK-002", deps=["TASK-101"]), task("TASK-101")]

    fixed, repairs = collab(tasks, (1, 2))

    assert [t.id for t in fixed] == ["TASK-001", "TASK-002"] and fixed[1].depends_on == []
    assert [(r.kind, r.task_id) for r in repairs] == [("dropped_task", "TASK-101"),
                                                      ("removed_unknown_dependency", "TASK-002")]
    assert "the range TASK-001..TASK-002 has no id left for it" in repairs[0].detail
    # Where the next agent's ids are known (as in a collab plan): the reference still goes, not to its TASK-101.
    fixed, repairs = collab(tasks, (1, 2), external=IdRanges("TASK-", [(101, 200)]))
    assert fixed[1].depends_on == [] and "the dropped task TASK-101" in repairs[1].detail
    # A dropped task ahead of the others: each kept task's own repairs stay its own.
    shifted = [task("X-1", files=[{"path": "pkg/x.py", "action": "create"}]),
               task("TASK-001"), task("TASK-002", files=[{"path": "pkg/b.py", "action": "create"}])]
    fixed, repairs = repair_tasks(shifted, id_prefix="TASK-", id_range=(1, 2), exists=lambda path: True)
    assert [t.id for t in fixed] == ["TASK-001", "TASK-002"]
    assert [(r.kind, r.task_id) for r in repairs if r.kind == "created_to_modified"] == [
        ("created_to_modified", "TASK-002")]


def test_repair_is_deterministic_idempotent_and_pure() -> None:
    tasks = [task("TASK-300", deps=["TASK-300", "TASK-404", "TASK-001"],
                  files=[{"path": "pkg/nope.py"}, {"path": "pkg/a.py"}]),
             task("TASK-001", deps=["TASK-300"]), task("TASK-001")]
    before = [t.model_dump() for t in tasks]

    first = collab(tasks)
    second = collab([UnifiedTask.model_validate(d) for d in before])

    assert [t.model_dump() for t in first[0]] == [t.model_dump() for t in second[0]]
    assert first[1] == second[1] and len(first[1]) == 5
    assert [t.model_dump() for t in tasks] == before, "the input was changed"
    again, more = collab(first[0])
    assert more == [] and [t.model_dump() for t in again] == [t.model_dump() for t in first[0]]


def test_fill_source_only_where_missing() -> None:
    own = TaskSource(tool="wfqueue-lite", session_id="s0", original_id="TASK-009")
    tasks = [task("TASK-001"), task("TASK-002", source=own.model_dump())]

    filled = fill_source(tasks, tool="wfqueue-collab", session_id="CPLAN-x")

    assert filled[0].source == TaskSource(tool="wfqueue-collab", session_id="CPLAN-x", original_id="TASK-001")
    assert filled[1] is tasks[1]
    assert format_id("TASK-", 1234) == "TASK-1234" and format_id("IMPL-", 3, 1) == "IMPL-3"


def test_repairs_travel_with_the_cached_draft() -> None:
    draft = LitePlanDraft(understanding="u", tasks=[task("TASK-001"), task("TASK-002")])
    repairs = [Repair(kind="dropped_file", task_id="TASK-001", detail="dropped x")]

    cached = with_repairs(draft, repairs)

    assert LitePlanDraft.model_validate_json(cached) == LitePlanDraft.model_validate_json(
        draft.model_dump_json(exclude_none=True))
    assert recalled_repairs(cached) == repairs
    assert recalled_repairs(draft.model_dump_json()) == []


# -- the offline planner's answers come through unchanged ---------------------------------------

REQUIREMENTS = [
    "Add per-user rate limiting to the API",
    "Refactor the storage layer and authentication into a modular architecture",
    "Fix the token expiry check in notes_api/auth/tokens.py",
]


@pytest.mark.parametrize("requirement", REQUIREMENTS)
def test_offline_collab_answers_are_not_repaired(sample_repo: Path, requirement: str) -> None:
    provider = OfflineProvider()
    for max_agents in (2, 4):
        draft = provider.run(UnderstandStep(session_id="CPLAN-t", repo=str(sample_repo), requirement=requirement,
                                            max_agents=max_agents))
        analysis = allocate(draft, "CPLAN-t", requirement, max_agents)  # type: ignore[arg-type]
        for sub in analysis.sub_domains:
            area = provider.run(PlanAreaStep(session_id="CPLAN-t", repo=str(sample_repo), requirement=requirement,
                                             analysis=analysis, focus_area=sub.focus_area))
            fixed, repairs = repair_area(analysis, sub.focus_area, area, str(sample_repo))  # type: ignore[arg-type]
            assert repairs == [], (sub.focus_area, repairs)
            assert fixed.model_dump() == area.model_dump()


@pytest.mark.parametrize("requirement", REQUIREMENTS)
def test_offline_lite_and_workflow_answers_are_not_repaired(sample_repo: Path, requirement: str) -> None:
    provider = OfflineProvider()
    repo = str(sample_repo)
    assessment = provider.run(AssessStep(session_id="s", repo=repo, requirement=requirement, force_explore=True))
    explorations = []
    for angle in assessment.angles:  # type: ignore[attr-defined]
        findings = explore_angle(provider.index(repo), requirement, angle,
                                 lambda p: (sample_repo / p).read_text(encoding="utf-8", errors="replace"))
        explorations.append(VerifiedExploration(findings=findings, checks=verify_findings(sample_repo, findings),
                                                provider="offline", timestamp="t"))
    lite = provider.run(LitePlanStep(session_id="s", repo=repo, requirement=requirement, assessment=assessment,
                                     explorations=explorations, answers=[]))
    fixed, repairs = repair_lite_draft(lite, repo, "s")  # type: ignore[arg-type]
    assert repairs == [] and fixed.model_dump() == lite.model_dump()
    wfs = provider.run(GenerateTasksStep(session_id="WFS-s", repo=repo, requirement=requirement,
                                         structured=structure_input(requirement), assessment=assessment,
                                         explorations=explorations, constraints=["keep the API"]))
    fixed_wfs, repairs = repair_wfs_draft(wfs, repo, "WFS-s")  # type: ignore[arg-type]
    assert repairs == [] and fixed_wfs.model_dump() == wfs.model_dump()


def test_id_ranges_hold_the_canonical_ids_of_their_ranges_only() -> None:
    others = IdRanges("TASK-", [(101, 200), (301, 400)])
    assert all(format_id("TASK-", n) in others for n in (101, 150, 200, 301, 400))
    assert not any(task_id in others for task_id in ("TASK-100", "TASK-201", "TASK-300", "TASK-401", "TASK-0150",
                                                     "TASK-150x", "task-150", "IMPL-150", 150, "TASK-" + "9" * 5000))
    assert "TASK-001" not in IdRanges("TASK-", [])


def test_a_file_a_dependency_deletes_may_be_created_again() -> None:
    """The repair made every create of a file the repository has a modify, also in the task after the one
    deleting it, which validate accepts: the execution then told the agent to modify a file its dependency had
    deleted."""
    tasks = [task("TASK-001", files=[{"path": "pkg/a.py", "action": "delete"}]),
             task("TASK-002", deps=["TASK-001"], files=[{"path": "pkg/a.py", "action": "create"}]),
             task("TASK-003", files=[{"path": "pkg/b.py", "action": "create"}])]
    fixed, repairs = collab(tasks)
    assert [[(f.path, f.action) for f in t.files] for t in fixed] == [
        [("pkg/a.py", "delete")], [("pkg/a.py", "create")], [("pkg/b.py", "modify")]]
    assert [r.kind for r in repairs] == ["created_to_modified"]


def test_a_task_after_a_dropped_one_still_waits_for_what_that_one_waited_for() -> None:
    """T3 modifies the file T1 creates, through T2 (dropped: its only file is missing): T3 lost its dependency, and
    then its file ("does not exist until TASK-001 creates it"), and was left with no files."""
    tasks = [task("TASK-001", files=[{"path": "pkg/new.py", "action": "create"}]),
             task("TASK-002", deps=["TASK-001"], files=[{"path": "docs/missing.md", "action": "modify"}]),
             task("TASK-003", deps=["TASK-002"], files=[{"path": "pkg/new.py", "action": "modify"}])]
    fixed, repairs = repair_tasks(tasks, id_prefix="TASK-", id_range=(1, 3), exists=exists, sequential=True)
    assert [(t.id, t.depends_on, [f.path for f in t.files]) for t in fixed] == [
        ("TASK-001", [], ["pkg/new.py"]), ("TASK-002", ["TASK-001"], ["pkg/new.py"])]
    assert [(r.kind, r.task_id, r.detail) for r in repairs] == [
        ("dropped_task", "TASK-002", "dropped TASK-002 (title TASK-002): none of its files can be changed "
                                     "(docs/missing.md does not exist but is to be modified)"),
        ("renumbered", "TASK-002", "TASK-003 -> TASK-002 (ids follow the task order)"),
        ("removed_unknown_dependency", "TASK-002", "its dependency on the dropped task TASK-002 passed on to what "
                                                   "that one waited for: TASK-001")]


def test_a_plan_whose_every_task_has_no_usable_file_keeps_them_for_validation_to_name() -> None:
    """Dropped, the lite plan's one task left an empty task list, which the plan's model refuses: the remembered
    answer failed the plan and every resume of it. Kept (its files emptied), `validate` and `execute` refuse it."""
    tasks = [task("TASK-001", files=[{"path": "pkg/ghost.py", "action": "modify"}])]
    fixed, repairs = repair_tasks(tasks, id_prefix="TASK-", id_range=(1, 3), exists=exists, sequential=True)
    assert [t.files for t in fixed] == [[]]
    assert [r.detail for r in repairs] == [
        "dropped pkg/ghost.py (modify): it does not exist but is to be modified; the task has no files left"]


def test_a_task_whose_only_file_a_dropped_task_created_is_dropped_in_turn() -> None:
    """T3 modifies the file T2 creates; T2 is dropped (it both modifies and creates it, neither of which can be): T3
    was kept with no files left."""
    tasks = [task("TASK-001"),
             task("TASK-002", files=[{"path": "pkg/new.py", "action": "modify"},
                                     {"path": "pkg/new.py", "action": "create"}]),
             task("TASK-003", deps=["TASK-002"], files=[{"path": "pkg/new.py", "action": "modify"}])]
    fixed, repairs = repair_tasks(tasks, id_prefix="TASK-", id_range=(1, 3), exists=exists, sequential=True)
    assert [t.id for t in fixed] == ["TASK-001"] and fixed[0].files
    assert [(r.kind, r.task_id) for r in repairs] == [("dropped_task", "TASK-002"), ("dropped_task", "TASK-003")]
