"""Lite-plan decisions that need no workers: assessment, synthesis across angles, offline planning."""

from __future__ import annotations

from pathlib import Path

from wfqueue.analysis import build_index
from wfqueue.lite.models import AngleFindings, Check, Clarification, RelevantFile, VerifiedExploration
from wfqueue.lite.render import render_exploration, render_notes
from wfqueue.lite.synthesis import core_files, merge_questions, rounds
from wfqueue.plan_check import check_plan
from wfqueue.providers.offline.assess import RepoSignals, assess, select_preset, signals
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.understand import relevant_files
from wfqueue.tasks_file import dump_jsonl, parse_jsonl
from wfqueue.workflow_session.context import build_context_package, planned_test, touched_files
from wfqueue.workflow_session.models import StructuredInput
from wfqueue.workflow_session.structure import as_text


def quiet_repo(**overrides: object) -> RepoSignals:
    values = {"relevant": ["a.py"], "max_fan_in": 0, "untested": [], "internal_edges": 0, "novel_words": []}
    return RepoSignals(**{**values, **overrides})


def test_presets_follow_the_keyword_table_and_ignore_file_paths() -> None:
    assert select_preset("Refactor the auth module")[0] == "architecture"  # first matching preset wins
    assert select_preset("Tighten permission checks")[0] == "security"
    assert select_preset("Make listing less slow")[0] == "performance"
    assert select_preset("Fix notes_api/auth/tokens.py")[0] == "bugfix"
    assert select_preset("Add dark mode") == ("feature", ["patterns", "integration-points", "testing", "dependencies"])
    # Tests or documents only: the cache's tests are no performance work.
    assert select_preset("Write tests for the router and the cache")[0] == "testing"
    assert select_preset("Document the cache settings in README.md")[0] == "docs"


def test_complexity_sets_the_number_of_angles() -> None:
    low = assess("Fix the message in app/tokens.py", quiet_repo(), False)
    assert (low.complexity, low.angles) == ("Low", ["error-handling"])
    medium = assess("Add export of notes", quiet_repo(relevant=["a.py", "b.py", "c.py"], novel_words=["export"]), False)
    assert medium.complexity == "Medium" and len(medium.angles) == 3
    high = assess("Restructure storage into layers", quiet_repo(relevant=list("abcdef"), internal_edges=5), False)
    assert high.complexity == "High" and high.angles == ["architecture", "dependencies", "modularity",
                                                         "integration-points"]


def test_exploration_decision_and_its_reasons() -> None:
    assert not assess("Write a changelog entry", quiet_repo(), False).needs_exploration
    forced = assess("Write a changelog entry", quiet_repo(), True)
    assert forced.needs_exploration and forced.exploration_reasons == ["--explore given"]
    named = assess("Rename the helper in app/x.py", quiet_repo(), False)
    assert named.exploration_reasons == ["names files: app/x.py", "modifies existing code"]
    # No verb from the list, but a change across several widely used modules: explored all the same.
    wide = quiet_repo(relevant=["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"], max_fan_in=9, internal_edges=5)
    retry = assess("Retry failed HTTP requests with exponential backoff", wide, False)
    assert retry.complexity == "High" and retry.needs_exploration and retry.exploration_reasons == ["High complexity"]


def exploration(angle: str, files: list[tuple[str, str, bool]], questions: list[str]) -> VerifiedExploration:
    findings = AngleFindings(
        angle=angle,
        relevant_files=[RelevantFile(path=p, relevance=r, rationale=f"{angle} view") for p, r, _ in files],  # type: ignore[arg-type]
        clarification_needs=[Clarification(question=q, options=[f"{angle} option"]) for q in questions],
    )
    checks = [Check(kind="file", subject=p, verified=ok, evidence="") for p, _, ok in files]
    return VerifiedExploration(findings=findings, checks=checks, provider="test", timestamp="t")


def test_core_files_rank_across_angles_and_put_unverified_last() -> None:
    explorations = [
        exploration("security", [("auth.py", "medium", True), ("ghost.py", "high", False)], []),
        exploration("dataflow", [("auth.py", "high", True), ("db.py", "high", True), ("util.py", "low", True)], []),
    ]
    ranked = core_files(explorations)
    assert [c.path for c in ranked] == ["auth.py", "db.py", "util.py", "ghost.py"]
    assert ranked[0].angles == ["security", "dataflow"] and ranked[0].relevance == "high"
    assert not ranked[-1].verified


def test_questions_of_the_same_intent_are_merged_and_asked_four_at_a_time() -> None:
    explorations = [
        exploration("security", [], ["Should rate limits apply per user or per token?", "Which store keeps counters?"]),
        exploration("dataflow", [], ["Should rate limits apply per user or per API token?"]),
    ]
    merged = merge_questions(explorations)
    assert len(merged) == 2
    assert merged[0].angles == ["security", "dataflow"]
    assert merged[0].options == ["security option", "dataflow option"]
    many = merge_questions([exploration("x", [], [f"topic{n} scope{n} owner{n}?" for n in range(9)])])
    assert [len(batch) for batch in rounds(many)] == [4, 4, 1]


