"""`wfqueue verify`: checks per dimension, limits, ids, gate, report files, read-only, CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tests.conftest import commit_in, git_in
from tests.wfs_factory import make_session, task
from wfqueue.cli.verify_cmd import register
from wfqueue.errors import BadInputError, SessionNotFoundError, WfqueueError
from wfqueue.fsio import atomic_write_json, atomic_write_text
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import ContextPackage, Finding, PlanOverview
from wfqueue.workflow_session.render import render_impl_plan
from wfqueue.workflow_session.session import IMPL_PLAN_FILE, PLAN_FILE, PROCESS_DIR, SESSION_FILE, load_session
from wfqueue.workflow_session.verify.checks import coverage_colour, finding, forbidden_paths, is_testable
from wfqueue.workflow_session.verify.run import (
    FINDINGS_FILE,
    REPORT_FILE,
    VerificationReport,
    apply_limits,
    assign_ids,
    quality_gate,
    verify_session,
)

GOAL = "Add retry and timeout to the HTTP client"


def clean_tasks() -> list[dict[str, Any]]:
    return [
        task(1, "Add retry to the HTTP client", ["client.py"]),
        task(2, "Add timeout to the HTTP client", ["client.py"], [1]),
        task(3, "Test retry and timeout", ["tests/test_client.py"], [1, 2]),
    ]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in ("client.py", "legacy.py", "tests/test_client.py", "a.py", "b.py", "c.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# code\n")
    return root


def dims(report: VerificationReport, dim: str) -> list[Finding]:
    return [f for f in report.findings if f.dimension == dim]


def edit_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    atomic_write_json(path, data)


# -- clean session, report files --------------------------------------------------------------


def test_clean_session_proceeds_with_green_coverage_and_writes_both_files(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    report = verify_session(folder)
    assert report.findings == []
    assert report.quality_gate == "PROCEED"
    assert (report.coverage.percent, report.coverage.colour) == (100.0, "GREEN")
    assert report.coverage.terms == ["retry", "timeout", "HTTP", "client"]  # as the goal wrote them
    data = json.loads((folder / ".process" / FINDINGS_FILE).read_text())
    assert data["session_id"] == "WFS-test-session" and data["quality_gate"] == "PROCEED"
    assert data["coverage"]["percent"] == 100.0 and data["coverage"]["colour"] == "GREEN"
    assert data["counts"] == {"CRITICAL": 0, "HIGH": 0, "MEDIUM": 0, "LOW": 0} and data["findings"] == []
    assert data["timestamp"]
    md = (folder / ".process" / REPORT_FILE).read_text()
    headings = ["# Plan Verification: WFS-test-session", "## Executive Summary", "## Findings Summary",
                "## Analysis by Dimension", "## Findings by Severity", "## Next Steps"]
    positions = [md.index(h) for h in headings]
    assert positions == sorted(positions)
    for dim in "ABCDEFGHIJ":
        assert f"\n### {dim}. " in md
    assert "| Requirements coverage | 100.0 % (GREEN) |" in md


def test_verify_touches_no_other_file(repo: Path) -> None:
    folder = make_session(repo, GOAL, [*clean_tasks(), task(4, "Add retry to the HTTP client", ["ghost.py"], [9])])

    def snapshot() -> dict[str, tuple[str, int]]:
        # content hash and mtime: a rewrite with the same content would still count as a write
        return {str(p.relative_to(repo)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                for p in sorted(repo.rglob("*")) if p.is_file()}

    before = snapshot()
    verify_session(folder)
    after = snapshot()
    outputs = {f"{folder.relative_to(repo)}/.process/{name}" for name in (REPORT_FILE, FINDINGS_FILE)}
    assert set(after) == set(before) | outputs
    assert {k: v for k, v in after.items() if k not in outputs} == before


# -- D dependencies ---------------------------------------------------------------------------


def test_dependency_cycle_is_a_high_d_finding(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[0]["depends_on"] = ["IMPL-2"]  # IMPL-2 already depends on IMPL-1
    report = verify_session(make_session(repo, GOAL, tasks))
    [cycle] = dims(report, "D")
    assert cycle.severity == "HIGH" and cycle.id == "H1"
    assert "IMPL-1 -> IMPL-2 -> IMPL-1" in cycle.summary
    assert cycle.location == ["task:IMPL-1", "task:IMPL-2"]
    assert report.quality_gate == "PROCEED_WITH_FIXES"


def test_a_missing_file_a_task_names_once_per_symbol_is_one_finding(repo: Path) -> None:
    """The offline planner names a file once per symbol a task changes there (``files[].target``): a file removed
    since planning was reported once per entry (H1, H2, H3 alike), and by `validate` and a replan's warning too."""
    tasks = clean_tasks()
    tasks[0]["files"] = [{"path": "client.py", "action": "modify", "target": name, "conflict_risk": "low"}
                         for name in ("Client", "Client.get", "Client.__init__")]
    folder = make_session(repo, GOAL, tasks)
    (repo / "client.py").unlink()
    report = verify_session(folder)
    missing = [f for f in report.findings if "client.py does not exist" in f.summary]
    assert [f.location for f in missing] == [["task:IMPL-1"], ["task:IMPL-2"]], missing


