"""lite-plan end to end: angles explored at the same time on real workers, findings verified.

The plans of the first test run in embedded mode (Redis and workers started by the CLI, gone after it);
the others share one Redis and one worker for the module: what they check does not depend on who started
the cluster, and an embedded cluster per plan costs more than the plan."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import (
    Cluster,
    processes_mentioning,
    run_cli,
    run_cli_in_process,
    session_dir,
    shared_cluster,
    write_script,
)

from wfqueue.plan_check import check_plan
from wfqueue.tasks_file import dump_jsonl, parse_jsonl

pytestmark = pytest.mark.integration
# The tests on the shared cluster run on one xdist worker, one after another, so it starts once.
on_the_cluster = pytest.mark.xdist_group("lite-plan-cluster")

CASES = {
    "Low": ("Fix the typo in the error message in notes_api/auth/tokens.py", ["error-handling"]),
    "Medium": ("Add request logging to the API middleware", ["patterns", "integration-points", "testing"]),
    "High": ("Refactor the storage layer and authentication into a modular architecture",
             ["architecture", "dependencies", "modularity", "integration-points"]),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with shared_cluster(tmp_path_factory.mktemp("lite-plan"), "lite-plan", 4) as started:  # up to four angles
        yield started


@pytest.mark.parametrize("complexity", ["Low", "Medium", "High"])
def test_angles_run_at_the_same_time_and_tasks_validate(complexity: str, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, sample_repo: Path,
                                                        tmp_path: Path) -> None:
    requirement, angles = CASES[complexity]
    provider = write_script(tmp_path / "script.json", latency_s=0.5)
    run = run_cli("lite-plan", requirement, "--repo", str(sample_repo), "-y", "--provider", provider, "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    assert folder.parent == sample_repo / ".workflow" / ".lite-plan"
    manifest = json.loads((folder / "explorations-manifest.json").read_text())
    assert manifest["complexity"] == complexity
    assert [e["angle"] for e in manifest["explorations"]] == angles
    for entry in manifest["explorations"]:
        assert (folder / entry["file"]).is_file()
    if len(angles) > 1:
        spans = [(e["started_at"], e["finished_at"]) for e in manifest["explorations"]]
        assert max(s for s, _ in spans) < min(f for _, f in spans), f"angles did not overlap: {spans}"
        assert len({e["pid"] for e in manifest["explorations"]}) == len(angles)
    notes = (folder / "exploration-notes.md").read_text()
    for part in range(1, 7):
        assert f"## Part {part}:" in notes
    text = (folder / "tasks.jsonl").read_text()
    loaded, problems = parse_jsonl(text)
    assert problems == [] and 2 <= len(loaded) <= 7
    assert dump_jsonl([t.task for t in loaded]) == text, "tasks.jsonl does not round-trip"
    assert check_plan(loaded, sample_repo) == []
    assert [t.task.id for t in loaded] == [f"TASK-{n:03d}" for n in range(1, len(loaded) + 1)]
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    assert analysis["complexity"] == complexity and analysis["exploration_angles"] == angles
    plan_md = (folder / "plan.md").read_text()
    assert "## Task Overview" in plan_md and all(t.task.id in plan_md for t in loaded)
    # in-process (test_validate_catches_planted_defects_with_line_numbers runs `validate` as a CLI process)
    validate = run_cli_in_process(capsys, monkeypatch, "validate", str(folder / "tasks.jsonl"), "--repo",
                                  str(sample_repo))
    assert validate.code == 0, validate.stdout + validate.stderr
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


@on_the_cluster
def test_a_step_retried_later_says_when(cluster: Cluster, sample_repo: Path, tmp_path: Path) -> None:
    """A step whose model call was refused for longer than it may wait (retry-after past its time limit) is
    retried by its task later; the command showed nothing meanwhile (12 minutes for a retry-after of 600 s)."""
    provider = write_script(tmp_path / "script.json", busy={"assess": {"times": 1, "retry_after": 2}})
    run = cluster.run("lite-plan", CASES["Medium"][0], "--repo", str(sample_repo), "-y", "--provider", provider,
                      "--json")
    assert run.code == 0, run.stderr
    said = " ".join(run.stderr.split())
    assert re.search(r"the assessment: assess: the model is busy \(scripted\); tried again in 2s "
                     r"\(at \d\d:\d\d:\d\d; try 2 of \d+\)", said), said


def test_a_failing_angle_is_skipped_and_named(cluster: Cluster, sample_repo: Path, tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", fail={"explore:testing": "injected: testing explorer crashed"})
    run = cluster.run("lite-plan", CASES["Medium"][0], "--repo", str(sample_repo), "-y", "--provider", provider,
                      "--json")
    assert run.code == 1, run.stderr
    assert run.json()["status"] == "partial"
    folder = session_dir(run)
    manifest = json.loads((folder / "explorations-manifest.json").read_text())
    assert [e["angle"] for e in manifest["explorations"]] == ["patterns", "integration-points"]
    assert manifest["failed_angles"] == [{"angle": "testing", "error": "injected: testing explorer crashed"}]
    assert not (folder / "exploration-testing.md").exists()
    assert "testing (injected: testing explorer crashed)" in (folder / "exploration-notes.md").read_text()
    assert "testing: injected: testing explorer crashed" in (folder / "plan.md").read_text()
    assert parse_jsonl((folder / "tasks.jsonl").read_text())[1] == []

    # Resumed with the angle's explorer well again: it is explored, and the plan made without it is made again
    # with its findings (it said "completed" with the tasks and plan.md made without them).
    healthy = write_script(tmp_path / "healthy.json")
    resumed = cluster.run("resume", folder.name, "--repo", str(sample_repo), "-y", "--provider", healthy, "--json")
    assert resumed.code == 0, resumed.stderr
    assert resumed.json()["status"] == "completed" and "testing explored now: planning again" in resumed.stderr
    plan_md = (folder / "plan.md").read_text()
    assert "injected: testing explorer crashed" not in plan_md and "3 verified angle(s)" in plan_md, plan_md
    assert json.loads((folder / "requirement-analysis.json").read_text())["failed_angles"] == {}

    # The terminal's summary line lists the angles the plan was made with: it listed the failed one among them.
    shown = cluster.run("lite-plan", CASES["Medium"][0], "--repo", str(sample_repo), "-y", "--provider", provider)
    said = " ".join(shown.stdout.split())
    assert "angles: patterns, integration-points)" in said and "skipped angle: testing" in said, said


@on_the_cluster
def test_an_angle_explored_by_the_resume_does_not_replace_a_plan_edited_since(cluster: Cluster, sample_repo: Path,
                                                                             tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", fail={"explore:testing": "injected: testing explorer crashed"})
    run = cluster.run("lite-plan", CASES["Medium"][0], "--repo", str(sample_repo), "-y", "--provider", provider,
                      "--json")
    assert run.code == 1 and run.json()["status"] == "partial", run.stderr
    tasks_file = session_dir(run) / "tasks.jsonl"
    tasks, _ = parse_jsonl(tasks_file.read_text(), "tasks.jsonl")
    edited = dump_jsonl([tasks[0].task.model_copy(update={"title": "Log requests (my words)"}),
                         *(t.task for t in tasks[1:])])
    tasks_file.write_text(edited, encoding="utf-8")

    healthy = write_script(tmp_path / "healthy.json")
    resumed = cluster.run("resume", session_dir(run).name, "--repo", str(sample_repo), "-y", "--provider", healthy,
                          "--json")
    assert resumed.code == 1 and resumed.json()["status"] == "partial", resumed.stderr
    assert "tasks.jsonl was edited since" in resumed.json()["failed_angles"]["testing"]
    assert tasks_file.read_text() == edited


@on_the_cluster
def test_a_planted_nonexistent_file_is_marked_and_not_planned(cluster: Cluster, sample_repo: Path,
                                                              tmp_path: Path) -> None:
    findings = {
        "angle": "patterns",
        "relevant_files": [
            {"path": "notes_api/api/middleware.py", "relevance": "high", "rationale": "middleware chain"},
            {"path": "notes_api/api/ghost_limiter.py", "relevance": "high", "rationale": "claimed, does not exist"},
        ],
        "patterns": [{"description": "middleware classes", "search": r"class \w+Middleware"},
                     {"description": "a claimed decorator", "search": r"@rate_limited\b"}],
        "integration_points": [{"file": "notes_api/api/middleware.py", "line": 9999, "description": "wrong line"}],
        "dependencies": [{"source": "notes_api/storage/db.py", "target": "notes_api/api/middleware.py"}],
    }
    provider = write_script(tmp_path / "script.json", replies={"explore:patterns": findings})
    run = cluster.run("lite-plan", CASES["Medium"][0], "--repo", str(sample_repo), "-y", "--provider", provider,
                      "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    exploration = (folder / "exploration-patterns.md").read_text()
    assert "| `notes_api/api/ghost_limiter.py` | high | claimed, does not exist | ⚠️ |" in exploration
    assert "| `notes_api/api/middleware.py` | high | middleware chain | ✅ |" in exploration
    assert "- ✅ middleware classes" in exploration and "- ⚠️ a claimed decorator" in exploration
    assert "- ⚠️ `notes_api/api/middleware.py:9999`" in exploration
    assert "- ⚠️ `notes_api/storage/db.py` → `notes_api/api/middleware.py`" in exploration
    assert "ghost_limiter" not in (folder / "tasks.jsonl").read_text()
    assert "Findings not confirmed in the code" in (folder / "exploration-notes.md").read_text()


@on_the_cluster
def test_no_exploration_when_the_task_does_not_need_code(cluster: Cluster, sample_repo: Path) -> None:
    run = cluster.run("lite-plan", "Write a changelog entry", "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    assert not (folder / "explorations-manifest.json").exists()
    assert "no exploration needed" in run.stderr
    assert json.loads((folder / "requirement-analysis.json").read_text())["exploration_angles"] == []
    forced = cluster.run("lite-plan", "Write a changelog entry", "--repo", str(sample_repo), "-y", "--explore",
                         "--json")
    assert forced.code == 0, forced.stderr
    assert (session_dir(forced) / "explorations-manifest.json").is_file()
    assert session_dir(forced).name.endswith("-2"), "a second session on the same day gets a suffix"


@on_the_cluster
def test_validate_catches_planted_defects_with_line_numbers(cluster: Cluster, sample_repo: Path,
                                                           tmp_path: Path) -> None:
    # The High case plans at least three tasks (a Medium one-file change is only the change and its test).
    run = cluster.run("lite-plan", CASES["High"][0], "--repo", str(sample_repo), "-y", "--json")
    folder = session_dir(run)
    lines = (folder / "tasks.jsonl").read_text().splitlines()
    tasks = [json.loads(line) for line in lines]
    tasks[0]["depends_on"] = [tasks[1]["id"]]
    tasks[1]["depends_on"] = [tasks[0]["id"]]
    tasks[2]["files"][0]["path"] = "notes_api/nowhere.py"
    broken = [json.dumps(t, ensure_ascii=False) for t in tasks] + ['{"id": "TASK-999", "title": ']
    planted = tmp_path / "tasks.jsonl"
    planted.write_text("\n".join(broken) + "\n")
    result = run_cli("validate", str(planted), "--repo", str(sample_repo), "--json")
    assert result.code == 2, result.stdout + result.stderr
    problems = json.loads(result.stdout)["problems"]
    codes = {p["code"]: p for p in problems}
    assert {"dependency_cycle", "missing_file", "invalid_json"} <= set(codes)
    assert codes["invalid_json"]["location"] == f"tasks.jsonl:{len(broken)}"
    assert codes["missing_file"]["location"] == "tasks.jsonl:3"


def test_a_plan_stopped_at_its_question_reads_interrupted_on_a_shared_broker(cluster: Cluster,
                                                                              sample_repo: Path) -> None:
    """On a shared broker (or beside `wfqueue up`) status could not tell a stopped command from a waiting one:
    a plan whose command was Ctrl-C'd at its question read `awaiting acceptance` (a collab plan stopped at its
    split, `planning`) for ever. The command's claim on the session, gone with it, tells."""
    from test_lite_interaction import drive

    clarified = [("clarification round", ""), ("?", ""), ("?", ""), ("?", "")]
    code, transcript = drive(sample_repo, clarified, env=cluster.env, interrupt_at="allow, modify or cancel")
    assert code == 130, transcript
    (folder,) = (sample_repo / ".workflow" / ".lite-plan").iterdir()
    shown = run_cli("status", folder.name, "--repo", str(sample_repo), "--json", env=cluster.env)
    assert shown.json()["status"] == "interrupted", shown.stdout
    assert f"wfqueue resume {folder.name}" in shown.json()["hint"], shown.stdout


