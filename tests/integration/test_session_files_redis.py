"""A session folder's files through a real Redis: hosts that share no disk see one another's files and
updates, and concurrent section writers on different hosts lose nothing."""

from __future__ import annotations

import logging
import multiprocessing
from pathlib import Path

import pytest

from wfqueue import fsio, keys
from wfqueue.collab.note import parse_note, render_note, replace_section
from wfqueue.errors import InfrastructureError
from wfqueue.state import redis_client
from wfqueue.transport.session_files import SessionFiles, hydrate, mirrored

pytestmark = pytest.mark.integration
TTL_S = 600
NOTE = "---\nsession_id: s\n---\n\n## 需求理解\n\nshared\n\n"


def files_of(redis_url: str, session_id: str) -> SessionFiles:
    return SessionFiles(redis_client(redis_url, 5), session_id, TTL_S)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _section_writer(redis_url: str, session_id: str, folder: str, heading: str, rounds: int) -> None:
    """One worker host: its own copy of the session folder, appending one line per round to its section."""
    files = files_of(redis_url, session_id)
    root = Path(folder)
    hydrate(files, root)
    with mirrored(root, files):
        for n in range(rounds):
            def update(current: str | None, n: int = n) -> str:
                note = parse_note(current or "")
                body = note.section(heading).body if heading in [s.heading for s in note.sections] else "\n"
                return render_note(replace_section(note, heading, f"{body}round {n}\n"))
            fsio.locked_update(root / "plan-note.md", update, timeout_s=60)


def test_two_hosts_updating_their_sections_of_one_file_at_once_lose_no_update(redis_url: str, tmp_path: Path) -> None:
    coordinator = files_of(redis_url, "sections")
    coordinator.put("plan-note.md", NOTE.encode())
    headings = ["任务池 - Api", "任务池 - Storage"]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_section_writer, args=(redis_url, "sections", str(tmp_path / f"host{n}"), h, 50))
             for n, h in enumerate(headings)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    stored = coordinator.get("plan-note.md")
    assert stored is not None
    note = parse_note(stored.decode())
    assert note.problems == []
    for heading in headings:
        assert note.section(heading).body == "\n" + "".join(f"round {n}\n" for n in range(50)), heading
    assert note.section("需求理解").body == "\nshared\n\n"
    # The coordinator's folder gets the merged file; no lock file was left on any host.
    hydrate(coordinator, tmp_path / "coordinator")
    assert (tmp_path / "coordinator" / "plan-note.md").read_bytes() == stored
    assert not list(tmp_path.rglob("*.lock"))
    assert coordinator.client.keys(keys.session_prefix("sections") + keys.FILES_LOCK_PREFIX + "*") == []


def test_files_written_on_one_host_arrive_byte_identical_and_removals_follow(redis_url: str, tmp_path: Path) -> None:
    worker, coordinator = tmp_path / "worker", tmp_path / "coordinator"
    files = files_of(redis_url, "copies")
    binary = bytes(range(256)) + "计划\n".encode()
    with mirrored(worker, files):
        fsio.atomic_write_bytes(worker / ".task" / "IMPL-1.json", binary)
        fsio.atomic_write_text(worker / "IMPL_PLAN.md", "# plan\n")
        fsio.atomic_write_text(worker / ".task" / "IMPL-2.json", "{}\n")
    assert files.get(".task/IMPL-1.json") == binary
    assert 0 < files.client.ttl(files.key) <= TTL_S
    assert hydrate(files, coordinator) == 3
    assert snapshot(coordinator) == snapshot(worker)
    assert hydrate(files, coordinator) == 0, "identical files are not rewritten"

    with mirrored(worker, files):
        fsio.remove(worker / ".task" / "IMPL-2.json")  # a stale task file the generation deletes
    assert files.get(".task/IMPL-2.json") is None
    assert ".task/IMPL-2.json" not in files.get_all()
    assert hydrate(files, coordinator) == 1
    assert not (coordinator / ".task" / "IMPL-2.json").exists()
    assert snapshot(coordinator) == snapshot(worker)