def test_dangling_dependency(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[2]["depends_on"] = ["IMPL-1", "IMPL-9"]
    report = verify_session(make_session(repo, GOAL, tasks))
    [dangling] = dims(report, "D")
    assert (dangling.severity, dangling.location) == ("HIGH", ["task:IMPL-3"])
    assert "IMPL-9" in dangling.summary
    assert report.quality_gate == "PROCEED_WITH_FIXES"


def test_task_changing_a_created_file_must_depend_on_its_creator(repo: Path) -> None:
    tasks = [task(1, "Add retry module retry.py for the HTTP client timeout", ["retry.py"]),
             task(2, "Use retry in the HTTP client", ["retry.py", "client.py"])]
    tasks[0]["files"][0]["action"] = "create"
    report = verify_session(make_session(repo, GOAL, tasks))
    [missing] = dims(report, "D")
    assert missing.location == ["task:IMPL-2", "task:IMPL-1"] and "creates" in missing.summary


# -- C consistency ----------------------------------------------------------------------------


def test_missing_file_to_modify_is_a_high_c_finding(repo: Path) -> None:
    tasks = [*clean_tasks(), task(4, "Add retry to the HTTP client docs", ["docs/retry.md"], [1])]
    report = verify_session(make_session(repo, GOAL, tasks))
    [missing] = [f for f in dims(report, "C") if "docs/retry.md" in f.summary]
    assert (missing.severity, missing.location) == ("HIGH", ["task:IMPL-4"])
    assert report.quality_gate == "PROCEED_WITH_FIXES"


def test_a_tracked_file_a_sparse_checkout_leaves_out_of_the_folder_is_not_missing(repo: Path) -> None:
    """Validate and execute take a file git tracks as there to change (every task's worktree has it); verify
    looked at the folder alone and called the plan's file missing, a HIGH finding no edit could mend."""
    tasks = [*clean_tasks(), task(4, "Add retry to the HTTP client docs", ["docs/retry.md"], [1])]
    git_in(repo, "init", "-q")
    commit_in(repo, "docs", {"docs/retry.md": "# Retry\n"})
    git_in(repo, "update-index", "--skip-worktree", "docs/retry.md")  # what a sparse checkout does to it
    (repo / "docs/retry.md").unlink()
    report = verify_session(make_session(repo, GOAL, tasks))
    assert [f for f in report.findings if "docs/retry.md" in f.summary] == []
    tasks.append(task(5, "Add timeout to the HTTP client docs", ["docs/timeout.md"], [1]))
    report = verify_session(make_session(repo, GOAL, tasks, session_id="WFS-second"))  # neither tracked nor there
    assert [f.summary for f in dims(report, "C") if "docs/" in f.summary] == [
        "file docs/timeout.md does not exist but is to be modified; fix the path or use action create"]


def test_a_file_inside_a_submodule_is_a_finding_as_validate_and_execute_refuse_it(repo: Path, tmp_path: Path) -> None:
    """verify passed a plan changing a submodule's file, which validate reports and execute refuses."""
    lib = tmp_path / "lib"
    lib.mkdir()
    git_in(lib, "init", "-q")
    commit_in(lib, "lib", {"lib.py": "X = 1\n"})
    git_in(repo, "init", "-q")
    commit_in(repo, "code", {})
    git_in(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    git_in(repo, "commit", "-qm", "a submodule")
    tasks = [*clean_tasks(), task(4, "Add retry to the vendored lib", ["vendor/lib/lib.py"], [1])]
    report = verify_session(make_session(repo, GOAL, tasks))
    assert [f.summary for f in report.findings if "vendor/lib/lib.py" in f.summary] == [
        "file vendor/lib/lib.py is inside the submodule vendor/lib, another repository, whose files no execution "
        "of this one changes; plan and execute that part in that repository (`--repo vendor/lib`, with paths "
        "relative to it), then record its new commit here"]


def test_a_file_to_create_need_not_exist(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[2]["files"] = [{"path": "tests/test_timeout.py", "action": "create"}]
    assert verify_session(make_session(repo, GOAL, tasks)).findings == []


def test_eleven_tasks_exceed_the_limit(repo: Path) -> None:
    tasks = [task(n, f"Add retry and timeout to the HTTP client part {n}", [f"part{n}.py"]) for n in range(1, 12)]
    for n in range(1, 12):
        (repo / f"part{n}.py").write_text("")
    report = verify_session(make_session(repo, GOAL, tasks))
    [limit] = [f for f in report.findings if "at most 10" in f.summary]
    assert (limit.dimension, limit.severity) == ("C", "HIGH") and limit.summary.startswith("11 tasks")
    assert report.quality_gate == "PROCEED_WITH_FIXES"


def test_inconsistent_todo_list(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    todo = folder / "TODO_LIST.md"
    lines = todo.read_text().splitlines()
    assert lines[5].startswith("- [ ] **IMPL-2**")
    lines[5] = "- [ ] **IMPL-7**: Something else → [📋](./.task/IMPL-7.json)"
    todo.write_text("\n".join(lines) + "\n")
    report = verify_session(folder)
    assert {(f.severity, tuple(f.location)) for f in dims(report, "C")} == {
        ("HIGH", ("TODO_LIST.md:L6",)), ("HIGH", ("TODO_LIST.md", "task:IMPL-2"))}
    assert report.quality_gate == "PROCEED_WITH_FIXES"


def test_todo_title_and_state_must_match_the_task(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    todo = folder / "TODO_LIST.md"
    todo.write_text(todo.read_text().replace("- [ ] **IMPL-1**: Add retry to", "- [x] **IMPL-1**: Add retries to"))
    report = verify_session(folder)
    assert sorted((f.severity, f.location[0], f.summary) for f in dims(report, "C")) == [
        ("MEDIUM", "TODO_LIST.md:L5", "TODO_LIST.md marks IMPL-1 done, the task status is pending"),
        ("MEDIUM", "TODO_LIST.md:L5", "TODO_LIST.md title of IMPL-1 differs from the task title")]


def test_plan_json_and_impl_plan_must_list_the_tasks(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / "plan.json", lambda d: d.update(task_ids=["IMPL-1", "IMPL-2", "IMPL-5"]))
    plan = folder / "IMPL_PLAN.md"
    plan.write_text(plan.read_text().replace("task_count: 3", "task_count: 4").replace("| IMPL-3 |", "| IMPL-8 |"))
    report = verify_session(folder)
    summaries = sorted(f.summary for f in dims(report, "C"))
    assert summaries == sorted([
        "plan.json lists IMPL-5, which has no task file", "IMPL-3 is missing from plan.json task_ids",
        "IMPL_PLAN.md says task_count 4, .task/ has 3", "IMPL_PLAN.md names IMPL-8, which has no task file",
        "IMPL-3 is missing from the IMPL_PLAN.md task breakdown"])
    line = next(n for n, text in enumerate(plan.read_text().splitlines(), 1) if text.startswith("task_count"))
    assert any(f.location == [f"IMPL_PLAN.md:L{line}"] for f in dims(report, "C"))


def test_broken_task_file_blocks_and_does_not_dangle(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    (folder / ".task" / "IMPL-2.json").write_text("{not json")
    report = verify_session(folder)
    [broken] = [f for f in report.findings if f.severity == "CRITICAL"]
    assert (broken.dimension, broken.location) == ("C", [".task/IMPL-2.json"])
    assert dims(report, "D") == []  # IMPL-3 -> IMPL-2 is not "unknown": the file exists
    assert report.quality_gate == "BLOCK_EXECUTION" and report.skipped_tiers == [3, 4]


# -- F specification --------------------------------------------------------------------------


def test_task_without_verification_is_medium(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[1]["convergence"]["verification"] = "TBD"
    report = verify_session(make_session(repo, GOAL, tasks))
    assert [(f.dimension, f.severity, f.location) for f in report.findings] == [("F", "MEDIUM", ["task:IMPL-2"])]
    assert "no verification" in report.findings[0].summary
    assert report.quality_gate == "PROCEED_WITH_CAUTION"


def test_a_file_changed_at_several_symbols_counts_once(repo: Path) -> None:
    """files[] holds one entry per symbol changed: four symbols of client.py are one file, not four."""
    tasks = clean_tasks()
    tasks[0]["effort"] = "small"
    tasks[0]["files"] = [{"path": "client.py", "action": "modify", "target": name, "conflict_risk": "low"}
                         for name in ("Client.get", "Client.post", "Client.send", "retry")]
    assert verify_session(make_session(repo, GOAL, tasks)).findings == []
    tasks[0]["files"] += [{"path": p, "action": "modify", "conflict_risk": "low"} for p in ("a.py", "b.py", "c.py")]
    [h] = dims(verify_session(make_session(repo, GOAL, tasks, session_id="WFS-four-files")), "H")
    assert h.summary == "IMPL-1 changes 4 files (effort small)"


def test_vague_criteria_and_glob_focus(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[0]["convergence"]["criteria"] = ["retry works properly"]
    tasks[1]["focus_paths"] = ["src/*"]
    tasks[1]["files"] = []
    report = verify_session(make_session(repo, GOAL, tasks))
    assert sorted((f.location[0], f.summary) for f in dims(report, "F")) == [
        ("task:IMPL-1", "IMPL-1 criteria not testable: retry works properly"),
        ("task:IMPL-2", "IMPL-2 focus paths are only directories or globs: src/*")]


@pytest.mark.parametrize(("criterion", "ok"), [
    ("works properly", False), ("the code is clean and robust", False), ("handles errors correctly", False),
    ("`pytest -q` passes", True), ("returns 404 for unknown ids", True), ("client.py implements retry", True),
    ("raises ValueError on bad input", True), ("retry_count is honoured", True),
])
def test_testable_rule(criterion: str, ok: bool) -> None:
    assert is_testable(criterion) is ok


# -- B coverage, A intent ---------------------------------------------------------------------


def test_low_coverage_is_red(repo: Path) -> None:
    goal = "Add retry, caching, logging, metrics and tracing to the HTTP client"
    report = verify_session(make_session(repo, goal, [task(1, "Add retry to the HTTP client", ["client.py"])]))
    assert report.coverage.colour == "RED" and report.coverage.percent == pytest.approx(42.9)
    assert report.coverage.missing == ["caching", "logging", "metrics", "tracing"]
    [gap] = dims(report, "B")
    assert gap.severity == "CRITICAL" and "42.9 %" in gap.summary
    assert report.quality_gate == "BLOCK_EXECUTION"


def test_coverage_shows_the_goals_words_not_their_stems(repo: Path) -> None:
    # Matching is by stem ("caching" meets "cache"), but the user is shown the words the goal wrote, everywhere.
    goal = "Add rate limiting and response caching to the login API"
    folder = make_session(repo, goal, [task(1, "Refactor helpers", ["client.py"]),
                                       task(2, "Cache the login API responses", ["client.py"], [1])])
    report = verify_session(folder)
    words = ["rate", "limiting"]
    assert report.coverage.terms == ["rate", "limiting", "response", "caching", "login", "API"]
    assert report.coverage.missing == words
    data = json.loads((folder / ".process" / FINDINGS_FILE).read_text())
    assert data["coverage"]["missing"] == words
    [gap] = dims(report, "B")
    assert gap.summary.endswith("not addressed: rate, limiting")
    md = (folder / ".process" / REPORT_FILE).read_text()
    assert "missing: rate, limiting\n" in md and "rat," not in md
    code, out = run("--repo", repo)
    assert code == 1 and "missing: rate, limiting\n" in out and "rat," not in out


def test_two_terms_of_one_word_show_that_word_once(repo: Path) -> None:
    report = verify_session(make_session(repo, "Wrap the client in a RateLimiter", [task(1, "Wrap the client",
                                                                                       ["client.py"])]))
    assert report.coverage.missing == ["RateLimiter"]  # its terms "rate" and "limit" are both missing


@pytest.mark.parametrize("goal", ["为登录接口添加限流", "Do it all"])  # not split by tokenize; only stopwords
def test_coverage_of_a_goal_without_key_words_is_not_measured_rather_than_green(repo: Path, goal: str) -> None:
    folder = make_session(repo, goal, clean_tasks())
    report = verify_session(folder)
    assert report.coverage.colour == "UNMEASURED" and report.coverage.percent != 100.0
    [gap] = dims(report, "B")
    assert gap.severity == "MEDIUM" and "cannot be measured" in gap.summary
    assert report.quality_gate == "PROCEED_WITH_CAUTION"
    md = (folder / ".process" / REPORT_FILE).read_text()
    assert "| Requirements coverage | not measured (the goal has no key word to match) |" in md
    assert "100.0 %" not in md and "GREEN" not in md
    code, out = run("--repo", repo)
    assert code == 0 and "coverage: not measured" in out and "GREEN" not in out


@pytest.mark.parametrize(("percent", "colour"), [(100, "GREEN"), (90, "GREEN"), (89.9, "YELLOW"), (75, "YELLOW"),
                                                 (74.9, "RED"), (0, "RED")])
def test_coverage_colour(percent: float, colour: str) -> None:
    assert coverage_colour(percent) == colour


def test_task_off_the_goal_is_an_intent_finding(repo: Path) -> None:
    folder = make_session(repo, GOAL, [*clean_tasks(), task(4, "Rename the database tables", ["db/schema.sql"])])
    edit_json(folder / ".process" / "context-package.json", lambda d: d["assets"].update(source_code=[]))
    report = verify_session(folder)
    [off] = dims(report, "A")
    assert (off.severity, off.location) == ("MEDIUM", ["task:IMPL-4"])


# -- I constraints, J N+1, E synthesis -----------------------------------------------------------


def test_task_touching_a_file_a_resolved_conflict_forbids_blocks(repo: Path) -> None:
    folder = make_session(repo, GOAL, [*clean_tasks(), task(4, "Add retry to the legacy HTTP client", ["legacy.py"])])
    atomic_write_json(folder / ".process" / "conflict-resolution.json", {
        "session_id": "WFS-test-session", "resolved_at": "2026-11-22T08:00:00+00:00", "summary": {},
        "resolved_conflicts": [{"conflict_id": "CON-001", "strategy_name": "Adapter",
                                "strategy_approach": "Keep legacy.py unchanged and add an adapter in client.py",
                                "modifications_applied": []}]})
    report = verify_session(folder)
    [violation] = dims(report, "I")
    assert violation.severity == "CRITICAL" and violation.id == "C1"
    assert violation.location == ["task:IMPL-4", ".process/conflict-resolution.json:CON-001"]
    assert report.quality_gate == "BLOCK_EXECUTION"


@pytest.mark.parametrize(("text", "paths"), [
    ("Do not modify legacy.py; add a wrapper in client.py", ["legacy.py"]),
    ("Add an adapter in client.py, do not modify legacy.py", ["legacy.py"]),
    ("do not modify a.py, b.py or c.py", ["a.py", "b.py", "c.py"]),
    ("legacy/old.py must not be modified", ["legacy/old.py"]),
    ("the `config/*.yaml` files are read-only", ["config/*.yaml"]),
    ("Prefer small commits, e.g. one per file", []),
])
def test_forbidden_paths(text: str, paths: list[str]) -> None:
    assert forbidden_paths(text) == paths


def test_deferred_items(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / ".process" / "planning-notes.json",
              lambda d: d.update(deferred=["Metrics export for dashboards", "Timeout for the HTTP client"]))
    report = verify_session(folder)
    assert sorted((f.severity, f.location[0]) for f in dims(report, "J")) == [
        ("HIGH", "task:IMPL-2"), ("LOW", "planning-notes.md")]


def test_unresolved_conflict_risk_and_ignored_critical_file(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks(), risk="medium")
    edit_json(folder / ".process" / "context-package.json",
              lambda d: d["exploration_results"]["aggregated_insights"].update(critical_files=["legacy.py"]))
    report = verify_session(folder)
    assert sorted((f.severity, f.summary.split(" ")[0]) for f in dims(report, "E")) == [
        ("HIGH", "conflict"), ("HIGH", "no")]


def test_user_constraints_decisions_and_failed_modifications(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / ".process" / "planning-notes.json", lambda d: d.update(
        key_constraints=["Keep the public API stable"],
        decisions=[{"decision": "Never touch tests/test_client.py", "rationale": "owned by QA", "revisit": False},
                   {"decision": "Use exponential backoff", "rationale": "standard", "revisit": True}]))
    atomic_write_json(folder / ".process" / "conflict-resolution.json", {
        "session_id": "WFS-test-session", "resolved_at": "2026-11-22T08:00:00+00:00", "summary": {},
        "failed_modifications": [{"file": "client.py", "error": "anchor not found"}]})
    report = verify_session(folder)
    assert sorted((f.dimension, f.severity, f.location[0]) for f in report.findings) == [
        ("I", "HIGH", ".process/conflict-resolution.json"),  # the failed modification
        ("I", "MEDIUM", "IMPL_PLAN.md"),  # the key constraint is not stated in the plan
        ("J", "HIGH", "task:IMPL-3"),  # contradicts "Never touch tests/test_client.py"
        ("J", "MEDIUM", "planning-notes.md")]  # decision flagged for revisit


def test_files_outside_the_gathered_context_and_parallel_over_dependencies(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / ".process" / "context-package.json",
              lambda d: d["assets"].update(source_code=[{"path": "client.py", "role": "x", "relevance_score": 1}]))
    edit_json(folder / "plan.json", lambda d: d.update(recommended_execution="Parallel"))
    report = verify_session(folder)
    assert sorted((f.severity, f.location[0]) for f in dims(report, "E")) == [("MEDIUM", "plan.json"),
                                                                              ("MEDIUM", "task:IMPL-3")]
    # a file changed at two symbols is named once ("changes Rakefile, Rakefile")
    edit_json(folder / ".task" / "IMPL-3.json", lambda d: d.update(files=[*d["files"], *d["files"]]))
    (outside,) = [f.summary for f in dims(verify_session(folder), "E") if f.location[0] == "task:IMPL-3"]
    changed = outside.split(" changes ", 1)[1].split(", which", 1)[0].split(", ")
    assert len(changed) == len(set(changed)), outside


def test_not_a_session_is_bad_input(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    with pytest.raises(SessionNotFoundError):
        verify_session(folder.parent / "WFS-missing")
    (folder / "workflow-session.json").write_text("{}")
    with pytest.raises(BadInputError) as caught:
        verify_session(folder)
    assert caught.value.exit_code == 2
    assert not (folder / ".process" / FINDINGS_FILE).exists()


# -- G duplication, H feasibility ---------------------------------------------------------------


def test_duplicates_and_file_churn_are_low(repo: Path) -> None:
    tasks = [*clean_tasks(), task(4, "Add retry to the HTTP client", ["client.py"], [2])]
    report = verify_session(make_session(repo, GOAL, tasks))
    assert sorted(f.summary for f in dims(report, "G")) == [
        "client.py is changed by 3 tasks (IMPL-1, IMPL-2, IMPL-4)", "tasks IMPL-1, IMPL-4 have the same title terms"]
    assert {f.severity for f in dims(report, "G")} == {"LOW"}
    assert report.quality_gate == "PROCEED"  # LOW findings do not hold execution back


def test_feasibility(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[0]["files"] = [{"path": "client.py", "action": "create"}]
    tasks[1]["convergence"]["verification"] = "./run-tests.sh"
    report = verify_session(make_session(repo, GOAL, tasks))
    assert sorted((f.location[0], f.summary.split(" ")[0]) for f in dims(report, "H")) == [
        ("task:IMPL-1", "IMPL-1"), ("task:IMPL-2", "execution")]


# -- limits, ids, gate (pure) -----------------------------------------------------------------


def many(dim: str, severity: str, n: int) -> list[Finding]:
    return [finding(dim, severity, [f"task:IMPL-{i}"], f"{dim}{i}", "fix") for i in range(n)]


def test_limits_per_tier_and_in_all() -> None:
    kept, skipped, omitted = apply_limits(many("D", "HIGH", 20) + many("F", "MEDIUM", 25) + many("G", "LOW", 20))
    per_tier = [sum(f.dimension == d for f in kept) for d in "DFG"]
    assert per_tier == [15, 20, 15] and skipped == [] and omitted == 15
    kept, _, omitted = apply_limits(many("C", "MEDIUM", 30) + many("D", "HIGH", 20) + many("H", "LOW", 20))
    assert [sum(f.dimension == d for f in kept) for d in "CDH"] == [30, 15, 5] and len(kept) == 50 and omitted == 20
    kept, _, _ = apply_limits(many("A", "HIGH", 60))
    assert len(kept) == 60  # tier 1 is never cut


def test_lower_tier_keeps_its_most_severe_findings() -> None:
    kept, _, _ = apply_limits(many("E", "LOW", 15) + many("J", "HIGH", 3))
    assert sum(f.severity == "HIGH" for f in kept) == 3 and len(kept) == 15


def test_tier1_critical_skips_tiers_3_and_4() -> None:
    kept, skipped, omitted = apply_limits(many("I", "CRITICAL", 1) + many("D", "HIGH", 2) + many("F", "MEDIUM", 2)
                                          + many("H", "LOW", 2))
    assert skipped == [3, 4] and omitted == 4 and sorted(f.dimension for f in kept) == ["D", "D", "I"]
    _, skipped, _ = apply_limits(many("D", "CRITICAL", 1) + many("F", "MEDIUM", 1))
    assert skipped == []  # only tier-1 criticals skip


def test_ids_by_severity() -> None:
    ids = [(f.id, f.dimension) for f in assign_ids(many("H", "LOW", 2) + many("F", "MEDIUM", 1) + many("D", "HIGH", 1)
                                                   + many("C", "CRITICAL", 1) + many("A", "CRITICAL", 1))]
    assert ids == [("C1", "A"), ("C2", "C"), ("H1", "D"), ("M1", "F"), ("L1", "H"), ("L2", "H")]


@pytest.mark.parametrize(("severities", "gate"), [
    ([], "PROCEED"), (["LOW"], "PROCEED"), (["LOW", "MEDIUM"], "PROCEED_WITH_CAUTION"),
    (["MEDIUM", "HIGH"], "PROCEED_WITH_FIXES"), (["HIGH", "CRITICAL", "LOW"], "BLOCK_EXECUTION"),
])
def test_quality_gate(severities: list[str], gate: str) -> None:
    assert quality_gate([f for s in severities for f in many("A", s, 1)]) == gate


# -- CLI --------------------------------------------------------------------------------------


def run(*args: object) -> tuple[int, str]:
    """Invoke like wfqueue.cli.main.main(): a WfqueueError exits with its own code."""
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:  # keeps `verify` a subcommand, as in the real app
        pass

    result = CliRunner().invoke(app, ["verify", *map(str, args)])
    if isinstance(result.exception, WfqueueError):
        return result.exception.exit_code, str(result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_cli_exit_codes(repo: Path) -> None:
    make_session(repo, GOAL, clean_tasks(), session_id="WFS-clean")
    code, out = run("--session", "WFS-clean", "--repo", repo)
    assert code == 0 and "quality gate PROCEED" in out and "100.0 % (GREEN)" in out
    tasks = clean_tasks()
    tasks[1]["convergence"]["verification"] = "TBD"
    make_session(repo, GOAL, tasks, session_id="WFS-caution")
    assert run("--session", "WFS-caution", "--repo", repo)[0] == 0
    tasks = clean_tasks()
    tasks[0]["depends_on"] = ["IMPL-2"]
    make_session(repo, GOAL, tasks, session_id="WFS-cycle")
    code, out = run("--session", "WFS-cycle", "--repo", repo)
    assert code == 1 and "PROCEED_WITH_FIXES" in out and "H1" in out
    code, message = run("--session", "WFS-nope", "--repo", repo)
    assert code == 2 and "WFS-nope" in message


def test_cli_json_and_active_session(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[2]["depends_on"] = ["IMPL-9"]
    folder = make_session(repo, GOAL, tasks, session_id="WFS-only")
    code, out = run("--repo", repo, "--json")  # no --session: the active one
    payload = json.loads(out)
    assert code == 1 and payload["session_id"] == "WFS-only"
    assert payload["quality_gate"] == "PROCEED_WITH_FIXES" and payload["counts"]["HIGH"] == 1
    assert payload["findings"][0]["id"] == "H1" and payload["findings"][0]["dimension"] == "D"
    assert payload["report"] == str(folder / ".process" / REPORT_FILE)
    assert json.loads((folder / ".process" / FINDINGS_FILE).read_text())["findings"] == payload["findings"]


def test_cli_prints_task_text_verbatim(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / ".process" / "planning-notes.json", lambda d: d.update(deferred=["Retry [/] budget [bold]"]))
    code, out = run("--repo", repo)
    assert code == 0 and "[/]" in out and "[bold]" in out  # printed as text, not parsed as rich markup


def interrupt(folder: Path) -> None:
    """Leave ``folder`` as a Ctrl-C during the context phase of `wfqueue plan` does: only the session and notes."""
    edit_json(folder / "workflow-session.json", lambda d: d.update(
        status="planning", phases={"session": "done", "context": "running", "conflicts": "pending",
                                   "tasks": "pending"}))
    for name in ("plan.json", "IMPL_PLAN.md", "TODO_LIST.md", ".process/context-package.json"):
        (folder / name).unlink()
    for path in (folder / ".task").iterdir():
        path.unlink()


def test_a_session_still_being_planned_is_refused_with_the_resume_command(repo: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_session(repo, GOAL, clean_tasks(), session_id="WFS-half")
    interrupt(folder)
    before = sorted(p.name for p in folder.rglob("*"))
    with pytest.raises(BadInputError) as caught:
        verify_session(folder)
    assert caught.value.exit_code == 2 and "WFS-half is still being planned" in caught.value.message
    monkeypatch.chdir(tmp_path)  # elsewhere: the command must name the repository
    code, message = run("--repo", repo)
    assert code == 2 and f"`wfqueue resume WFS-half --repo {repo}`" in message
    # Its command may still run, waiting for an answer: a resume then is refused (its Redis is in use).
    assert "let the command planning it finish (it may be waiting for an answer), or if it stopped" in \
        " ".join(message.split())
    assert "replan" not in message and "no usable task" not in message
    assert sorted(p.name for p in folder.rglob("*")) == before  # no PLAN_VERIFICATION.md, no findings file


def test_a_session_from_another_tool_records_no_phases_and_is_verified(repo: Path) -> None:
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / "workflow-session.json", lambda d: d.pop("phases"))
    assert verify_session(folder).quality_gate == "PROCEED"


def test_cli_without_any_session_exits_2(repo: Path) -> None:
    code, message = run("--repo", repo)
    assert code == 2 and "no workflow session" in message


def test_a_verification_command_carrying_a_second_command_is_a_high_finding(repo: Path) -> None:
    tasks = clean_tasks()
    tasks[1]["convergence"]["verification"] = "pytest tests/test_client.py; rm -rf ~"
    tasks[2]["convergence"]["verification"] = "pytest ../../elsewhere"
    report = verify_session(make_session(repo, GOAL, tasks))
    refused = {f.location[0]: f for f in dims(report, "H")}
    assert set(refused) == {"task:IMPL-2", "task:IMPL-3"}
    assert all(f.severity == "HIGH" for f in refused.values())
    assert "needs a shell (';')" in refused["task:IMPL-2"].summary
    assert "outside the repository: ../../elsewhere" in refused["task:IMPL-3"].summary
    assert report.quality_gate == "PROCEED_WITH_FIXES"


def test_the_users_constraints_are_stated_in_the_plan_it_generates(repo: Path) -> None:
    """Every plan of a requirement with a "must not" sentence got the MEDIUM finding "user constraint not stated
    in the plan": IMPL_PLAN.md listed only the chosen strategies' constraints."""
    folder = make_session(repo, GOAL, clean_tasks())
    edit_json(folder / SESSION_FILE, lambda data: data["structured"].update(
        constraints=["The client must not retry a POST"]))
    context = ContextPackage.model_validate_json((folder / PROCESS_DIR / "context-package.json").read_text())
    plan = render_impl_plan(load_session(folder), PlanOverview.model_validate_json((folder / PLAN_FILE).read_text()),
                            [UnifiedTask.model_validate(t) for t in clean_tasks()], context, [])
    atomic_write_text(folder / IMPL_PLAN_FILE, plan)
    report = verify_session(folder)
    assert not [f for f in report.findings if "user constraint not stated" in f.summary], report.findings
    assert "- The client must not retry a POST" in plan


def test_a_session_folder_that_refuses_writes_says_to_verify_again(repo: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """verify on a read-only session (exit 3, right) advised to `wfqueue resume` the session; what it needs is
    the folder writable and the verify run again."""
    import errno
    import os

    make_session(repo, GOAL, clean_tasks())

    def refused(*_: object, **__: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", refused)
    code, said = run("--repo", repo)
    said = " ".join(said.split())
    assert code == 3 and "read-only file system" in said, said
    assert "make the session folder writable again, then `wfqueue resume` a plan, or run `verify` or `replan` again" \
        in said, said
