"""`wfqueue resume`: a coordinator killed mid-plan; the plan is finished without redoing done work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import FOUR_AREAS, kill_processes_mentioning, processes_mentioning, run_cli, wfqueue_env, write_script

from wfqueue.collab.note import parse_note
from wfqueue.collab.note_blocks import note_tasks

pytestmark = pytest.mark.integration


def crash_when(args: list[str], repo: Path, ready) -> None:  # type: ignore[no-untyped-def]
    """Run the CLI and SIGKILL it, its workers and Redis once ``ready()`` holds."""
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", *args], env=wfqueue_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not ready():
        time.sleep(0.2)
    assert ready(), "the plan never reached the point to interrupt"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kill_processes_mentioning(str(repo / ".workflow" / ".queue"))


def test_resume_finishes_a_collab_plan_without_writing_a_section_twice(sample_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    provider = write_script(script, hang={"plan_area:storage": 300})
    planning = sample_repo / ".workflow" / ".planning"

    def three_done() -> bool:
        return len(list(planning.glob("*/agents/*/plan.json"))) == 3 if planning.is_dir() else False

    crash_when(["collab-plan", FOUR_AREAS, "--repo", str(sample_repo), "--max-agents",
                "4", "-y", "--provider", provider], sample_repo, three_done)
    folder = next(planning.iterdir())
    before = {p.parent.name: p.read_text() for p in folder.glob("agents/*/plan.json")}
    assert set(before) == {"api", "auth", "notes-api"}
    write_script(script)  # the storage planner works again
    run = run_cli("resume", folder.name, "--repo", str(sample_repo), "--json")
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed"
    assert "re-running storage" in run.stderr
    after = {p.parent.name: p.read_text() for p in folder.glob("agents/*/plan.json")}
    assert {k: after[k] for k in before} == before, "a finished area was planned again"
    note = parse_note((folder / "plan-note.md").read_text())
    tasks, problems = note_tasks(note)
    assert problems == [] and {t.area for t in tasks} == {"api", "auth", "storage", "notes-api"}
    assert len({t.id for t in tasks}) == len(tasks), "a task appears twice"
    assert note.front_matter["status"] == "completed"
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


def test_resume_finishes_a_lite_plan(sample_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    provider = write_script(script, hang={"explore:testing": 300})
    lite = sample_repo / ".workflow" / ".lite-plan"

    def two_angles() -> bool:
        return len(list(lite.glob("*/exploration-*.md"))) == 2 if lite.is_dir() else False

    # A Medium plan: three angles, so "two explored" is the moment only the hanging one is left.
    crash_when(["lite-plan", "Add request logging middleware to the API", "--repo", str(sample_repo), "-y",
                "--provider", provider], sample_repo, two_angles)
    folder = next(lite.iterdir())
    patterns_before = (folder / "exploration-patterns.md").read_text()
    write_script(script)
    run = run_cli("resume", folder.name, "--repo", str(sample_repo), "--json")
    assert run.code == 0, run.stderr
    assert "re-exploring testing" in run.stderr
    assert (folder / "exploration-patterns.md").read_text() == patterns_before
    manifest = json.loads((folder / "explorations-manifest.json").read_text())
    assert [e["angle"] for e in manifest["explorations"]] == ["patterns", "integration-points", "testing"]
    assert (folder / "tasks.jsonl").is_file() and run.json()["tasks"] >= 2


def test_resume_unknown_session_lists_what_exists(sample_repo: Path) -> None:
    run = run_cli("resume", "CPLAN-nope", "--repo", str(sample_repo))
    assert run.code == 2 and "no session CPLAN-nope" in run.stderr


def test_resume_refuses_a_session_file_that_no_longer_reads_and_makes_lost_tasks_again(sample_repo: Path) -> None:
    """`resume` said "completed", exit 0, for a workflow session whose `.task/` was deleted, whose plan.json
    was gone or whose task file was cut short, and for a lite plan whose tasks.jsonl had a broken line; a
    collaborative plan whose requirement-analysis.json was cut short ended in a traceback."""
    planned = run_cli("plan", "Add caching to note lookups", "--repo", str(sample_repo), "-y", "--json")
    assert planned.code == 0, planned.stderr
    folder = Path(planned.json()["session_dir"])
    lite = run_cli("lite-plan", "Add caching to note lookups", "--repo", str(sample_repo), "-y", "--json")
    assert lite.code == 0, lite.stderr
    lite_dir = Path(lite.json()["session_dir"])

    cut = folder / ".task" / "IMPL-2.json"
    original = cut.read_text(encoding="utf-8")
    cut.write_text(original[: len(original) // 2], encoding="utf-8")
    tasks_jsonl = lite_dir / "tasks.jsonl"
    tasks_jsonl.write_text(tasks_jsonl.read_text(encoding="utf-8").replace("}\n", "},\n", 1), encoding="utf-8")
    before = {p: p.read_bytes() for p in (cut, tasks_jsonl)}
    for session, damaged in ((folder, ".task/IMPL-2.json"), (lite_dir, "tasks.jsonl")):
        refused = run_cli("resume", session.name, "--repo", str(sample_repo), "-y")
        assert refused.code == 2, refused.stderr
        assert f"error: {session.name}: {damaged} is not valid JSON" in refused.stderr, refused.stderr
    assert {p: p.read_bytes() for p in before} == before  # nothing rewritten: it may hold the user's edits

    cut.write_text(original, encoding="utf-8")
    # plan.json alone gone: generating the tasks again would have replaced the task files, with every replan
    # and edit in them (it did, exit 0).
    (folder / "plan.json").unlink()
    kept = {p.name: p.read_bytes() for p in (folder / ".task").iterdir()}
    refused = run_cli("resume", folder.name, "--repo", str(sample_repo), "-y")
    assert refused.code == 2, refused.stderr
    assert "has its task files but no plan.json" in refused.stderr and "wfqueue replan --restore" in refused.stderr
    assert {p.name: p.read_bytes() for p in (folder / ".task").iterdir()} == kept
    for task_file in (folder / ".task").iterdir():
        task_file.unlink()
    # .task a file: the tasks phase failed on the worker (FileExistsError), once Redis and the workers had started.
    (folder / ".task").rmdir()
    (folder / ".task").write_text("", encoding="utf-8")
    for continued in (["resume", folder.name], ["plan", "--session", folder.name]):
        refused = run_cli(*continued, "--repo", str(sample_repo), "-y")
        assert refused.code == 2 and f"{folder.name}: .task is not a folder" in refused.stderr, refused.stderr
    (folder / ".task").unlink()
    again = run_cli("resume", folder.name, "--repo", str(sample_repo), "-y", "--json")
    assert again.code == 0, again.stderr
    assert "has lost its task files: generating its tasks again" in again.stderr
    assert again.json()["tasks"] == planned.json()["tasks"] and (folder / "plan.json").is_file()
    assert run_cli("validate", str(folder / ".task")).code == 0
