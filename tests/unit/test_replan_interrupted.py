"""A replan or a restore stopped half-way: the session is never left half-written without a way back.

The session's record (with its replan history) is written last, so a replan killed half-way is not in the history
it is undone by; a mark in .process/ names its backup until the replan is checked or rolled back."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.replan_support import cli, read, three_tasks, tree
from wfqueue.cli.main import main
from wfqueue.errors import InfrastructureError
from wfqueue.fsio import atomic_write_text
from wfqueue.workflow_session.replan import backup as backup_module
from wfqueue.workflow_session.replan.apply import run_replan, validate_session
from wfqueue.workflow_session.replan.select import Decision, Question


class Quiet:
    """A replan's user interface that says nothing and confirms (the CLI's -y)."""

    def info(self, message: str) -> None: ...

    def ask(self, question: Question) -> list[str]:
        return []

    def ask_text(self, prompt: str) -> str:
        return ""

    def show_impact(self, text: str) -> None: ...

    def confirm(self, text: str) -> Decision:
        return "confirm"


KILLED_AFTER_FIRST_TASK_FILE = """
import os, sys
from pathlib import Path
from wfqueue.fsio import atomic_write_text
from wfqueue.workflow_session.replan.apply import run_replan

class Quiet:
    def info(self, message): pass
    def show_impact(self, text): pass
    def confirm(self, text): return "confirm"

def write(path, text):
    atomic_write_text(path, text)
    if path.parent.name == ".task":
        os._exit(9)  # killed right after the new task's file: plan.json and the record not written yet

run_replan(Path(sys.argv[1]), "add a task for audit logging", Quiet(), write=write)
"""


def test_a_replan_killed_half_way_is_undone_by_its_backup_and_blocks_other_replans_until_then(
        tmp_path: Path) -> None:
    """Killed after writing the new task's file: no history entry named the replan, so its backup was refused
    ("undone already"), and the next replan took the orphan task file into plan.json unrecorded."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_FIRST_TASK_FILE, str(tmp_path)],
                            env={**os.environ, "PYTHONPATH": str(Path.cwd())}, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    assert (folder / ".task" / "IMPL-4.json").is_file() and validate_session(folder) != []  # half-written
    (backup,) = (folder / ".process" / "backup").iterdir()

    code, _, err, _ = cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    assert code == 2 and f"the replan {backup.name} of {folder.name} stopped half-way" in err, err
    assert f"wfqueue replan --restore {backup}" in err
    # What a SIGKILL in the middle of the next write leaves: the atomic write's temporary file.
    (folder / ".task" / ".IMPL-4.json.k1ll3d.tmp").write_text('{"id": "IMPL-4"', encoding="utf-8")
    (folder / ".plan.json.k1ll3d.tmp").write_text("{", encoding="utf-8")
    code, _, err, _ = cli("replan", "--restore", str(backup), "--repo", str(tmp_path))
    assert code == 0, err
    assert tree(folder, skip_backups=True) == before and validate_session(folder) == []
    assert cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")[0] == 0


