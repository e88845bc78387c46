"""A requirement asking only for documentation is planned as documents about code that stays as it is.

Plans of "Document the token expiry settings in README.md" changed notes_api/config.py, cache.py, tokens.py
and middleware.py, wrote a test, and never touched README.md (the localizer ranks code); a workflow session for
it resolved "conflicts" about signatures nobody was changing. "Add docstrings to tokens.py" got a test task
asking for a case that fails without the change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_REPO
from wfqueue.analysis import RepoIndex, build_index
from wfqueue.collab.assemble import allocate
from wfqueue.lite.models import Assessment, LitePlanDraft
from wfqueue.providers.offline.area import plan_area
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.docs_only import documents_beside_change, documents_to_write, is_document
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.understand import understand
from wfqueue.workflow_session.context import build_context_package
from wfqueue.workflow_session.structure import as_text, structure_input


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RepoIndex:
    repo = tmp_path_factory.mktemp("docs-only") / "sample-api"
    shutil.copytree(SAMPLE_REPO, repo, ignore=shutil.ignore_patterns("__pycache__", ".workflow"))
    return build_index(repo)


def lite(index: RepoIndex, requirement: str) -> LitePlanDraft:
    return plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])


@pytest.mark.parametrize(("requirement", "intent"), [
    ("Document the token expiry settings in README.md", "docs"),
    ("Update the README to explain how to run the server", "docs"),
    ("Write a deployment guide in docs/deploy.md", "docs"),
    ("Add a changelog entry for the retry fix", "docs"),
    ("Explain the cache.py settings in the docs", "docs"),
    ("docs(readme): update the install steps", "docs"),
    ("Add a section to docs/quickstart.md about streaming", "docs"),
    ("Fix typos in the README", "docs"),
    ("Add usage examples to the README", "docs"),
    ("Create CONTRIBUTING.md", "docs"),
    ("Add docstrings to notes_api/auth/tokens.py", "docstrings"),
    ("Add a docstring to notes_api/api/router.py", "docstrings"),
    ("Document every public function in tokens.py with docstrings", "docstrings"),
    ("Add comments explaining the retry loop", "docstrings"),
    ("Update the README and refactor the CLI", "change"),
    ("Document the API and implement pagination", "change"),
    ("Add a docs command to the CLI", "change"),
    ("Update the documentation builder to use mkdocs", "change"),
    ("Add support for readme badges", "change"),
    ("Document X and add a --verbose flag", "change"),
    ("Fix the docs build", "change"),
    ("Update the docs dependencies", "change"),
    ("Add OpenAPI docs to the server", "change"),
    ("Add a readme parser", "change"),
    ("Update the docs URL in setup.py", "change"),
    ("Add comments endpoint to the API", "change"),
    ("Update the comments API to support replies", "change"),
    ("Add docstring support to the parser", "change"),
    # A part of a document, in a document (they planned changes to five modules and a test).
    ("Fix the broken link to the AI Policy in CONTRIBUTING.md", "docs"),
    ("Add a FAQ entry to the docs about UnicodeEncodeError on Windows", "docs"),
    ("Remove the old badges from README.md", "docs"),
    ("Fix the parser for links in README.md", "change"),  # the parser is the change, README.md where it looks
    ("docs: fix malformed comment in cleanPath", "docstrings"),  # documentation in the code, not a document
    ("Parametrize the deprecation tests and check the warning targets", "tests"),
    # Code named after the documents: a change.
    ("Fix broken link detection in the docs builder", "change"),
    ("Add an entry point to the docs CLI", "change"),
    ("Fix the URL validation of the docs server", "change"),
    ("Remove the duplicate entries from the readme parser", "change"),
    ("docs: explain comments API in README", "docs"),  # a document it names, not comments in the code
    ("docs: fix the comment in the docs builder", "docstrings"),  # the builder's code
    # The documents themselves, however they are named after the part: documentation.
    ("Update the links in the docs folder", "docs"),
    ("Update the install steps in the README file", "docs"),
    ("Add a FAQ entry to the docs site about proxies", "docs"),
    ("Remove the outdated section from the README since v2", "docs"),
])
def test_what_a_requirement_asks_for(requirement: str, intent: str) -> None:
    assert intent_of(requirement) == intent


def test_a_lite_plan_for_the_readme_changes_the_readme_and_names_the_code_it_describes(index: RepoIndex) -> None:
    [task] = lite(index, "Update the README to explain how verify_token checks expiry").tasks
    assert [(f.path, f.action) for f in task.files] == [("README.md", "modify")]
    assert task.type == "docs" and task.focus_paths == ["README.md", "notes_api/auth/tokens.py"]
    assert "Read the code it describes first, notes_api/auth/tokens.py (verify_token" in task.description
    assert task.convergence.verification == "python -m pytest -q"  # a stray edit to the code still fails it
    assert task.convergence.criteria == [
        "`git status --short -- README.md` lists the file",
        '`grep -n "verify_token" README.md` finds it',
        "`python -m pytest -q` passes",
        "`git status --short -- notes_api/auth/tokens.py` lists nothing: the code it describes is unchanged"]


def test_a_named_document_is_created_where_the_requirement_says(index: RepoIndex) -> None:
    [task] = lite(index, "Write a deployment guide in docs/deploy.md").tasks
    assert [(f.path, f.action) for f in task.files] == [("docs/deploy.md", "create")]


def test_the_document_is_the_page_about_the_topic_the_readme_or_the_changelog_when_asked(tmp_path: Path) -> None:
    for rel, text in {"README.md": "# web\nA client. See docs/ for timeouts, proxies and pools.\n",
                      "CHANGELOG.md": "## 1.0\n- timeouts, proxies, pool limits, retries\n",
                      "docs/advanced/timeouts.md": "# Timeouts\nSet a timeout per request.\n",
                      "docs/advanced/proxies.md": "# Proxies\nRoute requests through a proxy.\n",
                      "LICENSE.md": "timeouts proxies\n",
                      "web/client.py": "def get(url, timeout=None):\n    return url\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    index = build_index(tmp_path)
    assert documents_to_write(index, "Document how to set timeouts per request") == [
        ("docs/advanced/timeouts.md", True)]  # not the changelog, which mentions every topic
    assert documents_to_write(index, "Explain proxy settings in the docs") == [("docs/advanced/proxies.md", True)]
    assert documents_to_write(index, "Add a changelog entry for the retry fix") == [("CHANGELOG.md", True)]
    assert documents_to_write(index, "Update the README with the install steps") == [("README.md", True)]
    assert documents_to_write(index, "Add a retries.md page describing retries") == [("docs/retries.md", False)]


def test_docstrings_change_the_code_without_a_test_task(index: RepoIndex) -> None:
    draft = lite(index, "Add docstrings to notes_api/auth/tokens.py")
    assert {f.path for t in draft.tasks for f in t.files} == {"notes_api/auth/tokens.py"}
    assert all(t.type == "docs" for t in draft.tasks)
    assert not any("fails without the change" in c for t in draft.tasks for c in t.convergence.criteria)


def test_a_collab_plan_for_documents_changes_only_documents(index: RepoIndex) -> None:
    requirement = "Document the token expiry settings in README.md and docs/auth.md"
    analysis = allocate(understand(index, requirement, 4), "CPLAN-d", requirement, 4)
    tasks = [t for sub in analysis.sub_domains for t in plan_area(index, analysis, sub.focus_area).tasks]
    assert sorted((f.path, f.action) for t in tasks for f in t.files) == [
        ("README.md", "modify"), ("docs/auth.md", "create")]
    assert all(t.type == "docs" and t.depends_on == [] for t in tasks)
    assert all("notes_api/auth/tokens.py" in t.focus_paths for t in tasks)


@pytest.mark.parametrize("goal", ["Document the token expiry settings in README.md",
                                  "Update the README to explain how to run the server",
                                  "Add tests for the router and the cache"])
def test_a_session_changing_no_code_has_nothing_to_break(index: RepoIndex, goal: str) -> None:
    """No conflict resolution about signatures for a plan that changes none; its critical files are the code
    the documents or tests are about."""
    structured = structure_input(goal)  # as `wfqueue plan` reads it: its scope repeats the goal
    assessment = Assessment(complexity="Medium", scope="s", depth="d", risk="r", dependencies="none",
                            preset="feature", angles=["patterns"], needs_exploration=False)
    package = build_context_package(index, "WFS-n", "2026-01-01T00:00:00+00:00", structured, assessment, [], {})
    assert package.conflict_detection.risk_level == "low"
    assert package.conflict_detection.risk_factors.breaking_changes == []
    plan = lite(index, as_text(structured))
    read = sorted({p for t in plan.tasks for p in t.focus_paths} - {f.path for t in plan.tasks for f in t.files})
    assert sorted(package.critical_files()) == read


def test_a_change_that_asks_to_document_it_updates_the_document_after_the_change(index: RepoIndex) -> None:
    draft = lite(index, "Let verify_token accept a leeway in seconds, and document the option in README.md")
    [docs] = [t for t in draft.tasks if any(f.path == "README.md" for f in t.files)]
    changes = [t for t in draft.tasks if t.type != "docs" and not t.title.startswith("Test: ")]
    [test] = [t for t in draft.tasks if t.title.startswith("Test: ")]
    assert "notes_api/auth/tokens.py" in {f.path for t in changes for f in t.files}
    assert docs.type == "docs" and docs.depends_on == [t.id for t in changes]  # it documents what they made
    assert test.depends_on == [t.id for t in changes]
    assert "notes_api/auth/tokens.py" in docs.focus_paths and docs.convergence.verification == "python -m pytest -q"


def test_a_document_the_change_only_mentions_is_not_updated(index: RepoIndex) -> None:
    draft = lite(index, "Let the server print the title of README.md at start-up")
    assert "README.md" not in {f.path for t in draft.tasks for f in t.files}


def test_a_collab_plans_document_of_the_change_waits_for_every_change(index: RepoIndex) -> None:
    requirement = "Let verify_token accept a leeway in seconds, and document the option in README.md"
    analysis = allocate(understand(index, requirement, 4), "CPLAN-m", requirement, 4)
    tasks = [t for sub in analysis.sub_domains for t in plan_area(index, analysis, sub.focus_area).tasks]
    [docs] = [t for t in tasks if [f.path for f in t.files] == ["README.md"]]
    code = [t for t in tasks if t is not docs and not any("tests/" in f.path for f in t.files)]
    assert "notes_api/auth/tokens.py" in {f.path for t in code for f in t.files}
    assert docs.type == "docs" and docs.depends_on == sorted(t.id for t in code)


def test_a_bare_document_name_several_folders_have_is_not_guessed(tmp_path: Path) -> None:
    for rel in ("README.md", "docs/api/index.md", "docs/guide/index.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("# page\n", encoding="utf-8")
    index = build_index(tmp_path)
    [(path, exists)] = documents_to_write(index, "Document the retry option in index.md")
    assert exists and path != "index.md"  # one of the pages there is, not a new index.md at the top
    assert documents_to_write(index, "Document the retry option in docs/guide/index.md") == [
        ("docs/guide/index.md", True)]


@pytest.mark.parametrize(("requirement", "documents"), [
    ("Add a flag, document it in readme.md", [("README.md", True)]),
    ("Add a flag and document it in the README", [("README.md", True)]),
    ("Add a flag and update the changelog", [("CHANGELOG.md", False)]),
    ("Update the parser so it can read README.md front matter", []),
    ("Make the CLI list the headings of README.md", []),
    ("Update requirements.txt to pin httpx and fix the client retry", []),  # no document
])
def test_which_documents_a_change_updates(index: RepoIndex, requirement: str,
                                          documents: list[tuple[str, bool]]) -> None:
    assert documents_beside_change(index, requirement) == documents


@pytest.mark.parametrize("requirement", ["Add docstrings to middleware.py",
                                         "Add a docstring to notes_api/api/middleware.py"])
def test_docstrings_for_a_file_named_like_a_component_change_that_file_and_create_nothing(
        index: RepoIndex, requirement: str) -> None:
    """"Add docstrings to middleware.py" read "docstrings to middleware" as a new component (middleware being a
    kind of one) and planned notes_api/api/docstrings_to.py; "Add a docstring" was a feature with a test task."""
    draft = lite(index, requirement)
    assert [(f.path, f.action) for t in draft.tasks for f in t.files] == [
        ("notes_api/api/middleware.py", "modify")] * len([f for t in draft.tasks for f in t.files])
    assert draft.tasks and all(t.type == "docs" for t in draft.tasks)


@pytest.mark.parametrize(("requirement", "created"), [
    ("Add logging to middleware.py", None),
    ("Add logging to the middleware", None),
    ("Add a rate limiting middleware", "notes_api/api/rate_limiting.py"),
])
def test_a_change_creates_a_module_only_for_a_component_it_names(index: RepoIndex, requirement: str,
                                                                created: str | None) -> None:
    made = [f.path for t in lite(index, requirement).tasks for f in t.files if f.action == "create"
            and not f.path.startswith("tests/")]
    assert made == ([created] if created else [])


def test_docstrings_are_planned_where_they_are_asked_for_and_never_crash(index: RepoIndex, tmp_path: Path) -> None:
    draft = lite(index, "Add docstrings to the router")
    assert {f.path for t in draft.tasks for f in t.files} == {"notes_api/api/router.py"}  # not its users
    requirement = "Add docstrings to notes_api/auth/tokens.py"
    analysis = allocate(understand(index, requirement, 4), "CPLAN-s", requirement, 4)
    tasks = [t for sub in analysis.sub_domains for t in plan_area(index, analysis, sub.focus_area).tasks]
    assert tasks and all(t.type == "docs" for t in tasks)
    assert not any("fails without the change" in c for t in tasks for c in t.convergence.criteria)
    (tmp_path / "README.md").write_text("# parser\n", encoding="utf-8")
    bare = build_index(tmp_path)  # no code at all: still a plan, as for any change
    assert lite(bare, "Add docstrings to the parser").tasks
    assert understand(bare, "Add docstrings to the parser", 4).sub_domains


def test_a_document_github_shows_from_dot_github_is_fixed_there(tmp_path: Path) -> None:
    """.github/CONTRIBUTING.md was invisible (a hidden folder): a fix of its links created docs/CONTRIBUTING.md."""
    (tmp_path / ".github" / "ISSUE_TEMPLATE").mkdir(parents=True)
    (tmp_path / ".github" / "CONTRIBUTING.md").write_text("# Contributing\nSee [policy](http://x).\n")
    (tmp_path / ".github" / "ISSUE_TEMPLATE" / "bug.md").write_text("# Bug\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Docs\n")
    (tmp_path / "app.py").write_text("def run():\n    return 1\n")
    index = build_index(tmp_path)
    [task] = lite(index, "Fix broken links in CONTRIBUTING.md").tasks
    assert [(f.path, f.action) for f in task.files] == [(".github/CONTRIBUTING.md", "modify")]
    assert not is_document(".github/ISSUE_TEMPLATE/bug.md")  # a template is still no document