def test_an_assessment_the_model_failed_ends_the_plan_failed_and_resume_finishes_it(
        cluster: Cluster, sample_repo: Path, tmp_path: Path) -> None:
    """It escaped as an error: the session was left "planning" (status: interrupted) and `--json` printed nothing."""
    provider = write_script(tmp_path / "script.json", fail={"assess": "the model gave up"})
    quiet = "Write a changelog entry"  # explored only when asked (-e)
    run = cluster.run("lite-plan", quiet, "--repo", str(sample_repo), "-y", "-e", "--provider", provider, "--json")
    assert run.code == 1 and run.json()["status"] == "failed", run.stderr
    assert "the assessment stopped: the model gave up" in run.stderr and "wfqueue resume" in run.stderr
    folder = session_dir(run)
    assert "**Complexity**: not assessed" in (folder / "plan.md").read_text()
    shown = cluster.run("status", folder.name, "--repo", str(sample_repo), "--json")
    assert shown.json()["status"] == "failed", shown.stdout
    write_script(tmp_path / "script.json")  # answers every step now
    resumed = cluster.run("resume", folder.name, "--repo", str(sample_repo), "-y", "--json")
    assert resumed.json()["status"] == "completed" and resumed.json()["tasks"] >= 1, resumed.stderr
    # Assessed as the plan was asked (-e: explore whatever the assessment says), not as a plain one.
    assert resumed.json()["angles"] and (folder / "explorations-manifest.json").is_file(), resumed.stdout