def test_a_half_written_replan_is_neither_verified_nor_executed_until_it_is_undone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`verify` judged the half-written plan (findings about a task file plan.json does not list), and `execute`
    would run it: a plan nobody made. Both refuse, naming the restore; after it, both work."""
    monkeypatch.setenv("COLUMNS", "1000")
    folder = three_tasks(tmp_path)
    for name in ("config", "limiter", "client"):  # the files its tasks modify
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / f"{name}.py").write_text(f"{name.upper()} = 1\n", encoding="utf-8")
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_FIRST_TASK_FILE, str(tmp_path)],
                            env={**os.environ, "PYTHONPATH": str(Path.cwd())}, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    (backup,) = (folder / ".process" / "backup").iterdir()
    half_written = tree(folder, skip_backups=True)
    for command in (["verify"], ["execute", folder.name, "--dry-run"]):
        code = main([*command, "--repo", str(tmp_path)])
        said = " ".join(capsys.readouterr().err.split())
        assert code == 2 and f"the replan {backup.name} of {folder.name} stopped half-way" in said, said
        assert f"wfqueue replan --restore {backup}" in said, said
    assert tree(folder, skip_backups=True) == half_written  # the refusals wrote nothing (no verification files)
    # `status` says so too, its restore command whole on one line where a pipe's 80 columns broke it in two.
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["status", folder.name, "--repo", str(tmp_path)]) in (0, None)
    shown = capsys.readouterr().out
    assert any(f"wfqueue replan --restore {backup}" in line for line in shown.splitlines()), shown
    monkeypatch.setenv("COLUMNS", "1000")

    assert cli("replan", "--restore", str(backup), "--repo", str(tmp_path))[0] == 0
    assert main(["verify", "--repo", str(tmp_path)]) in (0, 1, None)
    assert main(["execute", folder.name, "--dry-run", "--repo", str(tmp_path)]) in (0, None)
    out = capsys.readouterr().out
    assert "IMPL-3" in out and "IMPL-4" not in out, out


def test_a_roll_back_the_disk_refuses_says_the_session_is_partly_written_and_its_restore_works_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk filled after the new task's file: the roll-back failed too, with fsio's error, which the replan
    did not catch: the message said only "no space left", and the restore it needed was refused."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    real_write = backup_module.atomic_write_bytes
    full = {"on": False}

    def written(path: Path, data: bytes) -> None:
        if full["on"]:
            raise InfrastructureError(f"cannot write {path}: no space left on the device ({path.parent})")
        real_write(path, data)

    def filling(path: Path, text: str) -> None:
        if path.name == "plan.json":
            full["on"] = True
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        (path.parent).mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    monkeypatch.setattr(backup_module, "atomic_write_bytes", written)
    with pytest.raises(InfrastructureError) as failed:
        run_replan(tmp_path, "add a task for audit logging", Quiet(), write=filling)
    assert "rolling it back failed too" in failed.value.message and "partly written" in failed.value.message
    assert "wfqueue replan --restore" in (failed.value.hint or "")
    full["on"] = False  # space again
    (backup,) = (folder / ".process" / "backup").iterdir()
    code, _, err, _ = cli("replan", "--restore", str(backup), "--repo", str(tmp_path))
    assert code == 0, err
    assert tree(folder, skip_backups=True) == before


def test_a_restore_stopped_half_way_can_be_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The restore put the record back first (its history then forgot the replan) and removed the new task files
    after: stopped in between (.task/ made read-only), it could not be run again ("undone already") and left the
    replan's task file behind."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    replanned = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    real_remove = backup_module.remove

    def refused_in_the_task_folder(path: Path, **kwargs: bool) -> None:
        if path.parent.name == ".task":
            raise InfrastructureError(f"cannot write {path}: operation not permitted on {path.parent}")
        real_remove(path, **kwargs)

    monkeypatch.setattr(backup_module, "remove", refused_in_the_task_folder)
    assert cli("replan", "--restore", replanned["backup"], "--repo", str(tmp_path))[0] == 3
    monkeypatch.setattr(backup_module, "remove", real_remove)
    code, _, err, _ = cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    # No replan on a half-restored session; it said "the replan ... stopped half-way" of a restore.
    assert code == 2 and f"the restore of {Path(replanned['backup']).name} in " in err and "run it again" in err, err
    # status, sessions, validate and resume called it healthy (active, completed, 0 problems, exit 0).
    capsys.readouterr()
    assert main(["status", folder.name, "--repo", str(tmp_path), "--json"]) in (0, None)
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "half-written" and "run it again" in shown["hint"], shown
    assert main(["sessions", "--repo", str(tmp_path), "--json"]) in (0, None)
    assert json.loads(capsys.readouterr().out)["sessions"][0]["status"] == "half-written"
    assert main(["validate", str(folder), "--repo", str(tmp_path)]) == 2
    assert "the restore of" in capsys.readouterr().out
    assert main(["resume", folder.name, "--repo", str(tmp_path)]) == 2
    assert "the restore of" in capsys.readouterr().err
    code, _, err, _ = cli("replan", "--restore", replanned["backup"], "--repo", str(tmp_path))
    assert code == 0, err
    assert tree(folder, skip_backups=True) == before


def test_a_copy_of_the_last_backup_restores_a_request_typed_with_double_spaces(tmp_path: Path) -> None:
    """The manifest keeps the request with its spaces collapsed, the history as it was typed: a copy kept outside
    the session was "not the backup of the last replan" when the request had a double space."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    replanned = json.loads(cli("replan", "add a task for  audit   logging", "--repo", str(tmp_path), "-y",
                               "--json")[1])
    copy = tmp_path / "kept-elsewhere"
    Path(replanned["backup"]).rename(copy)
    code, _, err, _ = cli("replan", "--restore", str(copy), "--repo", str(tmp_path))
    assert code == 0, err
    assert tree(folder, skip_backups=True) == before
    assert read(folder, "workflow-session.json")["replan_history"] == []


