"""What an offline plan's tasks say about the requirement, and what verify counts as its goal.

A correct one-task fix was blocked by verify (BLOCK_EXECUTION, 47 % coverage): the tasks said the
requirement only up to its 80th character ("...rejects ISO 8601..."), and the goal's key words counted
"2025", "01T10" and "02" from its example timestamp. "e.g." ended the first sentence, and became a
criterion: grep -n "g"."""

from __future__ import annotations

from pathlib import Path

from tests.wfs_factory import make_session, task
from wfqueue.analysis import build_index
from wfqueue.analysis.localize import named_identifiers
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.changes import change_phrase, criteria_for, requirement_brief, requirement_short
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import ConflictDetection, ContextPackage, PlanOverview, RiskFactors
from wfqueue.workflow_session.render import render_impl_plan
from wfqueue.workflow_session.session import PLAN_FILE, PROCESS_DIR, load_session
from wfqueue.workflow_session.session_conflicts import detect_session_conflicts
from wfqueue.workflow_session.structure import structure_input
from wfqueue.workflow_session.verify.rules import key_terms, term_words

LONG_FIX = ("Fix the token expiry check in notes_api/auth/tokens.py: tokens issued with a timezone offset such "
            "as 2025-01-01T10:00:00+02:00 expire early; accept them and convert to UTC")
JITTER = ("Add optional random jitter to Retry intervals, e.g. Retry(max=3, interval=[10, 30], jitter=0.2), "
          "so jobs spread")


def test_a_change_tasks_description_keeps_the_requirement_past_its_first_80_characters(sample_repo: Path) -> None:
    index = build_index(sample_repo)
    draft = plan_tasks(index, LONG_FIX, "s", assess(LONG_FIX, signals(index, LONG_FIX), False), [], [])
    change = draft.tasks[0]
    assert "accept them and convert to UTC" in change.description
    assert len(change.title) < 120  # the title stays short
    # Every key word of the goal is in the plan's task text, so verify's coverage can find it.
    planned = " ".join(f"{t.title} {t.description} {' '.join(t.convergence.criteria)}" for t in draft.tasks)
    assert set(key_terms(LONG_FIX)) <= set(key_terms(planned))


def test_numbers_in_a_goal_are_not_key_words() -> None:
    words = term_words(LONG_FIX)
    shown = {words[t] for t in key_terms(LONG_FIX)}
    assert {"timezone", "offset", "UTC", "expiry"} <= shown
    assert not shown & {"2025", "01", "01T10", "00", "02"}


def test_e_g_neither_ends_the_first_sentence_nor_names_an_identifier() -> None:
    assert requirement_short(JITTER, limit=400) == JITTER
    assert change_phrase(JITTER).startswith("Add optional random jitter to Retry intervals, e.g. Retry(max=3")
    assert named_identifiers(JITTER) == []
    assert named_identifiers("Call Queue.enqueue, i.e. the public API") == ["Queue.enqueue"]
    # A file's name in any language is no dotted identifier (the criteria asked to grep for "rs"); a call is.
    assert named_identifiers("Add tests for parse_config in src/config.rs and lib/app.rb") == ["parse_config"]
    assert named_identifiers("Return response.json() from fetch_all") == ["response.json", "fetch_all"]
    assert named_identifiers("Fix router.go() so it ignores history.go") == ["router.go"]
    # A real sentence end still ends it.
    assert requirement_short("Fix the parser. It drops the last line.") == "Fix the parser"


def test_a_brief_is_the_first_line_whole_and_cut_at_a_word_when_long() -> None:
    assert requirement_brief("GOAL: Fix the parser\nSCOPE: parser.py") == "Fix the parser"
    long = "Fix " + "the very long parser " * 30
    brief = requirement_brief(long)
    assert brief.endswith("...") and len(brief) <= 303 and brief[:-3].split()[-1] in {"the", "very", "long", "parser"}


