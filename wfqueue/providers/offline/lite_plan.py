"""Offline lite planning: the files the requirement is about, as 2-7 unified tasks. Pure.

The files come from the localizer (``analysis.localize``: the named files, or
the head of a field-weighted BM25 ranking sized by its scores), so a one-file
fix is planned as that change and its test. Changes are grouped by package (one
task per group, at most as many as the assessed complexity allows); a module is
created only for a new component the requirement names, and is the only thing
the changes wait for; the test task comes last and waits for the changes, so the
task graph is acyclic by construction. A document the change asks to update
("..., document it in README.md") is written after the changes too.

What the requirement asks for (intent.intent_of) decides the rest: tests only
("Add tests for ...") or documents only ("Update the README to ...") change no
code, one task per test file or document, each naming the code it is about;
docstrings change the code they name, with no test task.
"""

from __future__ import annotations

from wfqueue.analysis import RepoIndex
from wfqueue.analysis.files import is_test_path
from wfqueue.lite.models import Assessment, ClarificationAnswer, LitePlanDraft, VerifiedExploration
from wfqueue.providers.offline.changes import (
    already_named,
    change_phrase,
    criteria_for,
    effort_of,
    file_entries,
    has_file,
    import_order,
    requirement_brief,
    requirement_short,
    task_title,
    task_type,
    verification_for,
)
from wfqueue.providers.offline.docs_only import (
    as_docstrings_task,
    change_docs_task,
    docs_task,
    docstrings_scope,
    documents_beside_change,
)
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.new_module import new_module_path
from wfqueue.providers.offline.tests_only import tests_task
from wfqueue.providers.offline.tests_placement import covering_tests, where_tests_go
from wfqueue.providers.offline.understand import cluster_files, files_to_write, relevant_files
from wfqueue.unified_task import Convergence, TaskFile, TaskSource, TaskTest, UnifiedTask

MAX_TASKS = 7
# Change tasks by assessed complexity; the test task comes on top.
CHANGE_TASKS = {"Low": 1, "Medium": 2, "High": 4}


def _task(number: int, title: str, description: str, files: list[TaskFile], index: RepoIndex, requirement: str,
          session_id: str, depends: list[str], priority: str, notes: list[str]) -> UnifiedTask:
    paths = list(dict.fromkeys(f.path for f in files))
    existing = [p for p in paths if has_file(index, p)]
    # A test file the task creates is there when its verification runs: that file, not the whole suite.
    created_tests = [f.path for f in files if f.action == "create" and is_test_path(f.path)]
    tests = covering_tests(index, existing) + [p for p in created_tests if p not in existing]
    verification = verification_for(index, tests)
    efforts = [effort_of(index, p, requirement)[0] for p in existing] or ["medium"]
    effort = max(efforts, key=["small", "medium", "large"].index)
    tid = f"TASK-{number:03d}"
    return UnifiedTask(
        id=tid,
        title=title,
        description=description + (" " + " ".join(notes) if notes else ""),
        # A task changing tests alone tests (the plan's test task); it is no feature.
        type="testing" if paths and all(is_test_path(p) for p in paths) else task_type(requirement),
        priority=priority,
        effort=effort,
        scope=", ".join(paths),
        depends_on=depends,
        focus_paths=paths,
        files=files,
        convergence=Convergence(
            # Its test is looked for in the tests it writes (the plan's test task, a module holding its own tests).
            criteria=criteria_for(requirement, paths, [p for p in paths if p in tests or is_test_path(p)], verification,
                                  already_named(index, paths, requirement,
                                                tests_only=all(is_test_path(p) for p in paths))),
            verification=verification or "manual: exercise the changed code paths",
            definition_of_done=f"{', '.join(paths)} changed as described and the suite passes",
        ),
        test=TaskTest(commands=[verification] if verification else [], unit=tests),
        source=TaskSource(tool="wfqueue-lite", session_id=session_id, original_id=tid),
    )


def _tested_in_own_module(task: UnifiedTask, module: str) -> UnifiedTask:
    """``task`` asked to write the change's tests too, when it changes ``module``, which holds its own tests."""
    if not any(f.path == module for f in task.files):
        return task
    return task.model_copy(update={"description": f"{task.description} Add the tests of the change to {module}'s "
                                                  "own test module: a case that fails before it and passes after."})


def _one_file_tasks(index: RepoIndex, requirement: str, session_id: str, intent: str,
                    notes: list[str]) -> list[UnifiedTask]:
    """Tests or documents about code that stays as it is (file_task): one task per test file or document,
    none waiting for another."""
    build = tests_task if intent == "tests" else docs_task
    tasks: list[UnifiedTask] = []
    for number, (path, exists, code) in enumerate(files_to_write(index, requirement, intent == "tests")[:MAX_TASKS],
                                                  start=1):
        task = build(index, requirement, f"TASK-{number:03d}", path, exists, code)
        tasks.append(task.model_copy(update={
            "priority": "high" if number == 1 else "medium",
            "description": task.description + (" " + " ".join(notes) if notes else ""),
            "source": TaskSource(tool="wfqueue-lite", session_id=session_id, original_id=task.id)}))
    return tasks