def test_a_backup_path_that_is_not_there_is_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = three_tasks(tmp_path)
    monkeypatch.chdir(tmp_path.parent)
    missing = ".workflow/active/WFS-test-session/.process/backup/replan-2020-01-01T00-00-00"
    code, _, err, _ = cli("replan", "--restore", missing, "--repo", str(tmp_path))
    assert code == 2 and err.startswith(f"{tmp_path.parent / missing}: no such backup folder"), err
    assert str(folder / ".process" / "backup") in err or "backups of" in err


def test_a_backup_changed_since_it_was_made_is_not_restored(tmp_path: Path) -> None:
    """A backup's plan.json edited (or damaged) afterwards was restored as it was, exit 0: the session then did
    not read, and with its replan undone no backup was left to put it right."""
    folder = three_tasks(tmp_path)
    replanned = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    backup = Path(replanned["backup"])
    after = tree(folder, skip_backups=True)
    kept = (backup / "plan.json").read_bytes()
    (backup / "plan.json").write_text("garbage{", encoding="utf-8")
    code, _, err, _ = cli("replan", "--restore", str(backup), "--repo", str(tmp_path))
    assert code == 2 and f"{backup}: plan.json changed since the backup was made; nothing was restored" in err, err
    assert tree(folder, skip_backups=True) == after
    (backup / "plan.json").write_bytes(kept)
    assert cli("replan", "--restore", str(backup), "--repo", str(tmp_path))[0] == 0
    assert validate_session(folder) == []


def test_a_replan_killed_after_writing_everything_does_not_block_the_next(tmp_path: Path) -> None:
    """Killed after its record (written last) and before it cleared its mark: the next replans were refused as if
    its files were partly written, though its history names it and its restore is the usual one."""
    folder = three_tasks(tmp_path)
    replanned = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    (folder / ".process" / "replan.pending").write_text(
        Path(replanned["backup"]).relative_to(folder).as_posix() + "\n", encoding="utf-8")
    code, _, err, _ = cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    assert code == 0, err


def test_a_replan_still_writing_is_waited_for_not_called_half_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A replan writes with its mark set and the session's lock held. A second replan (or `execute --dry-run`) read
    the mark without the lock: "stopped half-way", with the advice to restore the first replan's backup, which
    would have undone a good replan once it finished."""
    folder = three_tasks(tmp_path)
    (tmp_path / "src").mkdir()
    for name in ("config", "limiter", "client"):
        (tmp_path / "src" / f"{name}.py").write_text(f"{name.upper()} = 1\n", encoding="utf-8")
    writing, finish = threading.Event(), threading.Event()

    def slow_write(path: Path, text: str) -> None:
        writing.set()  # the mark is set and the lock held: the replan is between its first and last write
        finish.wait(30)
        atomic_write_text(path, text)

    first = threading.Thread(target=run_replan, args=(tmp_path, "title: Config loader", Quiet()),
                             kwargs={"task_id": "IMPL-1", "write": slow_write})
    first.start()
    assert writing.wait(30)
    threading.Timer(0.5, finish.set).start()  # the first replan ends while the others wait for it
    try:
        second = run_replan(tmp_path, "title: Limiter settings", Quiet(), task_id="IMPL-2")
    finally:
        finish.set()
        first.join(30)
    assert second.status == "applied"
    assert main(["execute", folder.name, "--dry-run", "--repo", str(tmp_path)]) in (0, None)
    assert "stopped half-way" not in capsys.readouterr().err
    titles = [json.loads((folder / ".task" / f"IMPL-{n}.json").read_text())["title"] for n in (1, 2)]
    assert titles == ["Config loader", "Limiter settings"]


def test_status_does_not_call_a_restore_still_writing_half_written(tmp_path: Path) -> None:
    """A restore (or replan) writing right now has its mark set and holds the session's lock: status and sessions
    read the mark alone and advised undoing work that was about to finish."""
    from wfqueue.workflow_session.replan.backup import half_written_now, mark_pending
    from wfqueue.workflow_session.session import changes_locked

    folder = three_tasks(tmp_path)
    replanned = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    mark_pending(folder, Path(replanned["backup"]), restoring=True)
    with changes_locked(folder, 5):
        assert half_written_now(folder) is None  # under way
    said = half_written_now(folder)  # the lock is free: it stopped
    assert said is not None and said[0].startswith("the restore of")
