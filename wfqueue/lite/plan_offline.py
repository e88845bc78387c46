"""Offline lite planning: verified findings to 2-7 unified tasks. Pure.

Only files whose existence was verified are planned as modifications. Changes
are grouped by feature (one task per package, merged along imports), a module
for concepts the code lacks becomes its own task, and dependencies exist only
where a task needs another's output (the new module); everything else stays
independent so it can run in parallel.
"""

from __future__ import annotations

import posixpath

from wfqueue.analysis import RepoIndex
from wfqueue.lite.models import Assessment, ClarificationAnswer, LitePlanDraft, VerifiedExploration
from wfqueue.lite.synthesis import core_files
from wfqueue.providers.offline.changes import (
    covering_tests,
    effort_of,
    file_entries,
    import_order,
    new_module_path,
    requirement_short,
    task_type,
    verification_for,
)
from wfqueue.providers.offline.understand import cluster_files, relevant_files
from wfqueue.unified_task import Convergence, TaskFile, TaskSource, TaskTest, UnifiedTask

MAX_TASKS = 7
_WEIGHT = {"high": 3.0, "medium": 2.0, "low": 1.0}


def _candidates(index: RepoIndex, requirement: str, explorations: list[VerifiedExploration]) -> list[tuple[str, float]]:
    code = {f.path for f in index.files if not f.is_test and index.symbols.get(f.path)}
    named = [p for p in sorted(code) if p in requirement]
    if named:  # the requirement names the files to change: plan those, not their neighbours
        return [(p, 1.0) for p in named]
    if explorations:
        core = [c for c in core_files(explorations, limit=12) if c.verified and c.path in code]
        if core:
            return [(c.path, _WEIGHT[c.relevance] + 0.1 * len(c.angles)) for c in core]
    return relevant_files(index, requirement, max_agents=3)


def _task(number: int, title: str, description: str, files: list[TaskFile], index: RepoIndex, requirement: str,
          session_id: str, depends: list[str], priority: str, notes: list[str]) -> UnifiedTask:
    paths = list(dict.fromkeys(f.path for f in files))
    tests = covering_tests(index, [p for p in paths if any(f.path == p for f in index.files)])
    verification = verification_for(index, tests)
    efforts = [effort_of(index, p)[0] for p in paths if any(f.path == p for f in index.files)] or ["medium"]
    effort = max(efforts, key=["small", "medium", "large"].index)
    targets = [f"{f.path}:{f.target}" if f.target else f.path for f in files if f.action == "modify"]
    criteria = [f"{', '.join(targets[:3]) or paths[0]} implement: {requirement_short(requirement)}"]
    criteria.append(f"`{verification}` passes" if tests and verification else f"new tests cover {', '.join(paths[:2])}")
    tid = f"TASK-{number:03d}"
    return UnifiedTask(
        id=tid,
        title=title,
        description=description + (" " + " ".join(notes) if notes else ""),
        type=task_type(requirement),
        priority=priority,
        effort=effort,
        scope=", ".join(paths),
        depends_on=depends,
        focus_paths=paths,
        files=files,
        convergence=Convergence(
            criteria=criteria,
            verification=verification or "manual: exercise the changed code paths",
            definition_of_done=f"{', '.join(paths[:3])} changed as described and the suite passes",
        ),
        test=TaskTest(commands=[verification] if verification else [], unit=tests),
        source=TaskSource(tool="wfqueue-lite", session_id=session_id, original_id=tid),
    )


def plan_tasks(index: RepoIndex, requirement: str, session_id: str, assessment: Assessment,
               explorations: list[VerifiedExploration], answers: list[ClarificationAnswer]) -> LitePlanDraft:
    short = requirement_short(requirement)
    candidates = _candidates(index, requirement, explorations)
    groups = cluster_files(index, candidates, max_agents=MAX_TASKS - 1)
    if len(groups) == 1 and len(groups[0]) > 1:
        groups = [[p] for p in groups[0]][: MAX_TASKS - 1]
    created = new_module_path(index, [p for g in groups for p in g], requirement)
    notes = [f"Clarified: {a.question} → {a.answer}." for a in answers]
    tasks: list[UnifiedTask] = []
    if created:
        tasks.append(_task(1, f"new {posixpath.basename(created)}: {short}",
                           f"Nothing in the code handles this yet: create {created}.",
                           [TaskFile(path=created, action="create", changes=[f"new module for: {short}"],
                                     conflict_risk="low")],
                           index, requirement, session_id, [], "high", notes))
    for group in groups:
        if len(tasks) >= MAX_TASKS:
            break
        ordered = import_order(index, group)
        files = [entry for path in ordered for entry in file_entries(index, path, requirement)]
        package = posixpath.dirname(ordered[0]) or "."
        uses_new = bool(created) and group is groups[0]
        depends = [tasks[0].id] if uses_new else []
        targets = ", ".join(f.target for f in files if f.target) or "module level"
        description = (f"Change {', '.join(ordered)} ({targets})"
                       f" for: {short}." + (f" Wire in {created}." if uses_new else ""))
        tasks.append(_task(len(tasks) + 1, f"{package}: {short}", description, files, index, requirement,
                           session_id, depends, "high" if group is groups[0] else "medium", notes))
    if len(tasks) < 2:
        covered = tasks[0].focus_paths if tasks else []
        stem = posixpath.splitext(posixpath.basename(covered[0]))[0] if covered else "change"
        tests = covering_tests(index, covered)
        test_file = tests[0] if tests else f"tests/test_{stem}.py"
        action = "modify" if tests else "create"
        tasks.append(_task(len(tasks) + 1, f"tests: cover {short}",
                           f"Cover the change with tests in {test_file}.",
                           [TaskFile(path=test_file, action=action, changes=[f"tests for: {short}"],
                                     conflict_risk="low")],
                           index, requirement, session_id, [], "medium", notes))
    source = f"verified findings of {len(explorations)} angle(s)" if explorations else "the repository index"
    understanding = (
        f"{short}. Complexity {assessment.complexity} ({assessment.scope}; {assessment.depth}; {assessment.risk}). "
        f"Planned from {source}: "
        f"{len(tasks)} task(s), grouped by package"
        + (f", with {created} created first" if created else "") + "."
        + (" " + " ".join(notes) if notes else "")
    )
    return LitePlanDraft(understanding=understanding, tasks=tasks)
