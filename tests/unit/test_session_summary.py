"""`wfqueue status SESSION` for lite-plan and workflow sessions: read from their files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.wfs_factory import make_session, task
from wfqueue.cli.main import main
from wfqueue.collab.finalize import finalize_session
from wfqueue.collab.steps import NOTE_FILE, run_area, run_understanding
from wfqueue.keys import AgentState, SessionKind, SessionStatus
from wfqueue.lite.synthesis import manifest
from wfqueue.memory_state import MemorySessionState
from wfqueue.providers import make_provider
from wfqueue.session_summary import read_lite_session, read_workflow_session
from wfqueue.settings import Settings
from wfqueue.workflow.registry import shown_ids
from wfqueue.workflow_session.session import task_files

LITE_ID = "add-rate-limiting-2026-11-22"


def lite_session(repo: Path, failed: dict[str, str] | None = None, planned: bool = True) -> Path:
    folder = repo / ".workflow" / ".lite-plan" / LITE_ID
    folder.mkdir(parents=True)
    manifest = {"session_id": LITE_ID, "explorations": [
        {"angle": "architecture", "file": "exploration-architecture.md", "verified": 12, "unverified": 1},
        {"angle": "dependencies", "file": "exploration-dependencies.md", "verified": 7, "unverified": 0}],
        "failed_angles": [{"angle": a, "error": e} for a, e in sorted((failed or {}).items())]}
    (folder / "explorations-manifest.json").write_text(json.dumps(manifest))
    if planned:
        lines = [json.dumps({"id": f"TASK-00{n}", "title": f"step {n}"}) for n in (1, 2, 3)]
        (folder / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_a_lite_session_shows_its_angles_tasks_and_status(tmp_path: Path) -> None:
    summary = read_lite_session(lite_session(tmp_path, failed={"patterns": "timed out"}))
    assert (summary.kind, summary.status, summary.tasks) == ("lite", "partial", 3)
    assert [(s.name, s.state) for s in summary.steps] == [
        ("architecture", "done"), ("dependencies", "done"), ("patterns", "failed")]
    assert summary.steps[0].detail == "12 verified, 1 not" and summary.steps[2].detail == "timed out"
    assert read_lite_session(lite_session(tmp_path / "b", planned=False)).status == "planning"
    stopped = lite_session(tmp_path / "c", planned=False)
    (stopped / "plan.md").write_text("# plan\n\n**Status**: failed: no tasks were planned\n")
    assert read_lite_session(stopped).status == "failed"  # ended before any task: not still planning


def test_a_manifest_written_by_the_synthesis_reads_back(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    written = manifest("s", "req", "2026-11-23T00:00:00+00:00", "Medium", [], str(folder), {"patterns": "timed out"})
    (folder / "explorations-manifest.json").write_text(json.dumps(written))
    assert [(s.name, s.state, s.detail) for s in read_lite_session(folder).steps] == [
        ("patterns", "failed", "timed out")]


def test_a_workflow_session_shows_its_phases_and_tasks(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Add per-user rate limiting", [task(1, "limits", ["a.py"]),
                                                                   task(2, "wire in", ["b.py"], [1])])
    summary = read_workflow_session(folder)
    assert (summary.kind, summary.session_id, summary.tasks) == ("workflow", "WFS-test-session", 2)
    assert {s.name for s in summary.steps} >= {"session", "context", "tasks"}
    (folder / "workflow-session.json").write_text("{not json")
    assert read_workflow_session(folder).status == "unreadable"


def test_status_finds_every_kind_of_session_and_lists_them_all_when_one_is_missing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lite_session(tmp_path)
    make_session(tmp_path, "Add per-user rate limiting", [task(1, "limits", ["a.py"])])
    assert main(["status", LITE_ID, "--repo", str(tmp_path), "--json"]) in (0, None)
    shown = json.loads(capsys.readouterr().out)
    assert (shown["kind"], shown["status"], shown["tasks"]) == ("lite", "completed", 3)
    assert main(["status", "WFS-test-session", "--repo", str(tmp_path)]) in (0, None)
    out = capsys.readouterr().out
    assert "WFS-test-session (workflow)" in out and "1 tasks" in out
    assert main(["status", "CPLAN-nope", "--repo", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no session CPLAN-nope" in err and LITE_ID in err and "WFS-test-session" in err


def test_a_stray_file_beside_the_task_files_is_no_task(tmp_path: Path) -> None:
    """A file manager's `IMPL-1 copy.json` is not a task: it is not counted, and `plan --session` does not fail
    sorting it (it raised ValueError on `int('1 copy')`)."""
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"]),
                                                         task(2, "Limiter", ["src/limiter.py"], [1])])
    (folder / ".task" / "IMPL-1 copy.json").write_text((folder / ".task" / "IMPL-1.json").read_text())
    (folder / ".task" / "IMPL-10.json").write_text((folder / ".task" / "IMPL-2.json").read_text()
                                                   .replace('"IMPL-2"', '"IMPL-10"'))
    assert [p.name for p in task_files(folder)] == ["IMPL-1.json", "IMPL-2.json", "IMPL-10.json"]
    assert read_workflow_session(folder).tasks == 3


def test_validate_verify_and_execute_name_the_stray_copy_not_the_task_it_copies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They blamed IMPL-1.json for a duplicate id "first used at IMPL-1 copy.json", and verify counted the copy
    as a task missing from every document."""
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"]),
                                                         task(2, "Limiter", ["src/limiter.py"], [1])])
    (tmp_path / "src").mkdir()
    for name in ("config.py", "limiter.py"):
        (tmp_path / "src" / name).write_text("", encoding="utf-8")
    (folder / ".task" / "IMPL-1 copy.json").write_text((folder / ".task" / "IMPL-1.json").read_text())
    said = ".task/IMPL-1 copy.json: holds task IMPL-1, whose own file is .task/IMPL-1.json: a copy? move it out " \
           "of .task/"
    assert main(["validate", str(folder / ".task")]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert said.replace(".json: holds", ".json IMPL-1 holds") in out and "1 problem in 2 tasks" in out, out
    assert main(["execute", folder.name, "--repo", str(tmp_path), "--dry-run"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert said in err and "duplicate" not in err, err
    assert main(["verify", "--session", folder.name, "--repo", str(tmp_path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    consistency = [(f["severity"], f["location"]) for f in report["findings"] if f["dimension"] == "C"]
    assert consistency == [("CRITICAL", [".task/IMPL-1 copy.json"])], report["findings"]


@pytest.mark.parametrize("damage", [b"{not json", b"[]", b'{"session_id": 3}', b"\xff\xfe"])
def test_plan_and_resume_of_a_damaged_session_record_name_the_file(tmp_path: Path, damage: bytes,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text("LIMIT = 10\n")  # code to plan against: the record is at fault
    (folder / "workflow-session.json").write_bytes(damage)
    # status said "unreadable, 0 tasks" with an empty phase table, exit 0
    for args in (["plan", "--session", folder.name, "-y"], ["resume", folder.name], ["status", folder.name]):
        assert main([*args, "--repo", str(tmp_path)]) == 2
        err = " ".join(capsys.readouterr().err.split())
        if args[0] == "resume" and damage in (b"{not json", b"\xff\xfe"):  # resume reads every file first
            assert f"{folder.name}: workflow-session.json is not valid JSON" in err, err
        else:
            assert f"{folder / 'workflow-session.json'} is not a valid session record" in err, err
        if damage == b'{"session_id": 3}':  # which field, and what is wrong ("1 validation error for ..." said neither)
            assert "is not a valid session record: session_id: Input should be a valid string" in err, err
        assert not (tmp_path / ".workflow" / ".queue").exists(), "a Redis was started for a session it refuses"
        assert "backup" not in err  # a session never replanned has none


def test_plan_with_a_new_requirement_and_an_existing_session_is_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`plan "new text" --session WFS-x` continued WFS-x's own plan and dropped the new text without a word."""
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text("LIMIT = 10\n")
    before = (folder / "workflow-session.json").read_bytes()
    assert main(["plan", "Add audit logging", "--session", folder.name, "--repo", str(tmp_path), "-y"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--session {folder.name} continues that session's plan of its own requirement" in err, err
    assert (folder / "workflow-session.json").read_bytes() == before


def test_a_phase_left_running_by_a_killed_command_shows_as_interrupted(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A command killed outright cannot mark its phase: with no command holding the repository's Redis, `status`
    says it was interrupted and how to finish it, instead of `running` forever."""
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    record = json.loads((folder / "workflow-session.json").read_text())
    record["phases"]["tasks"] = "running"
    (folder / "workflow-session.json").write_text(json.dumps(record))
    assert main(["status", folder.name, "--repo", str(tmp_path), "--json"]) in (0, None)
    steps = {s["name"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["tasks"]["state"] == "interrupted"
    assert f"wfqueue resume {folder.name}" in steps["tasks"]["detail"]


def test_status_of_a_lite_plan_whose_tasks_file_an_editor_saved_in_another_encoding(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = lite_session(tmp_path)
    (folder / "tasks.jsonl").write_bytes("{\"id\": \"TASK-001\"}\n".encode("utf-16"))  # was a UnicodeDecodeError
    assert main(["status", LITE_ID, "--repo", str(tmp_path), "--json"]) in (0, None)
    assert json.loads(capsys.readouterr().out)["session_id"] == LITE_ID


@pytest.mark.parametrize("damage", [b'{"explorations": [', b"[]", b'{"explorations": null}', b'{"explorations": [1]}'])
def test_status_of_a_lite_plan_with_a_damaged_manifest_names_it_or_shows_what_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: bytes) -> None:
    """A manifest cut short or not an object was a JSONDecodeError or AttributeError traceback (exit 1); one whose
    lists hold something else, too."""
    folder = lite_session(tmp_path)
    (folder / "explorations-manifest.json").write_bytes(damage)
    code = main(["status", LITE_ID, "--repo", str(tmp_path)])
    out, err = capsys.readouterr()
    if damage.startswith(b"{\"explorations\": ") and damage.endswith(b"}"):  # an object: what reads is shown
        assert code in (0, None) and LITE_ID in out, err
    else:
        assert code == 2 and "explorations-manifest.json does not read as an exploration manifest" in " ".join(
            err.split()), err


def test_the_angles_a_lite_plan_explored_before_it_stopped_are_shown(tmp_path: Path) -> None:
    """Stopped after its angles, before the synthesis that writes the manifest: status showed no angle at all,
    while their files were there (and `resume` said every angle was explored)."""
    folder = lite_session(tmp_path, planned=False)
    (folder / "explorations-manifest.json").unlink()
    for angle in ("architecture", "security"):
        (folder / f"exploration-{angle}.md").write_text(f"# {angle}\n")
    (folder / "exploration-notes.md").write_text("# notes\n")
    assert [(s.name, s.state) for s in read_lite_session(folder).steps] == [
        ("architecture", "done"), ("security", "done")]


def test_a_plan_note_with_a_byte_that_is_not_utf8_does_not_stop_the_listing(
        sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One hand edit saved in Latin-1 made `wfqueue status` a UnicodeDecodeError for every plan of the repository."""
    for name in ("CPLAN-one-2026-11-27", "CPLAN-two-2026-11-27"):  # planned in process, as the workers do
        folder = sample_repo / ".workflow" / ".planning" / name
        state = MemorySessionState(name)
        state.set_meta(kind=SessionKind.COLLAB, repo=str(sample_repo), session_dir=str(folder),
                       status=SessionStatus.PLANNING)
        provider = make_provider("offline", Settings())
        analysis = run_understanding(state, provider, folder, str(sample_repo), "Add per-user rate limiting", 2)
        for sub in analysis.sub_domains:
            run_area(state, provider, Settings(), folder, str(sample_repo), sub.focus_area, "worker-1")
            state.set_agent(sub.focus_area, state=AgentState.DONE)
        finalize_session(state, Settings(), folder)
    with (sample_repo / ".workflow" / ".planning" / "CPLAN-one-2026-11-27" / NOTE_FILE).open("ab") as note:
        note.write(b"\nNotes by caf\xe9\n")
    assert main(["status", "--repo", str(sample_repo), "--json"]) in (0, None)
    listed = json.loads(capsys.readouterr().out)
    assert [(row["session_id"], row["status"]) for row in listed] == [
        ("CPLAN-one-2026-11-27", "completed"), ("CPLAN-two-2026-11-27", "completed")]


def test_the_listing_asks_a_broker_that_does_not_answer_once_not_once_per_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """With a shared broker away, `wfqueue status` warned once, then asked it again for every plan under way
    whether its command still ran: each ask waits its connection timeout, so a silent broker held the listing
    that long per row. Those plans now show what their files say."""
    import wfqueue.cli.status as status_cli

    for name in ("CPLAN-one-2026-11-27", "CPLAN-two-2026-11-27", "CPLAN-three-2026-11-27"):
        (tmp_path / ".workflow" / ".planning" / name).mkdir(parents=True)  # understanding: under way, by its files
    asked: list[str] = []
    monkeypatch.setattr(status_cli, "coordinator_gone", lambda settings, session_id: asked.append(session_id))
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    assert main(["status", "--repo", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("warning: ") == 1 and "what the session files say" in captured.err, captured.err
    assert asked == []
    assert all(name in captured.out for name in ("CPLAN-one", "CPLAN-two", "CPLAN-three")), captured.out


def test_a_mistyped_id_is_answered_with_the_sessions_closest_to_it_and_how_many_are_left_out() -> None:
    """The hint named the last twelve ids in name order and said nothing of the others: a typo in the date of
    one of twenty plans of the same words left the one it meant out."""
    known = sorted([f"CPLAN-add-note-labels-2026-11-{day:02d}" for day in range(1, 21)] +
                   [f"CPLAN-zz-other-{n}" for n in range(3)])
    hint = shown_ids(known, "CPLAN-add-note-labels-2026-11-03x")
    shown = hint.split(" (and ")[0].split(", ")
    assert shown[0] == "CPLAN-add-note-labels-2026-11-03" and len(shown) == 12
    assert hint.endswith("(and 11 more: `wfqueue status` lists them)")
    assert shown_ids(known[:2], "nothing-like-it") == ", ".join(reversed(known[:2]))  # last in name order first
    assert shown_ids([], "x") == "none"


def test_a_retried_agent_is_judged_by_its_new_start_not_its_last_attempts_beat() -> None:
    """A retry re-sets started_at and leaves the earlier attempt's alive_at: it read silent until its first beat."""
    from wfqueue.liveness import silent_for

    now = 10_000.0
    retried = {"state": "running", "started_at": now - 2, "alive_at": now - 600, "beat_every_s": 30}
    assert silent_for(retried, now) is None
    gone = {"state": "running", "started_at": now - 700, "alive_at": now - 600, "beat_every_s": 30}
    assert silent_for(gone, now) == 600.0


def test_a_commands_progress_notes_an_agent_whose_worker_went_silent_once() -> None:
    """The command waiting on a task whose worker died printed nothing more for the hour before redelivery."""
    from wfqueue.liveness import SILENT_NOTE, marked_silent

    now = 10_000.0
    agents = {"alive": {"state": "running", "started_at": now - 100, "alive_at": now - 5, "beat_every_s": 30},
              "gone": {"state": "running", "started_at": now - 700, "alive_at": now - 600, "beat_every_s": 30,
                       "note": "reading files"},
              "done": {"state": "done", "started_at": now - 700, "alive_at": now - 600, "beat_every_s": 30}}
    marked = marked_silent(agents, now)
    assert marked["gone"]["note"] == SILENT_NOTE and agents["gone"]["note"] == "reading files"
    assert marked["alive"] == agents["alive"] and marked["done"] == agents["done"]
    assert marked_silent(agents, now + 60)["gone"]["note"] == SILENT_NOTE  # the same note: one progress line


def test_the_listing_asks_git_once_and_names_the_newest_of_many_sessions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With a thousand sessions, `wfqueue status` ran git once per collaborative plan (for the `--repo` of its
    resume hint: 13 s) and printed every other session's id on one line (300 KB)."""
    import os

    from wfqueue import sessions

    asked: list[None] = []
    real_top = sessions._git_top
    monkeypatch.setattr(sessions, "_git_top", lambda: asked.append(None) or real_top())
    for n in range(4):
        (tmp_path / ".workflow" / ".planning" / f"CPLAN-x{n}-2026-11-22").mkdir(parents=True)
    lite = tmp_path / ".workflow" / ".lite-plan"
    lite.mkdir(parents=True)
    for n in range(30):
        (lite / f"step-{n:02d}-2026-11-22").mkdir()
        (lite / f"step-{n:02d}-2026-11-22" / "explorations-manifest.json").write_text("{}")
        os.utime(lite / f"step-{n:02d}-2026-11-22", (1_000_000 + (30 - n), 1_000_000 + (30 - n)))  # 00 newest
    assert main(["status", "--repo", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert len(asked) == 1
    assert "lite-plan sessions (30), the 20 last changed: step-19-2026-11-22, " in out, out
    assert "step-00-2026-11-22; all are in" in out and "step-20-" not in out