def test_only_writes_under_the_mirrored_folder_reach_redis(redis_url: str, tmp_path: Path) -> None:
    files = files_of(redis_url, "outside")
    with mirrored(tmp_path / "session", files):
        fsio.atomic_write_text(tmp_path / "session" / "plan.md", "in\n")
        fsio.atomic_write_text(tmp_path / "other-session" / "plan.md", "out\n")
        fsio.atomic_write_text(tmp_path / "plan.md", "out\n")
    fsio.atomic_write_text(tmp_path / "session" / "late.md", "after the mirror ended\n")
    assert files.get_all() == {"plan.md": b"in\n"}


def test_filling_a_mirrored_folder_sends_nothing_back(redis_url: str, tmp_path: Path, monkeypatch) -> None:
    source, other = files_of(redis_url, "fill-source"), files_of(redis_url, "fill-other")
    source.put("plan.md", b"plan\n")
    source.put("gone.md", b"x")
    source.remove("gone.md")
    (tmp_path / "gone.md").write_text("x")
    puts: list[str] = []
    monkeypatch.setattr(SessionFiles, "put", lambda self, rel, data: puts.append(rel))
    monkeypatch.setattr(SessionFiles, "remove", lambda self, rel: puts.append(rel))
    with mirrored(tmp_path, source), mirrored(tmp_path, other):
        assert hydrate(source, tmp_path) == 2
    assert (tmp_path / "plan.md").read_text() == "plan\n" and not (tmp_path / "gone.md").exists()
    assert puts == []
    assert other.entries() == {}


def test_hostile_paths_are_refused_on_put_and_skipped_on_fill(
        redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    files = files_of(redis_url, "hostile")
    for rel in ("../x", "/etc/x", "a/../../x"):
        with pytest.raises(InfrastructureError, match="not a relative path inside the session folder"):
            files.put(rel, b"owned")
    root = tmp_path / "deep" / "session"
    target = tmp_path / "deep" / "escaped"
    # What another writer of the broker could store: fields naming places outside the folder.
    files.client.hset(files.key, mapping={"../escaped": b"fowned", str(target): b"fowned", "ok.md": b"fok"})
    (root / "link").parent.mkdir(parents=True)
    (root / "link").symlink_to(tmp_path)
    files.client.hset(files.key, "link/escaped", b"fowned")
    with caplog.at_level(logging.ERROR):
        assert hydrate(files, root) == 1
    assert (root / "ok.md").read_text() == "ok"
    assert not target.exists() and not (tmp_path / "escaped").exists()
    logged = caplog.text
    assert "'../escaped'" in logged and repr(str(target)) in logged and "'link/escaped'" in logged
    assert files.get_all() == {"ok.md": b"ok", "link/escaped": b"owned"}  # named safely: the symlink is the folder's


def test_a_lock_held_past_the_timeout_is_an_infrastructure_error(redis_url: str, tmp_path: Path) -> None:
    files = files_of(redis_url, "held")
    files.put("plan-note.md", b"before\n")
    lock_key = files.prefix + keys.FILES_LOCK_PREFIX + "plan-note.md"
    files.client.set(lock_key, "other-host:42:abcd", px=60_000)
    with mirrored(tmp_path, files), pytest.raises(InfrastructureError) as caught:
        fsio.locked_update(tmp_path / "plan-note.md", lambda current: "after\n", timeout_s=0.5)
    assert caught.value.exit_code == 3
    assert caught.value.message == "timed out after 0s waiting for the lock on plan-note.md of session held"
    assert "other-host:42:abcd" in caught.value.hint and lock_key in caught.value.hint
    assert files.get("plan-note.md") == b"before\n"
    assert not (tmp_path / "plan-note.md").exists()


def test_an_update_whose_lease_ran_out_is_not_written_but_redone(redis_url: str, tmp_path: Path) -> None:
    files = files_of(redis_url, "lease")
    files.put("plan-note.md", b"0\n")
    lock_key = files.prefix + keys.FILES_LOCK_PREFIX + "plan-note.md"
    seen: list[str | None] = []

    def update(current: str | None) -> str:
        seen.append(current)
        if len(seen) == 1:  # the lease runs out mid-update and another host writes in between
            files.client.delete(lock_key)
            files.put("plan-note.md", b"1\n")
        return f"{current}+\n"

    assert files.locked_update("plan-note.md", update, timeout_s=5) == "1\n+\n"
    assert seen == ["0\n", "1\n"]
    assert files.get("plan-note.md") == b"1\n+\n"