def plan_tasks(index: RepoIndex, requirement: str, session_id: str, assessment: Assessment,
               explorations: list[VerifiedExploration], answers: list[ClarificationAnswer]) -> LitePlanDraft:
    short, brief = requirement_short(requirement), requirement_brief(requirement)
    notes = [f"Clarified: {a.question} → {a.answer}." for a in answers]
    intent = intent_of(requirement)
    if intent in ("tests", "docs"):
        tests = intent == "tests"
        written = _one_file_tasks(index, requirement, session_id, intent, notes)
        return LitePlanDraft(tasks=written, understanding=(
            f"{short}. Complexity {assessment.complexity} ({assessment.scope}; {assessment.depth}; "
            f"{assessment.risk}). The requirement asks for {'tests' if tests else 'documentation'} only: "
            f"{len(written)} task(s), one per {'test file' if tests else 'document'}, each naming the code it "
            f"{'tests' if tests else 'describes'}, which does not change." + (" " + " ".join(notes) if notes else "")))
    candidates = relevant_files(index, requirement)
    if intent == "docstrings":
        candidates = docstrings_scope(index, requirement, candidates)
    groups = cluster_files(index, candidates, max_agents=CHANGE_TASKS[assessment.complexity])
    # Documentation in the code creates no module (as a collab area decides: area.py).
    created = new_module_path(index, [p for g in groups for p in g], requirement) if intent == "change" else None
    # Documents the change asks to update as well ("..., document it in README.md"), after the change.
    documents = documents_beside_change(index, requirement) if intent == "change" else []
    tasks: list[UnifiedTask] = []
    if created:
        tasks.append(_task(1, f"Create {created} for: {change_phrase(requirement)}",
                           f"The requirement names a component the code lacks: create {created}.",
                           [TaskFile(path=created, action="create", changes=[f"new module for: {short}"],
                                     conflict_risk="low")],
                           index, requirement, session_id, [], "high", notes))
    for group in groups:
        if len(tasks) >= MAX_TASKS - 1 - len(documents[:MAX_TASKS - 2]):
            break
        ordered = import_order(index, group)
        files = [entry for path in ordered for entry in file_entries(index, path, requirement)]
        uses_new = bool(created) and group is groups[0]
        depends = [tasks[0].id] if uses_new else []
        targets = [f.target for f in files if f.target]
        where = ", ".join(ordered) if len(ordered) > 1 else ordered[0]
        description = (f"Change {where} ({', '.join(targets) or 'module level'}) for: {brief}."
                       + (f" Wire in {created}." if uses_new else ""))
        title = task_title(requirement, where, targets[0] if targets and len(ordered) == 1 else "")
        tasks.append(_task(len(tasks) + 1, title, description, files, index, requirement,
                           session_id, depends, "high" if group is groups[0] else "medium", notes))
    if intent == "docstrings" and tasks:
        # Documentation in the code: the suite still passing shows nothing else changed; no test is written.
        return LitePlanDraft(tasks=[as_docstrings_task(t) for t in tasks], understanding=(
            f"{short}. Complexity {assessment.complexity} ({assessment.scope}; {assessment.depth}; "
            f"{assessment.risk}). Documentation in the code: {len(tasks)} task(s), grouped by package, and no test "
            "task (the suite shows the code still works)." + (" " + " ".join(notes) if notes else "")))
    changes = [t.id for t in tasks]
    changed = list(dict.fromkeys(f.path for t in tasks for f in t.files))
    for path, exists in documents[:MAX_TASKS - 1 - len(tasks)]:
        task = change_docs_task(index, requirement, f"TASK-{len(tasks) + 1:03d}", path, exists, changed)
        tasks.append(task.model_copy(update={
            "depends_on": changes, "description": task.description + (" " + " ".join(notes) if notes else ""),
            "source": TaskSource(tool="wfqueue-lite", session_id=session_id, original_id=task.id)}))
    planned = {p for t in tasks for p in t.focus_paths if p not in dict(documents)}
    # Best first, as the localizer ranked them (a task lists its files in import order).
    covered = [p for p, _ in candidates if p in planned] + sorted(planned - {p for p, _ in candidates})
    test_file, exists = where_tests_go(index, covered, requirement, new_module=created)
    # A module holding its own tests (Rust's `mod tests`) is tested there by the task changing it, whose criteria
    # ask for a test that fails without the change.
    inline = test_file in changed
    if inline:
        tasks = [_tested_in_own_module(t, test_file) for t in tasks]
    else:
        # Written against the changed code, in a worktree that has it: a test of a change not made yet can
        # neither be run by its author nor pass the gate before the change is merged.
        tasks.append(_task(len(tasks) + 1, f"Test: {change_phrase(requirement)} ({test_file})",
                           f"Cover the change with tests in {test_file}: a case that fails before it and passes "
                           "after.",
                           [TaskFile(path=test_file, action="modify" if exists else "create",
                                     changes=[f"tests for: {short}"], conflict_risk="low")],
                           index, requirement, session_id, changes, "medium", notes))
    understanding = (
        f"{short}. Complexity {assessment.complexity} ({assessment.scope}; {assessment.depth}; {assessment.risk}). "
        f"Planned from the repository index"
        + (f" and {len(explorations)} verified angle(s)" if explorations else "")
        + f": {len(tasks)} task(s), the change grouped by package, then"
        + (f" {', '.join(p for p, _ in documents)} and" if documents else "")
        + (f" its tests in {test_file}'s own test module, by the task changing it" if inline else " its tests")
        + (f", with {created} created first" if created else "") + "."
        + (" " + " ".join(notes) if notes else "")
    )
    return LitePlanDraft(understanding=understanding, tasks=tasks)