def test_offline_plan_uses_only_verified_files_and_its_test_waits_for_the_changes(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    requirement = "Add a RateLimiter middleware that limits API requests per user"
    findings = [exploration("patterns", [("notes_api/api/middleware.py", "high", True),
                                         ("notes_api/auth/users.py", "medium", True),
                                         ("notes_api/api/phantom.py", "high", False)], [])]
    assessment = assess(requirement, quiet_repo(relevant=["a", "b", "c"], novel_words=["rate"]), False)
    draft = plan_tasks(index, requirement, "s", assessment, findings, [])
    text = dump_jsonl(draft.tasks)
    loaded, problems = parse_jsonl(text)
    assert problems == [] and check_plan(loaded, sample_repo) == []
    paths = {f.path for t in draft.tasks for f in t.files}
    assert "notes_api/api/phantom.py" not in paths
    assert "notes_api/api/middleware.py" in paths
    *changes, test = draft.tasks
    created = [t for t in changes if any(f.action == "create" for f in t.files)]
    assert len(created) == 1
    # the new module gets a test file of its own, not a neighbour's
    assert [(f.path, f.action) for f in test.files] == [("tests/test_rate_limiter.py", "create")]
    assert test.convergence.verification == "python -m pytest -q tests/test_rate_limiter.py"  # not the suite
    dependents = [t for t in changes if t.depends_on]
    assert dependents and all(t.depends_on == [created[0].id] for t in dependents), \
        "among the changes, only the new module is a real dependency"
    # The test is written against the changed code: it waits for every change.
    assert test.title.startswith("Test:") and test.depends_on == [t.id for t in changes]
    assert 2 <= len(draft.tasks) <= 7


def test_a_verified_finding_the_ranking_leaves_out_is_context_not_a_critical_file(sample_repo: Path) -> None:
    """Every verified, highly relevant finding was critical (1.0): an angle reading a module the change does
    not concern made verify ask every plan to change it (13 of 14 workflow plans of real projects got "no task
    touches the critical file(s)")."""
    index = build_index(sample_repo)
    requirement = "Reject expired tokens in verify_token"
    best = relevant_files(index, requirement, max_agents=5)[0][0]
    found = [exploration("security", [(best, "high", True), ("notes_api/server.py", "high", True)], [])]
    scores = dict(touched_files(index, requirement, found))
    assert scores[best] == 1.0  # as central as the ranking makes it: critical
    assert "notes_api/server.py" not in dict(relevant_files(index, requirement, max_agents=5))
    assert scores["notes_api/server.py"] == 0.5  # outside the ranking: context ("medium"), not critical


def test_the_context_package_names_the_test_the_plan_will_change(tmp_path: Path) -> None:
    """sinatra's content_type is tested in helpers_test.rb, which tests no file the context touched: verify
    found the plan changing a test "the gathered context never examined" (PROCEED_WITH_CAUTION)."""
    files = {
        "lib/app/base.rb": "module App\n  module Helpers\n    def content_type(type)\n      type\n    end\n"
                           "  end\nend\n",
        "test/base_test.rb": "class BaseTest\n  # sets Content-Type\nend\n",
        "test/helpers_test.rb": "class HelpersTest\n  def test_it\n    content_type :json\n    content_type :xml\n"
                                "  end\nend\n",
        "Rakefile": "task :test\n", "Gemfile": "gem 'rake'\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    index = build_index(tmp_path)
    structured = StructuredInput(goal="Fix the content_type helper so it does not add a second charset",
                                 scope="lib/app/base.rb", context="")
    draft = plan_tasks(index, as_text(structured), "s", assess(as_text(structured), signals(index, "x"), False),
                       [], [])
    assert planned_test(index, structured) == draft.tasks[-1].files[0].path == "test/helpers_test.rb"
    assessment = assess(as_text(structured), signals(index, "x"), False)
    package = build_context_package(index, "WFS-x", "t", structured, assessment, [], {})
    assert "test/helpers_test.rb" in package.assets["tests"]


def test_a_path_with_a_newline_or_a_pipe_stays_in_its_table_row() -> None:
    """A file named `src/retry\nnewline.py` split its row of the exploration tables over two lines, and a `|` in
    a name ended its cell: the rest of the row moved a column."""
    odd = ["src/retry\nnewline.py", "src/a|b.py"]
    found = exploration("security", [(path, "medium", True) for path in odd], [])
    text = render_exploration(found, "Fix the retries")
    rows = [line for line in text.splitlines() if line.startswith("| `src/")]
    assert rows == ["| `src/retry newline.py` | medium | security view | ✅ |",
                    "| `src/a\\|b.py` | medium | security view | ✅ |"], text
    notes = render_notes("Fix the retries", "t", assess("Fix the retries", quiet_repo(), False), [found],
                         core_files([found]), [], {})
    assert sum(1 for line in notes.splitlines() if line.startswith("| `src/")) == 2, notes


def test_a_title_or_a_command_from_a_model_cannot_restructure_plan_md() -> None:
    """A title holding a line break and a fence began a `#` heading of its own and opened a code block that swallowed
    Task Details; a verification holding a backtick ended its code span."""
    from wfqueue.lite.models import Assessment
    from wfqueue.lite.render import render_plan
    from wfqueue.unified_task import UnifiedTask

    assessment = Assessment(complexity="Low", scope="s", depth="d", risk="r", dependencies="none", preset="feature",
                            angles=[], needs_exploration=False, exploration_reasons=[])
    task = UnifiedTask.model_validate({
        "id": "TASK-001", "title": "Add sub\n# Injected\n```", "description": "d", "type": "feature",
        "files": [{"path": "calc/ops.py", "action": "modify"}],
        "convergence": {"criteria": ["works"], "verification": "pytest -k `x`", "definition_of_done": "done"}})
    text = render_plan("s", "req", "now", assessment, "u", [task], "tasks.jsonl", {})
    assert "\n# Injected" not in text and "\n```\n- **Scope**" not in text
    assert "### TASK-001: Add sub # Injected ```" in text
    assert "- **Verification**: `` pytest -k `x` ``" in text  # the span's padding, as CommonMark strips it
