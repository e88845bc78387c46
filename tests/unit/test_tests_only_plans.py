"""A requirement asking only for tests ("Add tests for the router") is planned as tests of code that stays.

Plans of such requirements changed the code under test: "Add tests for the token expiry check in
notes_api/auth/tokens.py" got a task modifying `tokens.py` at `verify_token`, then a test task waiting for it;
an agent given it either changed code nobody asked to change or changed nothing, and execution fails a task
that changes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_REPO
from wfqueue.analysis import RepoIndex, build_index
from wfqueue.collab.assemble import allocate
from wfqueue.lite.models import LitePlanDraft
from wfqueue.providers.offline.area import plan_area
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.generate import generate_tasks
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.understand import understand
from wfqueue.workflow_session.models import StructuredInput


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RepoIndex:
    repo = tmp_path_factory.mktemp("tests-only") / "sample-api"
    shutil.copytree(SAMPLE_REPO, repo, ignore=shutil.ignore_patterns("__pycache__", ".workflow"))
    return build_index(repo)


def lite(index: RepoIndex, requirement: str) -> LitePlanDraft:
    return plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])


@pytest.mark.parametrize("requirement", [
    "Add tests for the token expiry check in notes_api/auth/tokens.py",
    "Write unit tests covering notes_api/storage/cache.py eviction",
    "Increase test coverage of the auth package",
    "Cover the cache with tests",
    "Test that expired tokens are refused",
    "test(auth): cover verify_token edge cases",
    "[auth] Add tests for verify_token",
    "Add a new ArrayTypeNameTest covering ArrayTypeName.of",
    "Add unit and integration tests for the router",
    "Increase code coverage of utils.py",
    "Add tests for the router, and add more tests for the cache",
    "Add more cases to TypeNameTest for ArrayTypeName.of",
    "Add regression tests for the bug fixed in tokens.py",
    "GOAL: Add tests for the router\nSCOPE: api\nCONTEXT: Add tests for the router in the existing code\n"
    "CONSTRAINTS: Keep the public API; update callers in the same change",  # a session's constraint, not a change
    # Operations the tests are for, not changes asked for:
    "Add tests for update and delete",
    "Add tests for create, update and delete operations",
    "Write tests for the update and delete handlers of notes_api/api/handlers.py",
    "Add tests for rename or move",
    "Add tests for the login and logout endpoints",
    "Add tests for create and delete in notes_api/storage/db.py",
    "GOAL: Add tests for update and delete\nSCOPE: core changes for: Add tests for update and delete\n"
    "CONTEXT: existing code of the repository",  # as a workflow session structures it
])
def test_requirements_asking_only_for_tests(requirement: str) -> None:
    assert intent_of(requirement) == "tests"


@pytest.mark.parametrize("requirement", [
    "Add tests for the router and fix the off-by-one in Router.add",
    "Fix the expiry check; add a regression test",
    "fix: add a regression test for the expiry check",
    "Add tests for the router. Then refactor it.",
    "Add a test command to the CLI",
    "Add a test runner for the notes API",
    "Add caching to the router with tests",
    "Add the latest version check",  # "latest" ends like a test class's name; it is none
    "Add a RecordComponentSpec class for Java records",  # javapoet's *Spec classes are code
    "Add tests for the router, and add a 404 handler",
    "Add tests for the cache and create a cache warmer",
    "Test that X works. If not, correct it",
    "Add test IDs to the buttons",
    "Add a test endpoint that returns 200",
    "Add coverage reporting to CI",
    "Create the spec loader",
    "# Fix the 404 bug in the router\n\nAdd a regression test for it.",  # the heading asks for the fix
    "GOAL: Add tests for the router\nSCOPE: - Fix the 404 handler\nCONTEXT: the router",  # a session's bullets
    "Add tests for update and delete and fix the delete handler",
    "Add tests for update, and then delete the old fixtures",
    "Add tests for the router and then refactor",
    "Add tests for the router, update the fixtures",
    # A verb after "and" is a clause unless it ends a list of operations the tests are for:
    "Add tests and refactor", "Add tests for the cache and optimize", "Add tests and fix", "Add tests and implement!",
    "Add tests and fix and document the parser", "Add tests and fix: the parser drops lines",
    "Add tests, migrate requests to httpx", "Add tests and update routes to use the new middleware",
    "Add tests and remove functions that are unused", "Add tests for the router and fix handlers",
    "Add tests for the API and fix endpoints that return 500", "Add tests and handle requests without a token",
    "Add tests, and fix calls to the deprecated API", "Add tests and support paths with spaces",
    "Cover the parser with tests and rename functions to snake_case", "Add tests for update and fix the handler",
])
def test_requirements_asking_for_a_change_too(requirement: str) -> None:
    assert intent_of(requirement) == "change"


def test_a_lite_plan_for_tests_changes_only_test_files_and_names_the_code_to_read(index: RepoIndex) -> None:
    draft = lite(index, "Write tests for the router and the cache")
    assert [[(f.path, f.action) for f in t.files] for t in draft.tasks] == [
        [("tests/test_cache.py", "modify")], [("tests/test_router.py", "modify")]]
    by_test = {t.files[0].path: t for t in draft.tasks}
    router = by_test["tests/test_router.py"]
    # The router's test covers the router (not server.py, which the localizer ranks first for these words).
    assert router.focus_paths == ["tests/test_router.py", "notes_api/api/router.py"]
    assert "notes_api/api/router.py (" in router.description and "stays as it is" in router.description
    assert router.type == "testing" and router.depends_on == []  # two test files: written side by side
    assert router.convergence.verification == "python -m pytest -q tests/test_router.py"
    assert "`git status --short -- notes_api/api/router.py` lists nothing: the code under test is unchanged" \
        in router.convergence.criteria
    assert not any("fails without the change" in c for c in router.convergence.criteria)


@pytest.mark.parametrize(("requirement", "tests", "code"), [
    ("test: cover verify_token edge cases", ["tests/test_tokens.py"], ["notes_api/auth/tokens.py"]),
    ("Add tests for the token expiry check", ["tests/test_tokens.py"], ["notes_api/auth/tokens.py"]),
    ("Increase test coverage of the auth package", ["tests/test_tokens.py", "tests/test_users.py"],
     ["notes_api/auth/tokens.py", "notes_api/auth/users.py"]),
    ("Add tests in tests/test_handlers.py for the router", ["tests/test_handlers.py"], ["notes_api/api/router.py"]),
])
def test_the_code_under_test_is_what_the_requirement_names(index: RepoIndex, requirement: str, tests: list[str],
                                                           code: list[str]) -> None:
    """By identifier (not middleware.py, which calls verify_token), by a word naming the module, by a folder
    named; a test file the requirement names holds every test."""
    draft = lite(index, requirement)
    assert sorted(f.path for t in draft.tasks for f in t.files) == tests
    assert sorted(p for t in draft.tasks for p in t.focus_paths if p not in tests) == code


def test_a_repository_without_code_still_gets_its_test_task(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# parser\n", encoding="utf-8")
    [task] = lite(build_index(tmp_path), "Add tests for the parser").tasks
    assert [(f.path, f.action) for f in task.files] == [("tests/test_change.py", "create")]


def test_a_requirement_asking_for_a_fix_and_its_test_still_changes_the_code(index: RepoIndex) -> None:
    draft = lite(index, "Add tests for the token expiry check and fix verify_token in notes_api/auth/tokens.py")
    assert "notes_api/auth/tokens.py" in {f.path for t in draft.tasks for f in t.files}


def test_a_workflow_session_for_tests_plans_the_tests_alone(index: RepoIndex) -> None:
    goal = "Add tests for the token expiry check in notes_api/auth/tokens.py"
    structured = StructuredInput(goal=goal, scope="notes_api/auth", context=f"{goal} in the existing code",
                                 constraints=["Update the changelog with each change"])
    requirement = structured.goal
    draft = generate_tasks(index, "WFS-t", structured, assess(requirement, signals(index, requirement), False),
                           [], ["Update the changelog with each change"])
    assert [(t.id, [f.path for f in t.files]) for t in draft.tasks] == [("IMPL-1", ["tests/test_tokens.py"])]


def test_a_collab_plan_for_tests_splits_by_test_file_and_changes_no_code(index: RepoIndex) -> None:
    requirement = "Add tests for the router and the cache"
    analysis = allocate(understand(index, requirement, 4), "CPLAN-t", requirement, 4)
    assert sorted(p for sub in analysis.sub_domains for p in sub.focus_paths) == [
        "tests/test_cache.py", "tests/test_router.py"]
    assert analysis.understanding.constraints == [
        "The code under test does not change: notes_api/storage/cache.py, notes_api/api/router.py"]
    tasks = [t for sub in analysis.sub_domains for t in plan_area(index, analysis, sub.focus_area).tasks]
    assert sorted(f.path for t in tasks for f in t.files) == ["tests/test_cache.py", "tests/test_router.py"]
    assert all(t.type == "testing" and t.depends_on == [] for t in tasks)
    [router] = [t for t in tasks if t.files[0].path == "tests/test_router.py"]
    assert router.focus_paths == ["tests/test_router.py", "notes_api/api/router.py"]
    assert router.convergence.verification == "python -m pytest -q tests/test_router.py"


def test_a_test_class_named_without_its_file_is_that_file(tmp_path: Path) -> None:
    """Java names test files after their class: "a new FooTest" is src/test/java/p/FooTest.java, created beside
    the project's tests; an existing one named so is extended."""
    files = {"pom.xml": "<project/>\n",
             "src/main/java/p/Foo.java": "package p;\npublic class Foo {\n"
                                         "  public static Foo of(int n) { return null; }\n}\n",
             "src/test/java/p/BarTest.java": "package p;\nclass BarTest {\n  void t() { Foo.of(1); }\n}\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    index = build_index(tmp_path)
    [created] = lite(index, "Add tests in a new FooTest for Foo.of").tasks
    assert [(f.path, f.action) for f in created.files] == [("src/test/java/p/FooTest.java", "create")]
    [extended] = lite(index, "Add more cases to BarTest for Foo.of").tasks
    assert [(f.path, f.action) for f in extended.files] == [("src/test/java/p/BarTest.java", "modify")]
