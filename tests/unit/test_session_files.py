"""Mirrored folders in fsio: what is written, removed and updated under one also reaches its sink, nothing else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wfqueue import fsio
from wfqueue.errors import InfrastructureError
from wfqueue.transport.session_files import checked_rel


class MemorySink:
    """A sink that keeps what it is given, as Redis would, and counts locked updates."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.removed: list[str] = []
        self.locked: list[str] = []

    def put(self, rel: str, data: bytes) -> None:
        self.files[rel] = data

    def remove(self, rel: str) -> None:
        self.files.pop(rel, None)
        self.removed.append(rel)

    def locked_update(self, rel: str, update: Callable[[str | None], str], timeout_s: float) -> str:
        self.locked.append(rel)
        current = self.files.get(rel)
        new = update(None if current is None else current.decode())
        self.files[rel] = new.encode()
        return new


def test_writes_under_a_mirrored_folder_reach_its_sink_with_their_relative_path(tmp_path: Path) -> None:
    root, sink = tmp_path / "session", MemorySink()
    with fsio.mirroring(root, sink):
        fsio.atomic_write_text(root / "plan.md", "plan\n")
        fsio.atomic_write_json(root / ".task" / "IMPL-1.json", {"id": "IMPL-1"})
        fsio.atomic_write_text(root / "plan.md", "plan\n")  # unchanged on disk, still handed over
        fsio.atomic_write_text(tmp_path / "elsewhere.md", "not mirrored\n")
    fsio.atomic_write_text(root / "after.md", "written once the mirror ended\n")
    assert sink.files == {"plan.md": b"plan\n", ".task/IMPL-1.json": b'{\n  "id": "IMPL-1"\n}\n'}
    assert (root / "after.md").read_text() == "written once the mirror ended\n"


def test_a_folder_given_through_a_symlink_or_dots_is_the_same_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    sink = MemorySink()
    with fsio.mirroring(tmp_path / "link", sink):
        fsio.atomic_write_text(tmp_path / "real" / "sub" / ".." / "a.md", "a")
    assert sink.files == {"a.md": b"a"}


def test_the_innermost_mirrored_folder_takes_the_write(tmp_path: Path) -> None:
    outer, inner = MemorySink(), MemorySink()
    with fsio.mirroring(tmp_path, outer), fsio.mirroring(tmp_path / "s1", inner):
        fsio.atomic_write_text(tmp_path / "s1" / "x.md", "inner")
        fsio.atomic_write_text(tmp_path / "s2" / "x.md", "outer")
        fsio.atomic_write_text(tmp_path / "s10" / "x.md", "outer too: s10 is not under s1")
    assert inner.files == {"x.md": b"inner"}
    assert outer.files == {"s2/x.md": b"outer", "s10/x.md": b"outer too: s10 is not under s1"}


def test_removal_reaches_the_sink_unless_told_not_to(tmp_path: Path) -> None:
    sink = MemorySink()
    (tmp_path / "a.md").write_text("a")
    (tmp_path / "b.md").write_text("b")
    with fsio.mirroring(tmp_path, sink):
        fsio.remove(tmp_path / "a.md")
        fsio.remove(tmp_path / "b.md", mirror=False)
        fsio.remove(tmp_path / "gone.md", missing_ok=True)
        with pytest.raises(FileNotFoundError):
            fsio.remove(tmp_path / "gone.md")
        fsio.atomic_write_bytes(tmp_path / "c.md", b"c", mirror=False)
    assert sink.removed == ["a.md", "gone.md"]
    assert sink.files == {}
    assert not (tmp_path / "a.md").exists() and not (tmp_path / "b.md").exists()


def test_a_locked_update_under_a_mirrored_folder_updates_the_sinks_copy_and_the_local_file(tmp_path: Path) -> None:
    sink = MemorySink()
    sink.files["plan-note.md"] = b"from another host\n"
    (tmp_path / "plan-note.md").write_text("stale local copy\n")
    with fsio.mirroring(tmp_path, sink):
        written = fsio.locked_update(tmp_path / "plan-note.md", lambda current: f"{current}+ mine\n", timeout_s=1)
    assert written == "from another host\n+ mine\n"
    assert sink.locked == ["plan-note.md"]
    assert sink.files["plan-note.md"] == written.encode()
    assert (tmp_path / "plan-note.md").read_text() == written
    assert not (tmp_path / "plan-note.md.lock").exists(), "no file lock is taken for a mirrored file"


@pytest.mark.parametrize("rel", ["../x", "/etc/x", "a/../../x", "", ".", "a//b", "./a", "a/", "a\x00b"])
def test_paths_that_leave_or_do_not_name_a_file_in_the_folder_are_refused(rel: str) -> None:
    with pytest.raises(InfrastructureError, match="not a relative path inside the session folder"):
        checked_rel(rel)


@pytest.mark.parametrize("rel", ["plan.md", ".task/IMPL-1.json", "agents/api/plan.json", "a..b/c..md"])
def test_paths_inside_the_folder_are_kept_as_given(rel: str) -> None:
    assert checked_rel(rel) == rel
