"""Writes that the disk refuses: a named InfrastructureError (exit 3) with what to do, the old file intact."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from filelock import FileLock

from wfqueue import fsio
from wfqueue.cli.main import app, main
from wfqueue.errors import InfrastructureError
from wfqueue.fsio import atomic_write_text, locked_update


def refuse(code: int):
    def call(*_: object, **__: object) -> None:
        raise OSError(code, os.strerror(code))
    return call


@pytest.mark.parametrize(("code", "said", "hint"), [
    (errno.EROFS, "read-only file system", "make the session folder writable again"),
    (errno.EACCES, "permission denied", "make the session folder writable again"),
    (errno.EPERM, "operation not permitted", "make the session folder writable again"),
    (errno.ENOSPC, "no space left on the device", "free some space there"),
])
def test_a_refused_rename_keeps_the_old_file_and_leaves_no_temporary_file(
        code: int, said: str, hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old\n")
    monkeypatch.setattr(fsio.os, "replace", refuse(code))
    with pytest.raises(InfrastructureError) as caught:
        atomic_write_text(target, "new\n")
    assert caught.value.exit_code == 3
    assert caught.value.message.startswith(f"cannot write {target}: {said}")
    assert hint in caught.value.hint and "wfqueue resume" in caught.value.hint
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_folder_that_refuses_new_files_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsio.tempfile, "mkstemp", refuse(errno.EROFS))
    with pytest.raises(InfrastructureError, match=f"cannot write {tmp_path}/x.md: read-only file system on {tmp_path}"):
        atomic_write_text(tmp_path / "x.md", "text")
    assert list(tmp_path.iterdir()) == []


def test_other_os_errors_are_not_disguised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsio.os, "replace", refuse(errno.EIO))
    with pytest.raises(OSError) as caught:
        atomic_write_text(tmp_path / "x.md", "text")
    assert not isinstance(caught.value, InfrastructureError) and caught.value.errno == errno.EIO


def test_a_lock_file_that_cannot_be_created_is_an_infrastructure_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    note = tmp_path / "plan-note.md"
    note.write_text("before\n")
    monkeypatch.setattr(FileLock, "acquire", refuse(errno.EROFS))
    with pytest.raises(InfrastructureError, match="read-only file system"):
        locked_update(note, lambda current: "after\n", timeout_s=1)
    assert note.read_text() == "before\n"


def test_threads_of_one_process_lose_no_update(tmp_path: Path) -> None:
    """A threads pool runs many agents in one process: every read-modify-write of the note lands."""
    target = tmp_path / "plan-note.md"

    def append(line: str) -> None:
        locked_update(target, lambda current: (current or "") + line + "\n", timeout_s=30)

    threads = [threading.Thread(target=lambda n=n: [append(f"{n}-{i}") for i in range(25)]) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(target.read_text().split()) == sorted(f"{n}-{i}" for n in range(8) for i in range(25))


def test_a_thread_waiting_past_the_timeout_gets_the_lock_error(tmp_path: Path) -> None:
    target = tmp_path / "plan-note.md"
    holding, release = threading.Event(), threading.Event()

    def hold(current: str | None) -> str:
        holding.set()
        release.wait(10)
        return "held"

    holder = threading.Thread(target=locked_update, args=(target, hold, 30))
    holder.start()
    holding.wait(10)
    try:
        with pytest.raises(InfrastructureError, match="timed out after 0s waiting for the lock"):
            locked_update(target, lambda current: "late", timeout_s=0.2)
    finally:
        release.set()
        holder.join()
    assert target.read_text() == "held"


def test_a_written_file_gets_the_permissions_the_umask_gives_or_keeps_its_own(tmp_path: Path) -> None:
    """Every artifact was 0600 (the temporary file's mode from mkstemp): plan.md and tasks.jsonl in a shared
    repository could not be read by the rest of the team. Written by a process whose umask is 022."""
    kept = tmp_path / "notes.md"
    kept.write_text("old\n")
    kept.chmod(0o640)
    probe = ("import os, sys; os.umask(0o022); from pathlib import Path; from wfqueue.fsio import atomic_write_text; "
             "root = Path(sys.argv[1]); atomic_write_text(root / 'plan.md', '# plan'); "
             "atomic_write_text(root / 'notes.md', 'new'); atomic_write_text(root / 'up.json', '{}', mode=0o600)")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr
    modes = {name: (tmp_path / name).stat().st_mode & 0o777 for name in ("plan.md", "notes.md", "up.json")}
    assert modes == {"plan.md": 0o644, "notes.md": 0o640, "up.json": 0o600}  # the user's choice stays


def test_a_folder_where_wfqueue_keeps_a_file_is_named_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`up` with .workflow/.queue/up.json made a folder: an IsADirectoryError traceback (exit 1) from the rename
    that ends an atomic write, naming its temporary file."""
    target = tmp_path / "up.json"
    target.mkdir()

    @app.command("write-into-folder", hidden=True)
    def write_into_folder() -> None:
        atomic_write_text(target, "{}")

    try:
        assert main(["write-into-folder"]) == 3
    finally:
        app.registered_commands.pop()
    said = " ".join(capsys.readouterr().err.split())
    assert f"cannot write {target}: it is a folder, where wfqueue keeps a file" in said, said