def test_the_recommended_overlap_constraint_does_not_forbid_a_module_the_plan_creates() -> None:
    """Every task carried "extend rq/job.py instead of adding parallel modules", the one creating the module
    the requirement asked for (rq/backoff.py) included."""
    context = ContextPackage(
        metadata={}, project_context={}, assets={"source_code": [{"path": "rq/job.py"}]}, dependencies={},
        conflict_detection=ConflictDetection(risk_level="medium", risk_factors=RiskFactors(
            existing_implementations=["rq/job.py: Retry, Job.retry"])),
        exploration_results={}, prioritized_context={})
    [overlap] = detect_session_conflicts(context)
    constraint = " ".join(overlap.strategies[overlap.recommended].modifications)
    assert "rq/job.py" in constraint and "reuse" in constraint
    assert "instead of adding" not in constraint and "module" not in constraint


def test_a_brief_skips_headings_and_bare_labels_and_a_workflow_goal_keeps_its_e_g() -> None:
    assert requirement_brief("GOAL:\nFix the parser. It drops lines.") == "Fix the parser. It drops lines"
    assert requirement_brief("## Summary\n\nFix the parser") == "Fix the parser"
    assert structure_input(f"# Retries\n\n{JITTER}. Keep the API.").goal == "Retries"
    assert structure_input(f"{JITTER}. Keep the API.").goal.startswith("Add optional random jitter to Retry "
                                                                     "intervals, e.g. Retry(max=3")


def test_impl_plan_lists_a_file_changed_at_several_symbols_once(sample_repo: Path) -> None:
    entry = task(1, "Limit the API", ["notes_api/app.py"])
    entry["files"] = [{"path": "notes_api/app.py", "action": "modify", "target": name, "conflict_risk": "low"}
                      for name in ("create_app", "Router.add", "Router.dispatch", "handle")]
    folder = make_session(sample_repo, "Limit the API", [entry])
    overview = PlanOverview.model_validate_json((folder / PLAN_FILE).read_text())
    context = ContextPackage.model_validate_json((folder / PROCESS_DIR / "context-package.json").read_text())
    text = render_impl_plan(load_session(folder), overview, [UnifiedTask.model_validate(entry)], context, [])
    row = next(line for line in text.splitlines() if line.startswith("| IMPL-1 |"))
    assert row.endswith("| `notes_api/app.py` |"), row


def test_a_file_name_is_not_an_identifier_to_grep_for() -> None:
    """"Add tests in args_test.go for MatchAll" gave the criterion `grep -n "args_test" args.go`."""
    criteria = " ".join(criteria_for("Add tests in args_test.go for MatchAll", ["args.go"], ["args_test.go"],
                                     "go test ."))
    assert '"MatchAll"' in criteria and '"args_test"' not in criteria


def test_names_that_are_also_written_as_code_stay_in_the_criteria() -> None:
    """Filtering file names dropped response.json() and a `retry` also named in retry.py."""
    for requirement, name in (("Make response.json() raise a clear error on an empty body", "json"),
                              ("Add a `retry` function in retry.py and use it in the client", "retry")):
        assert f'"{name}"' in " ".join(criteria_for(requirement, ["client.py"], [], "")), requirement


def test_a_private_name_written_out_is_an_identifier_and_decides_the_file(sample_repo: Path) -> None:
    """`_encode_files` unquoted named nothing: the plan of a four-line fix spread over eight files, the right one
    among them, chosen by loose words."""
    assert named_identifiers("Fix _encode_files detection for __getattr__-based file wrappers") == ["_encode_files"]
    assert named_identifiers("Rename __cache_key and call __init__ once") == ["__cache_key"]  # a dunder names no one
    index = build_index(sample_repo)
    requirement = "Make _parse_int reject values with a leading plus sign"
    draft = plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])
    changed = [f.path for t in draft.tasks for f in t.files if not f.path.startswith("tests/")]
    assert changed and set(changed) == {"notes_api/api/handlers.py"}, changed


