"""Offline planning of one sub-domain. Pure: RepoIndex + analysis in, AreaDraft out.

Every agent derives the same id for the same file (``planned_ids``), so a task
can depend on a task of another area without the agents talking to each other:
dependencies follow the import graph (change what a module imports first).
"""

from __future__ import annotations

import posixpath

from wfqueue.analysis import RepoIndex, fan_in, importers_of, rank_files, test_command_for, tokenize
from wfqueue.analysis.files import is_test_path
from wfqueue.analysis.roles import beside_the_product, plannable
from wfqueue.analysis.testmap import subject_stem, tested_stem
from wfqueue.collab.models import AreaDraft, Evidence, EvidenceFile, RequirementAnalysis, SubDomain, task_id
from wfqueue.providers.offline.changes import (
    already_named,
    change_phrase,
    conflict_risk,
    criteria_for,
    dependency_order,
    earlier_needs,
    effort_of,
    file_entries,
    has_file,
    import_order,
    plan_needs,
    requirement_short,
    symbols_to_change,
    task_title,
    task_type,
    verification_for,
)
from wfqueue.providers.offline.docs_only import as_docstrings_task, change_docs_task, docs_task, is_document
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.new_module import new_module_path
from wfqueue.providers.offline.tests_only import tests_task
from wfqueue.providers.offline.tests_placement import covering_tests
from wfqueue.providers.offline.understand import files_to_write
from wfqueue.unified_task import Convergence, TaskFile, TaskMeta, TaskSource, TaskTest, UnifiedTask


def _created(index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain) -> str | None:
    """The module the first area creates for a component the code lacks (only when the code is to change)."""
    first = analysis.sub_domains.index(sub) == 0
    requirement = analysis.original_requirement
    return new_module_path(index, sub.focus_paths, requirement) if first and intent_of(requirement) == "change" \
        else None


def planned_ids(index: RepoIndex, analysis: RequirementAnalysis) -> dict[str, str]:
    """file path -> the task id that changes it, identical in every agent."""
    ids: dict[str, str] = {}
    for sub in analysis.sub_domains:
        number = sub.task_id_range[0]
        created = _created(index, analysis, sub)
        for path in ([created] if created else []) + import_order(index, sub.focus_paths):
            if path not in ids:
                ids[path] = task_id(number)
                number += 1
    return ids


def planned_needs(index: RepoIndex, analysis: RequirementAnalysis) -> dict[str, list[str]]:
    """file path -> the planned files its task waits for: the ones it imports (for a test file, every code file
    the plan changes) that come earlier in one order over the whole plan, so an import cycle orders its files
    instead of becoming a dependency cycle."""
    files = list(dict.fromkeys(p for sub in analysis.sub_domains for p in sub.focus_paths))
    needs = plan_needs(index, files)
    # A test file waits for the code the plan changes, whatever it is named (a new catch.test.ts for a change to
    # compile.ts sat in the first wave beside it, its test failing there without the change), as a lite plan's does.
    code = [f for f in files if not is_test_path(f)]
    for f in files:
        if is_test_path(f):
            needs[f] = list(dict.fromkeys([*needs.get(f, []), *code]))
    return earlier_needs(dependency_order(files, needs), needs)


