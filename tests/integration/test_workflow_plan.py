"""wfqueue plan / verify / replan end to end on real workers."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import (
    kill_processes_mentioning,
    processes_mentioning,
    run_cli,
    run_cli_in_process,
    session_dir,
    wait_until,
    wfqueue_env,
    write_script,
)

from wfqueue.tasks_file import load_task_dir

pytestmark = pytest.mark.integration
RISKY = "Refactor the storage layer and authentication into a modular architecture"
QUIET = "Fix the token expiry check in notes_api/auth/tokens.py"
SECTIONS = ["## 1. Summary", "## 2. Context Analysis", "## 3. Brainstorming Artifacts", "## 4. Implementation Strategy",
            "## 5. Task Breakdown", "## 6. Phased Plan", "## 7. Risks", "## 8. Success Criteria"]


def folder_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_plan_y_writes_every_artifact(sample_repo: Path) -> None:
    run = run_cli("plan", RISKY, "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    payload = run.json()
    folder = session_dir(run)
    assert folder.parent == sample_repo / ".workflow" / "active" and folder.name.startswith("WFS-refactor-the-storage")
    session = json.loads((folder / "workflow-session.json").read_text())
    assert session["status"] == "active" and session["type"] == "workflow"
    assert session["phases"] == {"session": "done", "context": "done", "conflicts": "done", "tasks": "done"}
    assert session["structured"]["goal"] == RISKY
    process = folder / ".process"
    context = json.loads((process / "context-package.json").read_text())
    assert context["conflict_detection"]["risk_level"] == "resolved"
    assert context["conflict_detection"]["risk_factors"]["architecture_changes"] is True
    for key in ("metadata", "project_context", "assets", "dependencies", "exploration_results", "prioritized_context"):
        assert key in context
    resolution = json.loads((process / "conflict-resolution.json").read_text())
    assert resolution["summary"]["total_conflicts"] == payload["conflicts"] >= 1
    assert all(r["conflict_id"].startswith("CON-") for r in resolution["resolved_conflicts"])
    manifest = json.loads((process / "explorations-manifest.json").read_text())
    for entry in manifest["explorations"]:
        assert (process / f"exploration-{entry['angle']}.json").is_file()
    loaded, problems = load_task_dir(folder / ".task")
    assert problems == [] and 1 <= len(loaded) <= 10
    ids = [t.task.id for t in loaded]
    plan = json.loads((folder / "plan.json").read_text())
    assert sorted(plan["task_ids"]) == sorted(ids) and plan["task_count"] == len(ids) == payload["tasks"]
    assert plan["_metadata"]["source"] == "wfqueue-workflow"
    impl = (folder / "IMPL_PLAN.md").read_text()
    assert impl.startswith("---\nsession_id: " + folder.name)
    positions = [impl.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    todo = (folder / "TODO_LIST.md").read_text()
    assert todo.startswith("# Tasks: ") and "## Task Progress" in todo
    for task_id in ids:
        assert f"- [ ] **{task_id}**: " in todo and f"(./.task/{task_id}.json)" in todo
    notes = (folder / "planning-notes.md").read_text()
    for heading in ("## User Intent", "## Context Findings", "## Conflict Decisions", "## Consolidated Constraints",
                    "## Task Generation", "## N+1 Context"):
        assert heading in notes
    assert "CON-001" in notes
    assert (process / "PLAN_VERIFICATION.md").is_file() and (process / "verification-findings.json").is_file()
    constraints = resolution["planning_constraints"]
    assert all(any(c in t.task.description for c in constraints) for t in loaded)
    validate = run_cli("validate", str(folder / ".task"), "--repo", str(sample_repo))
    assert validate.code == 0, validate.stdout
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


def test_low_risk_skips_conflict_resolution(sample_repo: Path) -> None:
    run = run_cli("plan", QUIET, "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    session = json.loads((folder / "workflow-session.json").read_text())
    assert session["phases"]["conflicts"] == "skipped"
    assert not (folder / ".process" / "conflict-resolution.json").exists()
    assert json.loads((folder / ".process" / "context-package.json").read_text())["conflict_detection"][
        "risk_level"] in ("none", "low")
    second = run_cli("plan", QUIET, "--repo", str(sample_repo), "-y", "--json")
    assert session_dir(second).name == folder.name + "-2"


def test_interrupted_plan_continues_without_redoing_finished_phases(sample_repo: Path, tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", hang={"explore:validation": 120})
    proc = subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", "plan", "Build JWT auth with refresh tokens", "--repo",
         str(sample_repo), "-y", "--provider", provider],
        env=wfqueue_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    active = sample_repo / ".workflow" / "active"
    deadline = time.monotonic() + 90
    folder = None
    while time.monotonic() < deadline:
        found = list(active.glob("WFS-*/.process/exploration-security.md")) if active.is_dir() else []
        if found:
            folder = found[0].parent.parent
            break
        time.sleep(0.2)
    assert folder is not None, "phase 2 never started"
    # The coordinator, the worker node and Redis all die at once, as on a crashed laptop.
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kill_processes_mentioning(str(sample_repo / ".workflow" / ".queue"))
    before = json.loads((folder / "workflow-session.json").read_text())
    assert before["phases"]["session"] == "done" and before["phases"]["context"] == "running"
    security_before = (folder / ".process" / "exploration-security.md").read_text()
    notes_before = (folder / "planning-notes.md").read_text().split("## Context Findings")[0]
    run = run_cli("plan", "--session", folder.name, "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    assert "continuing " + folder.name + " at phase context" in run.stderr
    after = json.loads((folder / "workflow-session.json").read_text())
    assert after["phases"]["context"] == "done" and after["phases"]["tasks"] == "done"
    assert after["phases_done_at"]["session"] == before["phases_done_at"]["session"]
    assert after["created_at"] == before["created_at"]
    assert (folder / ".process" / "exploration-security.md").read_text() == security_before, "a finished angle re-ran"
    assert (folder / "planning-notes.md").read_text().startswith(notes_before)
    assert (folder / ".process" / "exploration-validation.json").is_file()
    assert len(list((folder / ".task").glob("IMPL-*.json"))) == run.json()["tasks"] >= 1


def test_a_phase_stopped_by_ctrl_c_reads_interrupted_not_failed_and_resume_runs_it(sample_repo: Path,
                                                                                  tmp_path: Path) -> None:
    """Ctrl-C (SIGTERM, SIGHUP too) in a phase wrote it "failed" with no detail, which `status` showed, and which
    README keeps for a phase its budget stopped. It stays running in the file: interrupted, and the resume runs
    it."""
    release = tmp_path / "release"
    provider = write_script(tmp_path / "script.json", hold={"explore:validation": str(release)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", "plan", "Build JWT auth with refresh tokens", "--repo",
         str(sample_repo), "-y", "--provider", provider],
        env=wfqueue_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(Path(f"{release}.explore:validation.held").exists, 90, "the validation angle under way")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        release.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    (folder,) = (sample_repo / ".workflow" / "active").glob("WFS-*")
    assert json.loads((folder / "workflow-session.json").read_text())["phases"]["context"] == "running"
    status = run_cli("status", folder.name, "--repo", str(sample_repo), "--json")
    steps = {step["name"]: step["state"] for step in status.json()["steps"]}
    assert steps["context"] == "interrupted" and "failed" not in steps.values(), status.stdout
    run = run_cli("resume", folder.name, "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    assert json.loads((folder / "workflow-session.json").read_text())["phases"]["context"] == "done"


def test_verify_reports_a_planted_cycle_and_missing_sessions(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             sample_repo: Path) -> None:
    """verify reads files only: the planted cycle goes through a CLI process, the other checks through the same
    entry point in-process."""
    run = run_cli("plan", QUIET, "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    clean = run_cli_in_process(capsys, monkeypatch, "verify", "--repo", str(sample_repo), "--json")
    assert clean.code == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout)["quality_gate"] in ("PROCEED", "PROCEED_WITH_CAUTION")
    tasks = sorted((folder / ".task").glob("IMPL-*.json"))
    assert len(tasks) >= 2
    first, second = (json.loads(p.read_text()) for p in tasks[:2])
    first["depends_on"], second["depends_on"] = [second["id"]], [first["id"]]
    tasks[0].write_text(json.dumps(first))
    tasks[1].write_text(json.dumps(second))
    before = folder_digest(folder)
    planted = run_cli("verify", "--session", folder.name, "--repo", str(sample_repo), "--json")
    assert planted.code == 1, planted.stdout + planted.stderr
    report = json.loads(planted.stdout)
    assert report["quality_gate"] == "PROCEED_WITH_FIXES"
    assert any(f["dimension"] == "D" and f["severity"] == "HIGH" and "cycle" in f["summary"].lower()
               for f in report["findings"])
    after = folder_digest(folder)
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed <= {".process/PLAN_VERIFICATION.md", ".process/verification-findings.json"}, "verify wrote elsewhere"
    missing = run_cli_in_process(capsys, monkeypatch, "verify", "--session", "WFS-nope", "--repo", str(sample_repo))
    assert missing.code == 2 and folder.name in missing.stderr
    # `plan -y` verifies too: the same gate gives the same exit code, so `plan -y && wfqueue execute` stops here.
    again = run_cli("plan", "--session", folder.name, "--repo", str(sample_repo), "-y")
    assert again.code == 1, again.stdout + again.stderr
    assert "gate PROCEED_WITH_FIXES" in again.stdout and "next:    Fix the HIGH findings first" in again.stdout


def test_replan_add_refuse_restore_on_a_real_plan(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                   sample_repo: Path) -> None:
    """replan edits files only: the added task goes through a CLI process, the refusal, the restore and the
    unknown task through the same entry point in-process."""
    run = run_cli("plan", QUIET, "--repo", str(sample_repo), "-y", "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    original = folder_digest(folder)
    count = run.json()["tasks"]
    added = run_cli("replan", "add a task for documenting the token expiry rules in README.md", "--repo",
                    str(sample_repo), "-y", "--json")
    assert added.code == 0, added.stdout + added.stderr
    summary = json.loads(added.stdout)
    new_id = f"IMPL-{count + 1}"
    assert summary["added"] == [new_id]
    backup = Path(summary["backup"])
    assert (backup / "MANIFEST.md").is_file()
    assert (folder / ".task" / f"{new_id}.json").is_file()
    assert f"**{new_id}**" in (folder / "TODO_LIST.md").read_text()
    session = json.loads((folder / "workflow-session.json").read_text())
    assert session["replan_history"][-1]["added"] == [new_id] and new_id in session["progress"]["current_tasks"]
    before_refusal = folder_digest(folder)
    many = "; ".join(f"add a task for extra step {n}" for n in range(10 - count))
    refused = run_cli_in_process(capsys, monkeypatch, "replan", many, "--repo", str(sample_repo), "-y")
    assert refused.code != 0 and "10" in refused.stdout + refused.stderr
    assert folder_digest(folder) == before_refusal, "a refused replan changed files"
    restored = run_cli_in_process(capsys, monkeypatch, "replan", "--restore", str(backup), "--repo", str(sample_repo))
    assert restored.code == 0, restored.stdout + restored.stderr
    after = folder_digest(folder)
    assert {k: v for k, v in after.items() if not k.startswith(".process/backup/") and not k.endswith(".lock")} == \
        {k: v for k, v in original.items() if not k.endswith(".lock")}
    missing_task = run_cli_in_process(capsys, monkeypatch, "replan", "IMPL-99", "rename to nothing", "--repo",
                                      str(sample_repo), "-y")
    assert missing_task.code == 2 and "IMPL-1" in missing_task.stdout + missing_task.stderr


def test_resume_finishes_a_session_with_the_provider_it_was_planned_with(sample_repo: Path, tmp_path: Path) -> None:
    """`resume --help`: --provider is "used only if the session did not record one". A session planned with one
    provider must not be finished by another (an offline plan by a paid model, or the reverse) unasked."""
    script = tmp_path / "script.json"
    provider = write_script(script, fail={"generate_tasks": "the model gave up"})
    first = run_cli("plan", QUIET, "--repo", str(sample_repo), "-y", "--provider", provider, "--json")
    assert first.code == 1 and "the model gave up" in first.stderr, first.stderr
    (folder,) = (sample_repo / ".workflow" / "active").iterdir()
    assert f"`wfqueue resume {folder.name} --repo {sample_repo}` goes on at the tasks phase" in first.stderr
    # The one JSON object `--json` promises (stdout was empty), and a session that says failed, not "planning"
    # (which `status` showed as a stopped command, and `sessions` as still planning).
    assert first.json()["status"] == "failed" and first.json()["session_id"] == folder.name, first.stdout
    recorded = json.loads((folder / "workflow-session.json").read_text())
    assert recorded["provider"] == provider and recorded["status"] == "failed"
    shown = run_cli("status", folder.name, "--repo", str(sample_repo), "--json").json()
    assert shown["status"] == "failed" and "goes on where it stopped" in shown["hint"], shown
    shutil.rmtree(sample_repo / ".workflow" / ".queue")  # Redis's record of it gone (expired, purged): the file says
    # An assessment or an exploration asked again would fail: the resume must not pay for them twice.
    angles = [p.stem.removeprefix("exploration-") for p in (folder / ".process").glob("exploration-*.json")]
    assert angles, "the first run explored nothing"
    write_script(script, fail={"generate_tasks": "the model gave up", "assess": "the assessment was paid twice",
                               **{f"explore:{a}": "an exploration was paid twice" for a in angles}})
    again = run_cli("resume", folder.name, "--repo", str(sample_repo), "--json")
    assert again.code == 1 and "the model gave up" in again.stderr, again.stderr  # the scripted provider again
    # Task generation reads the context from Redis: gone, it is put back from the session's files (it was a
    # ValidationError, then a second paid gathering).
    assert "no longer in Redis: put back from .process/" in again.stderr and "paid twice" not in again.stderr
    for name in (".process/assessment.json", ".process/context-package.json"):
        assert (folder / name).is_file(), name
    (folder / ".process" / "assessment.json").unlink()  # a session gathered before that file was kept
    shutil.rmtree(sample_repo / ".workflow" / ".queue")
    write_script(script, fail={"generate_tasks": "the model gave up"})
    again = run_cli("resume", folder.name, "--repo", str(sample_repo), "--json")
    assert again.code == 1 and "no longer in Redis: gathering it again" in again.stderr, again.stderr
    # A provider that keeps failing does not lock the session in: --provider chooses another.
    done = run_cli("resume", folder.name, "--repo", str(sample_repo), "--provider", "offline", "-y", "--json")
    assert done.json()["status"] == "completed" and done.json()["tasks"] >= 1
    # -y verified it, as `plan -y` does (it said gate null, exit 0, and `verify` then exited 1), with its exit code.
    gate = done.json()["gate"]
    assert gate is not None and "verification: " in done.stderr, done.stderr
    assert done.code == (0 if gate in ("PROCEED", "PROCEED_WITH_CAUTION") else 1), done.stderr


def test_a_plan_with_a_failed_angle_stays_partial_when_resumed(sample_repo: Path, tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", fail={"explore:architecture": "the angle gave up"})
    first = run_cli("plan", RISKY, "--repo", str(sample_repo), "-y", "--provider", provider, "--json")
    assert first.code == 1 and first.json()["status"] == "partial", first.stderr
    again = run_cli("resume", session_dir(first).name, "--repo", str(sample_repo), "--json")
    assert again.code == 1, again.stderr  # it said "completed", exit 0, with the angle never explored
    assert again.json()["status"] == "partial"
    shown = run_cli("resume", session_dir(first).name, "--repo", str(sample_repo))
    assert "skipped angle: architecture: the angle gave up" in shown.stdout, shown.stdout
    # What a resume does about it (the angle's own reason says to run the plan again, which sent the user round).
    said = " ".join(shown.stdout.split())
    # With --repo: run as printed from where the command ran, it said "no session".
    assert f"`wfqueue resume {session_dir(first).name} --repo {sample_repo}` explores it again and makes the plan " \
        "again" in said, said
    status = run_cli("status", session_dir(first).name, "--repo", str(sample_repo), "--json")
    context = next(s for s in status.json()["steps"] if s["name"] == "context")
    assert "angle architecture failed: the angle gave up" in context["detail"]


def test_a_resume_explores_a_failed_angle_again_and_plans_with_it(sample_repo: Path, tmp_path: Path) -> None:
    """Its resume answered the same partial plan, with no call, however well the API was again: the session could
    not be finished, and its hint sent the user round to that resume."""
    failing = write_script(tmp_path / "failing.json", fail={"explore:architecture": "the angle gave up"})
    first = run_cli("plan", RISKY, "--repo", str(sample_repo), "-y", "--provider", failing, "--json")
    assert first.code == 1 and first.json()["status"] == "partial", first.stderr
    folder = session_dir(first)
    healthy = write_script(tmp_path / "healthy.json")
    done = run_cli("resume", folder.name, "--repo", str(sample_repo), "--provider", healthy, "--json")
    assert done.code == 0, done.stderr
    assert done.json()["status"] == "completed" and done.json()["failed_angles"] == {}, done.stdout
    assert "exploring architecture again" in done.stderr
    manifest = json.loads((folder / ".process" / "explorations-manifest.json").read_text(encoding="utf-8"))
    assert not manifest.get("failed_angles") and "architecture" in {e["angle"] for e in manifest["explorations"]}
    assert list((folder / ".task").glob("IMPL-*.json"))


def test_a_replanned_partial_session_is_not_planned_again(sample_repo: Path, tmp_path: Path) -> None:
    """Planning it again would replace the task files a replan (or a hand edit) changed."""
    failing = write_script(tmp_path / "failing.json", fail={"explore:architecture": "the angle gave up"})
    first = run_cli("plan", RISKY, "--repo", str(sample_repo), "-y", "--provider", failing, "--json")
    folder = session_dir(first)
    (folder / ".process" / "backup" / "replan-2026-11-27T07-00-00Z").mkdir(parents=True)  # a replan was made
    before = {p.name: p.read_bytes() for p in (folder / ".task").glob("*.json")}
    kept = run_cli("resume", folder.name, "--repo", str(sample_repo), "--provider", write_script(
        tmp_path / "healthy.json"))
    assert kept.code == 1, kept.stderr
    said = " ".join(kept.stdout.split())
    assert "it is not planned again: it was replanned since. Plan the requirement again" in said, said
    assert {p.name: p.read_bytes() for p in (folder / ".task").glob("*.json")} == before


def test_continuing_a_finished_session_keeps_its_status(sample_repo: Path) -> None:
    """An executed session is `completed` (and archived after a while): `plan --session` set it back to active."""
    first = run_cli("plan", QUIET, "--repo", str(sample_repo), "-y", "--json")
    assert first.code == 0, first.stderr
    record = session_dir(first) / "workflow-session.json"
    data = json.loads(record.read_text())
    data["status"] = "completed"
    record.write_text(json.dumps(data))
    again = run_cli("plan", "--session", session_dir(first).name, "--repo", str(sample_repo), "-y", "--json")
    assert again.code == 0, again.stderr
    assert json.loads(record.read_text())["status"] == "completed"