def test_the_files_criterion_names_every_file_it_says_it_checks() -> None:
    """"`git status --short -- a b c` lists each file" for a task of six files: three of them were never checked."""
    paths = [f"pkg/m{n}.py" for n in range(1, 7)] + ["pkg/with space.py"]
    [files, *_] = criteria_for("Change the modules", paths, [], "")
    assert files == ("`git status --short -- pkg/m1.py pkg/m2.py pkg/m3.py pkg/m4.py pkg/m5.py pkg/m6.py "
                     "'pkg/with space.py'` lists each file")
    many = criteria_for("Change the modules", [f"pkg/m{n}.py" for n in range(1, 11)], [], "")[0]
    assert many.endswith("lists each file (and 2 more of the task's files)")


def test_the_grep_criteria_quote_a_path_with_a_space_as_the_files_criterion_does() -> None:
    """`grep -n "retry" docs dir/client.py` searched two paths, neither of them the file."""
    criteria = criteria_for("Add `retry` to the client", ["docs dir/client.py"], ["tests/test client.py"],
                            "pytest 'tests/test client.py'")
    assert "`grep -n \"retry\" 'docs dir/client.py'` finds it" in criteria, criteria
    assert "`grep -rn \"retry\" 'tests/test client.py'` finds a test using it" in criteria, criteria


def test_a_tasks_test_criterion_is_where_it_writes_its_test() -> None:
    """`grep -rn "check_quota" .` "finds a test using it" was met by the change's own code; a task that may change
    no test was asked for one that fails without the change in tests it may not touch (`pytest tests/test_x.py`
    "runs a test that fails without the change"), or to grep tests another task writes."""
    adds = criteria_for("Call a new `check_quota` helper", ["app/api.py"], [], "python -m pytest -q", adds_test=True)
    assert not any("grep -rn" in c for c in adds), adds
    assert adds[-1] == ("`git status --short --untracked-files=all` lists a test file it adds, which fails without "
                        "the change and passes with it")
    # Writing no test (a lite plan's test task writes it): no test criterion at all.
    none = criteria_for("Call a new `check_quota` helper", ["app/api.py"], [], "python -m pytest -q tests/test_x.py")
    assert none == ["`git status --short -- app/api.py` lists the file", "`python -m pytest -q tests/test_x.py` passes",
                    '`grep -n "check_quota" app/api.py` finds it']


def test_a_tests_only_tasks_criteria_quote_a_path_with_a_space() -> None:
    """`git status --short -- tests/token tests/test_tokens.py` named two paths, neither of them the test file."""
    from wfqueue.analysis import RepoIndex
    from wfqueue.providers.offline.file_task import file_task, unchanged_criterion

    index = RepoIndex(root="/x", files=[], symbols={}, imports={}, tests_for={}, doc_tokens={}, languages={},
                      test_command="")
    task = file_task(index, "Add tests for verify_token", "TASK-001", "tests/token tests/test_tokens.py", True,
                     ["app/token auth.py"], kind="testing", description="d", verification="")
    assert "`git status --short -- 'tests/token tests/test_tokens.py'` lists the file" in task.convergence.criteria
    assert unchanged_criterion(["app/token auth.py"]) == [
        "`git status --short -- 'app/token auth.py'` lists nothing: the code under test is unchanged"]


def test_a_name_the_repository_defines_is_not_asked_of_every_planned_file(tmp_path: Path) -> None:
    """"Fix should_strip_auth so ..." planned over five files gave each "`grep -n should_strip_auth FILE` finds
    it", asking files that need not hold it to use it; a file the requirement names is still asked."""
    from tests.conftest import write
    from wfqueue.providers.offline.changes import defined_elsewhere

    index = build_index(write(tmp_path, {
        "web/sessions.py": "def should_strip_auth(old, new):\n    return old != new\n",
        "web/auth.py": "def basic(user):\n    return user\n",
    }))
    fix = "Fix should_strip_auth so a redirect to another port keeps the header"
    assert defined_elsewhere(index, ["web/auth.py"], fix) == frozenset({"should_strip_auth"})
    criteria = criteria_for(fix, ["web/auth.py"], [], "python -m pytest -q", defined_elsewhere(index, ["web/auth.py"],
                                                                                              fix))
    assert not any("grep" in c for c in criteria), criteria
    asked = "Call should_strip_auth from web/auth.py before sending credentials"
    assert defined_elsewhere(index, ["web/auth.py"], asked) == frozenset()