def _task_for_file(
    index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain, path: str, ids: dict[str, str], created: str | None
) -> UnifiedTask:
    requirement = analysis.original_requirement
    short = requirement_short(requirement)
    symbols = symbols_to_change(index, path, requirement)
    tests = covering_tests(index, [path])
    importers = importers_of(index, path)
    risk = conflict_risk(index, path)
    effort, _ = effort_of(index, path, requirement)
    depends = sorted({ids[g] for g in planned_needs(index, analysis).get(path, []) if g in ids and ids[g] != ids[path]})
    if created and created != path and path in sub.focus_paths[:2]:
        depends = sorted(set(depends) | {ids[created]})
    where = ", ".join(f"{s.qualname} (line {s.line})" for s in symbols) or "module level"
    verification = verification_for(index, tests)
    a_test = any(f.path == path and f.is_test for f in index.files)
    # The module's own test file (named after it), which no other task plans, is this task's to extend: an
    # executor may change only the files a task names (and add new tests), so "Extend tests/test_x.py" with the
    # file unnamed had the agent's change rejected. Other tests covering it are run, and must keep passing.
    own = next((t for t in tests if t != path and t not in ids and _test_owner(index, ids, t) == path), None) \
        if not a_test else None
    files = file_entries(index, path, requirement) + (
        [TaskFile(path=own, action="modify", changes=[f"tests of the change to {path}"], conflict_risk="low")]
        if own else [])
    others = [t for t in tests if t not in (own, path)]
    # The test this task writes is where its criteria look for one: its own test, or a new file (anywhere).
    written_tests = [own] if own else [path] if path in tests else []
    criteria = criteria_for(requirement, [path], written_tests, verification if tests else index.test_command,
                            already_named(index, [path], requirement, tests_only=a_test), adds_test=not written_tests)
    # Not an example project's tests (flask's examples/tutorial/tests): the product's test command does not run them.
    importer_tests = [t for t in covering_tests(index, importers) if t not in tests and not beside_the_product(t)]
    if importer_tests and len(criteria) < 5:
        criteria.append(f"`{verification_for(index, importer_tests)}` passes: the modules importing {path} "
                        f"({', '.join(importers[:3])}) keep working")
    return UnifiedTask(
        id=ids[path],
        title=(f"Test: {change_phrase(requirement)} ({path})" if a_test
               else task_title(requirement, path, symbols[0].qualname if symbols else "")),
        description=f"Change {path} at {where}. "
        + (f"It is imported by {len(importers)} module(s): {', '.join(importers[:4])}." if importers
           else "No module imports it."),
        depends_on=depends,
        convergence=Convergence(
            criteria=criteria,
            verification=verification or f"manual: exercise {where} in {path}",
            definition_of_done=f"{path} carries the change and its tests pass",
        ),
        type="testing" if a_test else task_type(requirement),  # a test area's task tests; it is no feature
        priority="high" if path == sub.focus_paths[0] else "medium",
        effort=effort,
        scope=f"{path}: {where}",
        focus_paths=[path],
        files=files,
        implementation=[f"Read {s.qualname} at {path}:{s.line}-{s.end_line}" for s in symbols]
        + [f"Update {path} for: {short}"]
        + [f"Extend {own} with a test of the change" if own else
           f"Extend its own test module in {path} with a test of the change" if path in tests else
           f"Add a test of the change to {path} in a new test file"]
        + ([f"Keep {', '.join(others[:3])} passing (run, not changed here)"] if others else []),
        test=TaskTest(commands=[verification] if verification else [], unit=tests),
        meta=TaskMeta(agent=sub.focus_area, module=path),
        source=TaskSource(tool="wfqueue-collab", session_id=analysis.session_id, original_id=ids[path]),
        risks=[f"{path} is imported by {len(importers)} modules"] if risk == "high" else [],
    )


def _test_owner(index: RepoIndex, ids: dict[str, str], test: str) -> str | None:
    """The planned module whose task extends ``test``: the one it is named after and covers, of the lowest task id
    where several are (app/api/utils.py and app/store/utils.py, one tests/test_utils.py importing both): every
    agent picks the same, so two tasks never both change it."""
    owners = [p for p in ids if not is_test_path(p) and tested_stem(test) == subject_stem(p)
              and test in covering_tests(index, [p])]
    return min(owners, key=lambda p: ids[p], default=None)


def _new_test_task(index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain, path: str,
                   ids: dict[str, str]) -> UnifiedTask:
    """A test file to create: written once the changes it tests are in (its dependencies)."""
    requirement = analysis.original_requirement
    tested = [g for g in planned_needs(index, analysis).get(path, []) if g in ids and g != path]
    run = test_command_for(index, [path]) or index.test_command
    return UnifiedTask(
        id=ids[path],
        title=f"Test: {change_phrase(requirement)} ({path})",
        description=f"Create {path}: tests for {requirement_short(requirement)}"
        + (f", covering {', '.join(tested)}" if tested else "") + ": a case that fails before the change and "
        "passes after.",
        depends_on=sorted({ids[g] for g in tested}),
        convergence=Convergence(
            criteria=[f"`test -f {path}` succeeds"] + ([f"`{run}` passes"] if run else [])
            + ["a test in it fails without the change and passes with it"],
            verification=run or f"manual: run the tests in {path}",
            definition_of_done=f"{path} is created and its tests pass with the change",
        ),
        type="testing",
        priority="medium",
        effort="small",
        scope=f"new tests {path}",
        focus_paths=[path],
        files=[TaskFile(path=path, action="create", changes=[f"tests for: {requirement_short(requirement)}"],
                        conflict_risk="low")],
        implementation=[f"Write tests in {path} for: {requirement_short(requirement)}"],
        test=TaskTest(commands=[run] if run else [], unit=[path]),
        meta=TaskMeta(agent=sub.focus_area, module=path),
        source=TaskSource(tool="wfqueue-collab", session_id=analysis.session_id, original_id=ids[path]),
    )


