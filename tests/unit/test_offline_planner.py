"""The offline planner reads the repository: real files, real symbols, import-ordered tasks."""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write
from wfqueue.analysis import RepoIndex, build_index
from wfqueue.collab.assemble import allocate, assemble_area
from wfqueue.collab.conflicts import detect_conflicts
from wfqueue.collab.models import PlanMetadata, RequirementAnalysis
from wfqueue.collab.note_blocks import parse_task_pool
from wfqueue.collab.summary import mermaid_flowchart
from wfqueue.errors import BadInputError, InfrastructureError
from wfqueue.providers.base import PlanAreaStep, UnderstandStep
from wfqueue.providers.offline.area import plan_area
from wfqueue.providers.offline.provider import OfflineProvider
from wfqueue.providers.offline.understand import understand

REQUIREMENT = "Add a RateLimiter middleware that limits API requests per user"


def plan(repo: Path, requirement: str = REQUIREMENT, max_agents: int = 4):
    index = build_index(repo)
    analysis = allocate(understand(index, requirement, max_agents), "CPLAN-t", requirement, max_agents)
    drafts = {s.focus_area: plan_area(index, analysis, s.focus_area) for s in analysis.sub_domains}
    return index, analysis, drafts


def symbol_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            names |= {f"{node.name}.{b.name}" for b in node.body if isinstance(b,
                                                                               (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
    return names


def test_split_is_two_to_max_areas_with_disjoint_ranges(sample_repo: Path) -> None:
    for max_agents in (2, 3, 5):
        _, analysis, _ = plan(sample_repo, max_agents=max_agents)
        assert 2 <= len(analysis.sub_domains) <= max_agents
        ranges = [s.task_id_range for s in analysis.sub_domains]
        assert ranges == [(100 * k + 1, 100 * k + 100) for k in range(len(ranges))]
        paths = [p for s in analysis.sub_domains for p in s.focus_paths]
        assert len(paths) == len(set(paths)), "a file belongs to one area"


def test_an_areas_approach_names_the_files_its_tasks_change_in_their_order(sample_repo: Path) -> None:
    """It named the area's first four focus paths in ranking order: "Change sessions.py, app.py, ctx.py,
    wrappers.py in import order (TASK-001 → ...)" where TASK-001 changed wrappers.py, and a fifth file's task was
    not named at all."""
    _, _, drafts = plan(sample_repo)
    for draft in drafts.values():
        changed = list(dict.fromkeys(f.path for t in draft.tasks for f in t.files))
        named = draft.approach.removeprefix("Change ").split(" in import order")[0]
        assert named.startswith(", ".join(changed[:4])), (named, changed)
        assert len(changed) <= 4 or named.endswith(f" and {len(changed) - 4} more"), named


def test_tasks_name_real_files_and_symbols(sample_repo: Path) -> None:
    _, analysis, drafts = plan(sample_repo)
    touched = set()
    for area, draft in drafts.items():
        first, last = analysis.area(area).task_id_range
        for task in draft.tasks:
            assert first <= int(task.id.split("-")[1]) <= last
            for file in task.files:
                touched.add(file.path)
                if file.action == "create":
                    assert not (sample_repo / file.path).exists()
                    continue
                assert (sample_repo / file.path).is_file(), file.path
                if file.target:
                    assert file.target in symbol_names(sample_repo / file.path), (file.path, file.target)
    # the middleware chain is where per-user policies go; the planner must find it
    assert "notes_api/api/middleware.py" in touched
    created = [f.path for d in drafts.values() for t in d.tasks for f in t.files if f.action == "create"]
    assert created == ["notes_api/api/rate_limiter.py"]  # named after the component, beside middleware.py


def test_dependencies_follow_the_import_graph(sample_repo: Path) -> None:
    index, analysis, drafts = plan(sample_repo)
    task_of = {t.files[0].path: t.id for d in drafts.values() for t in d.tasks}
    for draft in drafts.values():
        for task in draft.tasks:
            path = task.files[0].path
            for imported in index.imports.get(path, []):
                if imported in task_of:
                    assert task_of[imported] in task.depends_on, (path, imported)
    tasks = []
    for area, draft in drafts.items():
        meta = PlanMetadata(timestamp="t")
        pool = assemble_area(analysis, area, draft, meta).task_pool
        tasks += parse_task_pool(pool, area, 1)[0]
    ranges = {s.focus_area: s.task_id_range for s in analysis.sub_domains}
    assert [c.type for c in detect_conflicts(tasks, ranges)] == []  # the sample has no import cycle


def test_convergence_names_covering_tests_and_a_runnable_command(sample_repo: Path) -> None:
    _, _, drafts = plan(sample_repo)
    middleware = next(t for d in drafts.values() for t in d.tasks if t.files[0].path == "notes_api/api/middleware.py")
    assert "tests/test_middleware.py" in middleware.convergence.verification
    argv = shlex.split(middleware.convergence.verification)
    assert argv[:3] == ["python", "-m", "pytest"]
    done = subprocess.run([sys.executable, *argv[1:], "-p", "no:cacheprovider"], cwd=sample_repo,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_planner_is_deterministic(sample_repo: Path) -> None:
    _, a1, d1 = plan(sample_repo)
    _, a2, d2 = plan(sample_repo)
    assert a1 == a2
    assert {k: v.model_dump() for k, v in d1.items()} == {k: v.model_dump() for k, v in d2.items()}


def test_different_requirements_pick_different_code(sample_repo: Path) -> None:
    _, analysis, _ = plan(sample_repo, "Fix the token expiry check in authentication", 3)
    first_area = analysis.sub_domains[0]
    assert first_area.focus_paths[0] == "notes_api/auth/tokens.py"
    _, cache_plan, _ = plan(sample_repo, "Cache note listings in the storage layer", 3)
    assert "notes_api/storage/cache.py" in [p for s in cache_plan.sub_domains for p in s.focus_paths]


def test_provider_steps_and_repository_without_code(sample_repo: Path, tmp_path: Path) -> None:
    provider = OfflineProvider()
    draft = provider.run(UnderstandStep(session_id="s", repo=str(sample_repo), requirement=REQUIREMENT, max_agents=3))
    analysis = allocate(draft, "s", REQUIREMENT, 3)
    area = provider.run(PlanAreaStep(session_id="s", repo=str(sample_repo), requirement=REQUIREMENT,
                                     analysis=analysis, focus_area=analysis.sub_domains[1].focus_area))
    assert area.tasks
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("nothing here")
    with pytest.raises(BadInputError, match="no source code"):
        OfflineProvider().run(UnderstandStep(session_id="s", repo=str(tmp_path / "empty"), requirement="x",
                                             max_agents=2))
    # A repository this worker cannot see at all is no bad input: the worker does not share the coordinator's disk.
    with pytest.raises(InfrastructureError, match="cannot see the repository") as unseen:
        OfflineProvider().run(UnderstandStep(session_id="s", repo=str(tmp_path / "elsewhere"), requirement="x",
                                             max_agents=2))
    assert unseen.value.hint and "WFQUEUE_SHARED_DISK=false" in unseen.value.hint


def test_mermaid_groups_by_area_with_edges_and_highlights(sample_repo: Path) -> None:
    _, analysis, drafts = plan(sample_repo)
    tasks = []
    for area, draft in drafts.items():
        tasks += parse_task_pool(assemble_area(analysis, area, draft, PlanMetadata(timestamp="t")).task_pool, area,
                                 1)[0]
    tasks[1] = tasks[1].model_copy(update={"depends_on": [*tasks[1].depends_on, tasks[-1].id]})
    tasks[-1] = tasks[-1].model_copy(update={"depends_on": [*tasks[-1].depends_on, tasks[1].id]})
    conflicts = detect_conflicts(tasks, {s.focus_area: s.task_id_range for s in analysis.sub_domains})
    chart = mermaid_flowchart(analysis, tasks, conflicts)
    assert chart.startswith("```mermaid\nflowchart TD")
    assert chart.count("subgraph ") == len(analysis.sub_domains)
    for task in tasks:
        for dep in task.depends_on:
            assert f"T{dep[5:]} --> T{task.id[5:]}" in chart
    highlighted = chart.splitlines()[-2]
    assert highlighted.startswith("    class ") and f"T{tasks[1].id[5:]}" in highlighted
    # Titles start alike (the change) and end with their file: each node reads differently (they read
    # "TASK-00N: Add a Rack::Protection::PermissionsPolicy middleware that..." alike).
    labels = [line.split('["', 1)[1].split(": ", 1)[1].removesuffix('"]') for line in chart.splitlines()
              if '["TASK-' in line]
    assert len(labels) == len(tasks) and len(set(labels)) == len(labels), labels
    assert all(len(label) <= 60 for label in labels)


def two_areas_of(repo: Path, requirement: str, first: list[str], second: list[str]) -> tuple[RepoIndex,
                                                                                              RequirementAnalysis]:
    """The repository's index and a two-area split of ``requirement`` whose areas' focus paths are as given (as an
    understanding answer may give them)."""
    index = build_index(repo)
    analysis = allocate(understand(index, requirement, 2), "CPLAN-t", requirement, 2)
    areas = [sub.model_copy(update={"focus_paths": paths}) for sub, paths in zip(analysis.sub_domains,
                                                                                (first, second), strict=True)]
    return index, analysis.model_copy(update={"sub_domains": areas})


def test_a_folder_named_as_a_focus_path_plans_the_files_in_it(sample_repo: Path) -> None:
    """An understanding answer naming folders ("notes_api/api") had the area planner create a file of that name,
    a task the repair then left without files: the plan read completed with nothing anyone could execute."""
    index, folders = two_areas_of(sample_repo, "Add per-user rate limiting to the API", ["notes_api/api"],
                                  ["notes_api/auth/"])
    first, second = folders.sub_domains
    planned = {sub.focus_area: {f.path for t in plan_area(index, folders, sub.focus_area).tasks for f in t.files}
               for sub in folders.sub_domains}
    assert planned[first.focus_area] and all(p.startswith(("notes_api/api/", "tests/")) and (sample_repo / p).is_file()
                                             for p in planned[first.focus_area])
    assert planned[second.focus_area] and all(p.startswith(("notes_api/auth/", "tests/"))
                                              for p in planned[second.focus_area])


def test_a_test_area_waits_for_the_code_the_plan_changes_whatever_its_files_are_named(sample_repo: Path) -> None:
    """A new test file not named after the module it tests (zod: catch.test.ts for compile.ts) got no dependency:
    it sat in the first wave beside the change, its test failing there without it."""
    index, split = two_areas_of(sample_repo, "Make _parse_int reject a leading plus sign",
                                ["notes_api/api/handlers.py"], ["tests/test_plus_sign_flow.py"])
    code, tests = split.sub_domains
    [change] = plan_area(index, split, code.focus_area).tasks
    [test] = plan_area(index, split, tests.focus_area).tasks
    assert test.depends_on == [change.id]


@pytest.mark.parametrize("requirement", ["Add per-user rate limiting to the API",
                                         "Call a new `check_quota` helper from the API router and the user store"])
def test_a_collab_task_names_the_test_file_it_says_to_extend(sample_repo: Path, requirement: str) -> None:
    """"Extend tests/test_handlers.py, tests/test_middleware.py, tests/test_router.py" with none of them in the
    task's files: an executor may change only the files a task names (and add new tests), so an agent that did as
    the task said had its change rejected, and a criterion looked for its test in files it could not change. A
    task extends its module's own test, which no other task names."""
    index = build_index(sample_repo)
    analysis = allocate(understand(index, requirement, 4), "CPLAN-t", requirement, 4)
    assert len(analysis.sub_domains) >= 2
    tasks = [t for sub in analysis.sub_domains for t in plan_area(index, analysis, sub.focus_area).tasks]
    named_tests = [f.path for t in tasks for f in t.files if f.path.startswith("tests/")]
    assert "tests/test_router.py" in named_tests and len(named_tests) == len(set(named_tests))  # one task each
    for task in tasks:
        files = {f.path for f in task.files}
        for step in task.implementation:
            if step.startswith("Extend tests/"):
                assert step.split()[1] in files, (task.id, step, files)
        for criterion in task.convergence.criteria:  # a test it may not change is not where its test is looked for
            if criterion.endswith("finds a test using it"):
                searched = criterion.split("`")[1].split()[3:]
                assert all(p in files for p in searched), (task.id, criterion, files)
        router_task = "notes_api/api/router.py" in files
        assert not router_task or any("Keep tests/test_handlers.py" in s for s in task.implementation)
    assert any(c.endswith("finds a test using it") for t in tasks for c in t.convergence.criteria) \
        == ("check_quota" in requirement)


def test_two_modules_of_one_name_leave_their_shared_test_to_one_task(tmp_path: Path) -> None:
    """app/api/utils.py and app/store/utils.py, one tests/test_utils.py importing both: both tasks named it as
    their own test to extend, in parallel waves, a conflict the plan made itself."""
    write(tmp_path, {
        "pyproject.toml": "[project]\nname='app'\n", "app/__init__.py": "", "app/api/__init__.py": "",
        "app/api/utils.py": "def check_quota(user):\n    return True\n\ndef route(user):\n    return user\n",
        "app/store/__init__.py": "",
        "app/store/utils.py": "def save_quota(user):\n    return user\n\ndef load(user):\n    return user\n",
        "tests/__init__.py": "",
        "tests/test_utils.py": "from app.api.utils import route\nfrom app.store.utils import load\n\n"
                               "def test_route():\n    assert route(1) == 1\n",
    })
    requirement = "Call a new `check_quota` helper from app/api/utils.py and app/store/utils.py"
    index = build_index(tmp_path)
    analysis = allocate(understand(index, requirement, 4), "CPLAN-t", requirement, 4)
    tasks = [t for sub in analysis.sub_domains for t in plan_area(index, analysis, sub.focus_area).tasks]
    assert len([t for t in tasks if "app/api/utils.py" in {f.path for f in t.files}
                or "app/store/utils.py" in {f.path for f in t.files}]) == 2
    assert [t.id for t in tasks if "tests/test_utils.py" in {f.path for f in t.files}] == ["TASK-001"]