def _one_file_task(index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain, path: str,
                   ids: dict[str, str], intent: str, planned: dict[str, tuple[bool, list[str]]]) -> UnifiedTask:
    """A requirement asking only for tests or documents: ``path`` is a test file or document to write about code
    that stays as it is (file_task); it waits for no other task. ``planned``: files_to_write, by path."""
    requirement = analysis.original_requirement
    # A path the split did not take from files_to_write (an adjusted split): written, about no particular code.
    exists, code = planned.get(path, (has_file(index, path), []))
    task = (tests_task if intent == "tests" else docs_task)(index, requirement, ids[path], path, exists, code)
    return task.model_copy(update={
        "priority": "high" if path == sub.focus_paths[0] else "medium",
        "meta": TaskMeta(agent=sub.focus_area, module=path),
        "source": TaskSource(tool="wfqueue-collab", session_id=analysis.session_id, original_id=ids[path])})


def _change_docs_task(index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain, path: str,
                      ids: dict[str, str]) -> UnifiedTask:
    """A document the change asks to update as well: written once every planned change to the code is in."""
    changed = [p for p in ids if not is_test_path(p) and not is_document(p)]
    exists = has_file(index, path)
    task = change_docs_task(index, analysis.original_requirement, ids[path], path, exists, changed)
    return task.model_copy(update={
        "depends_on": sorted({ids[p] for p in changed}),
        "meta": TaskMeta(agent=sub.focus_area, module=path),
        "source": TaskSource(tool="wfqueue-collab", session_id=analysis.session_id, original_id=ids[path])})


def _create_task(index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain, path: str,
                 ids: dict[str, str]) -> UnifiedTask:
    if is_test_path(path):
        return _new_test_task(index, analysis, sub, path, ids)
    short = requirement_short(analysis.original_requirement)
    users = sub.focus_paths[:2]
    return UnifiedTask(
        id=ids[path],
        title=f"Create {path} for: {change_phrase(analysis.original_requirement)}",
        description=f"{path} does not exist yet: add it for {short}"
        + (f" and use it from {', '.join(u for u in users if u != path)}." if len(users) > 1 or users[0] != path
           else "."),
        depends_on=[],  # a new module waits for nothing
        convergence=Convergence(
            criteria=[f"`test -f {path}` succeeds",
                      f"`grep -rln \"{posixpath.splitext(posixpath.basename(path))[0]}\" {' '.join(users)}` lists "
                      f"the module{'s' if len(users) > 1 else ''} using it",
                      "`" + (index.test_command or "git status --short") + "` "
                      + ("passes with a new test covering it" if index.test_command else f"lists {path}")],
            verification=index.test_command or f"manual: import {path}",
            definition_of_done=f"{path} is created, tested and used by {users[0]}",
        ),
        type="feature",
        priority="high",
        effort="medium",
        scope=f"new module {path}",
        focus_paths=[path],
        files=[TaskFile(path=path, action="create", changes=[f"new module for: {short}"], conflict_risk="low")],
        implementation=[f"Create {path}", f"Add tests for {path}"],
        meta=TaskMeta(agent=sub.focus_area, module=path),
        source=TaskSource(tool="wfqueue-collab", session_id=analysis.session_id, original_id=ids[path]),
    )


def _evidence(index: RepoIndex, analysis: RequirementAnalysis, sub: SubDomain) -> Evidence:
    requirement = analysis.original_requirement
    scores = dict(rank_files(index, requirement, include_tests=True))
    best = max(scores.values(), default=1.0) or 1.0
    query = set(tokenize(requirement))
    related: list[EvidenceFile] = []
    for path in sub.focus_paths:
        matched = sorted(query & set(index.doc_tokens.get(path, [])))
        names = ", ".join(s.qualname for s in symbols_to_change(index, path, requirement)[:3])
        reason = ((f"matches {', '.join(matched[:5])}; " if matched else "")
                  + (f"defines {names}" if names else "in scope"))
        related.append(EvidenceFile(path=path, relevance=round(scores.get(path, 0.0) / best, 2), reason=reason))
    for path in sorted({t for f in sub.focus_paths for t in index.tests_for.get(f, [])} - set(sub.focus_paths)):
        covered = [f for f in sub.focus_paths if path in index.tests_for.get(f, [])]
        related.append(EvidenceFile(path=path, relevance=round(scores.get(path, 0.0) / best, 2),
                                    reason=f"tests {', '.join(covered)}"))
    patterns = []
    for path in sub.focus_paths:
        kinds = index.symbols.get(path, [])
        classes = [s.name for s in kinds if s.kind == "class"]
        funcs = [s.name for s in kinds if s.kind == "function"]
        if classes or funcs:
            style = f"classes {', '.join(classes[:3])}" if classes else f"functions {', '.join(funcs[:3])}"
            patterns.append(f"{path} is organised as {style}")
    imported = sorted({g for f in sub.focus_paths for g in index.imports.get(f, [])} - set(sub.focus_paths))
    if imported:
        patterns.append(f"this area builds on {', '.join(imported[:5])}")
    if index.test_command:
        patterns.append(f"tests run with `{index.test_command}`")
    constraints = [f"{p} is imported by {', '.join(importers_of(index, p)[:4])}: keep its interface compatible"
                   for p in sub.focus_paths if fan_in(index, p) > 0]
    return Evidence(related_files=related, patterns=patterns, constraints=constraints)


# At most this many files of a folder an understanding names as a focus path are planned, the most relevant first.
FOLDER_FILES_PLANNED = 6


def _as_files(index: RepoIndex, analysis: RequirementAnalysis) -> RequirementAnalysis:
    """``analysis`` with each focus path that names a folder (an answer may: "notes_api/api") replaced by the
    product files in it the requirement concerns most. A folder was planned as a file to create ("Create
    notes_api/api"), a task the repair then left with no file at all."""
    known = {f.path for f in index.files}
    if all(path in known for sub in analysis.sub_domains for path in sub.focus_paths):
        return analysis  # what the offline understanding gives: files
    code = [f.path for f in index.files if not f.is_test and plannable(f.path, False, analysis.original_requirement)]
    ranked = [path for path, _ in rank_files(index, analysis.original_requirement, limit=len(code) or 1)]
    order = {path: n for n, path in enumerate(ranked)}

    def files(paths: list[str]) -> list[str]:
        out: list[str] = []
        for path in paths:
            folder = path.rstrip("/") + "/"
            inside = [p for p in code if p.startswith(folder)] if path not in known else []
            inside.sort(key=lambda p: (order.get(p, len(order)), p))
            out += inside[:FOLDER_FILES_PLANNED] if inside else [path]
        return list(dict.fromkeys(out))

    subs = [sub.model_copy(update={"focus_paths": files(sub.focus_paths)}) for sub in analysis.sub_domains]
    return analysis.model_copy(update={"sub_domains": subs})


def plan_area(index: RepoIndex, analysis: RequirementAnalysis, focus_area: str) -> AreaDraft:
    analysis = _as_files(index, analysis)
    sub = analysis.area(focus_area)
    ids = planned_ids(index, analysis)
    created = _created(index, analysis, sub)
    intent = intent_of(analysis.original_requirement)
    # What a tests-only or documentation plan writes, found once for the whole area.
    planned = {p: (e, code) for p, e, code in files_to_write(index, analysis.original_requirement,
                                                              intent == "tests")} if intent in ("tests", "docs") \
        else {}
    tasks: list[UnifiedTask] = []
    if created:
        tasks.append(_create_task(index, analysis, sub, created, ids))
    for path in import_order(index, sub.focus_paths):
        if path not in ids or any(t.id == ids[path] for t in tasks):
            continue
        exists = has_file(index, path)
        # A code file in a tests-only or documentation plan's area was put there by hand (an adjusted split): it is
        # planned as a change.
        one_file = (intent == "tests" and is_test_path(path)) or (intent == "docs" and is_document(path))
        tasks.append(_one_file_task(index, analysis, sub, path, ids, intent, planned) if one_file
                     else _change_docs_task(index, analysis, sub, path, ids) if is_document(path)
                     else _task_for_file(index, analysis, sub, path, ids, created) if exists
                     else _create_task(index, analysis, sub, path, ids))
    if intent == "docstrings":
        tasks = [as_docstrings_task(t) for t in tasks]
    order = " → ".join(t.id for t in tasks)
    short = requirement_short(analysis.original_requirement)
    # The files as the tasks change them, in the tasks' order (it named the area's focus paths in ranking order,
    # which the tasks follow neither in order nor in number).
    changed = list(dict.fromkeys(f.path for t in tasks for f in t.files))
    more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
    return AreaDraft(
        summary=f"{len(tasks)} task(s) in {focus_area} for: {short}",
        approach=f"Change {', '.join(changed[:4])}{more} in import order ({order}); "
        "each task names the symbols to change and the tests that prove it.",
        recommended_execution="Sequential" if any(t.depends_on for t in tasks) else "Parallel",
        design_decisions=[{"decision": f"new module {created}", "rationale": "the repository has no code for this yet",
                           "tradeoff": "one more module to maintain"}] if created else [],
        tasks=tasks,
        evidence=_evidence(index, analysis, sub),
        understanding=f"The {focus_area} area covers {', '.join(sub.focus_paths)}. {sub.description}. "
        f"Tasks follow the import graph so that a module changes after the modules it uses.",
    )
