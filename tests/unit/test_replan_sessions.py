"""`wfqueue replan` and `--restore` on sessions that are not as planned: copied, renamed or still being planned,
a disk that refuses the backup, backups restored out of order, results `execute` would refuse."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.replan_support import cli, read, three_tasks, tree
from wfqueue.errors import InfrastructureError
from wfqueue.fsio import atomic_write_bytes, atomic_write_text
from wfqueue.workflow_session.replan import backup as backup_module
from wfqueue.workflow_session.session import find_session


@pytest.mark.parametrize("recorded", ["failed", "running", "pending", None])
def test_a_session_still_being_planned_is_refused_unless_it_records_no_phases(tmp_path: Path,
                                                                             recorded: str | None) -> None:
    """`wfqueue resume` generates the tasks of a session whose tasks phase is not done afresh: a task a replan
    added before would be replaced. A session written by another tool records no phases at all."""
    folder = three_tasks(tmp_path)
    session = read(folder, "workflow-session.json")
    if recorded is None:
        del session["phases"]
    else:
        session["phases"]["tasks"] = recorded
    atomic_write_text(folder / "workflow-session.json", json.dumps(session))
    before = tree(folder)
    code, _, err, _ = cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y")
    if recorded is None:
        assert code == 0, err
        return
    assert code == 2, err
    assert f"WFS-test-session is still being planned (its tasks phase is {recorded})" in err
    assert "wfqueue resume WFS-test-session" in err and "let the command planning it finish" in err
    assert tree(folder) == before


def test_a_copied_session_is_a_session_of_its_own(tmp_path: Path) -> None:
    """`cp -r WFS-x WFS-try`: a replan of the copy names the copy in its rollback command (it named the original,
    and following it overwrote the original), and the original's backups are not restored into the copy."""
    original = three_tasks(tmp_path)
    code, out, err, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0, err
    copy = original.parent / "WFS-try"
    shutil.copytree(original, copy)
    before = tree(original)
    code, out, err, _ = cli("replan", "remove IMPL-3", "--repo", str(tmp_path), "--session", "WFS-try", "-y",
                            "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["session_id"] == "WFS-try" and summary["rollback"].endswith("--session WFS-try")
    assert tree(original) == before
    restored = cli(*shlex.split(summary["rollback"])[1:], "--repo", str(tmp_path))
    assert restored[0] == 0, restored[2]
    assert (copy / ".task" / "IMPL-3.json").is_file() and tree(original) == before
    copied_backup = next((copy / ".process" / "backup").iterdir())  # made in the original, copied with it
    refused = cli("replan", "--restore", str(copied_backup), "--session", original.name, "--repo", str(tmp_path))
    assert refused[0] == 2 and "is kept in the session WFS-try" in refused[2], refused[2]
    assert tree(original) == before


def test_a_renamed_session_folder_is_found_by_its_new_name(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    folder.rename(folder.parent / "WFS-renamed")
    code, out, err, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0, err
    assert json.loads(out)["session_id"] == "WFS-renamed"


def test_a_backup_the_disk_refuses_changes_nothing_and_leaves_no_half_backup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = three_tasks(tmp_path)
    before = tree(folder)
    written: list[Path] = []

    def full_disk(path: Path, data: bytes) -> bool:
        if written:
            raise InfrastructureError(f"cannot write {path}: no space left on the device ({path.parent})")
        written.append(path)
        return atomic_write_bytes(path, data)

    monkeypatch.setattr(backup_module, "atomic_write_bytes", full_disk)
    code, _, err, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y")
    assert code == 3, err
    assert "no space left on the device" in err and "nothing was changed" in err and "run the replan again" in err
    assert tree(folder, skip_backups=True) == before  # the lock file aside, every byte as it was
    assert not (folder / ".process" / "backup").exists() or not any((folder / ".process" / "backup").iterdir())


def test_a_lite_plan_named_as_a_workflow_session_is_told_apart(tmp_path: Path) -> None:
    three_tasks(tmp_path)
    lite = tmp_path / ".workflow" / ".lite-plan" / "add-sub-2026-11-26"
    lite.mkdir(parents=True)
    code, _, error, _ = cli("replan", "use codex", "--repo", str(tmp_path), "--session", lite.name, "-y")
    assert code == 2 and f"{lite.name} is not a workflow session: it is in {lite.parent}" in error, error
    assert f"wfqueue validate {lite}" in " ".join(error.split())


def test_a_replan_that_leaves_a_plan_execute_would_refuse_changes_nothing(tmp_path: Path) -> None:
    """`validate` and `execute` refuse a plan with no task, or a task that modifies a file the repository does not
    have: a replan making one was accepted (exit 0)."""
    folder = three_tasks(tmp_path)
    for name in ("config.py", "limiter.py", "client.py"):
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / name).write_text("")
    before = tree(folder)
    code, _, err, _ = cli("replan", "remove IMPL-1, IMPL-2, IMPL-3", "--repo", str(tmp_path), "-y")
    assert code == 2 and "a plan needs at least one task" in err, err
    code, _, err, _ = cli("replan", "IMPL-2", "files: ../nowhere.py", "--repo", str(tmp_path), "-y")
    assert code == 2 and "file ../nowhere.py is outside the repository" in err, err
    assert tree(folder) == before  # refused before writing: not even a backup folder
    # A problem the plan had already (a file removed since it was planned) does not block other changes.
    (tmp_path / "src" / "client.py").unlink()
    code, _, err, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y")
    assert code == 0, err


def test_backups_are_restored_last_replan_first(tmp_path: Path) -> None:
    """Restoring the first of two replans' backups kept the second's new task beside the first's plan.json."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    first = json.loads(cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")[1])
    second = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    after_both = tree(folder, skip_backups=True)
    code, _, err, _ = cli("replan", "--restore", first["backup"], "--repo", str(tmp_path))
    assert code == 2 and "is not the backup of WFS-test-session's last replan" in err, err
    assert Path(second["backup"]).name in err and tree(folder, skip_backups=True) == after_both
    assert cli("replan", "--restore", second["backup"], "--repo", str(tmp_path))[0] == 0
    assert cli("replan", "--restore", first["backup"], "--repo", str(tmp_path))[0] == 0
    assert tree(folder, skip_backups=True) == before


def test_without_session_the_active_session_is_taken_not_the_one_executed_last(tmp_path: Path) -> None:
    """A session execute has completed is written to last (its tasks' results); `replan` and `verify` without
    --session took it over the session still waiting to be executed."""
    waiting = three_tasks(tmp_path)
    executed = waiting.parent / "WFS-executed"
    shutil.copytree(waiting, executed)
    record = read(executed, "workflow-session.json")
    record.update(session_id="WFS-executed", status="completed", updated_at="2999-01-01T00:00:00+00:00")
    atomic_write_text(executed / "workflow-session.json", json.dumps(record))
    before = tree(executed)
    code, out, err, _ = cli("replan", "remove IMPL-3", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0, err
    assert json.loads(out)["session_id"] == waiting.name
    assert tree(executed) == before
    assert find_session(tmp_path, None) == waiting
    record.update(status="failed")  # not carried out yet: the newest such session is taken, whatever its state
    atomic_write_text(executed / "workflow-session.json", json.dumps(record))
    assert find_session(tmp_path, None) == executed


def test_a_session_folder_linked_from_another_repository_is_no_session_of_this_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A link in .workflow/active to another repository's session was listed by `sessions`, taken as the newest
    session by `replan` and `verify` (a replan wrote a task into the other repository), and refused by name as "not
    found" in a listing that named it."""
    from wfqueue.cli.main import main

    other = three_tasks(tmp_path / "other")
    record = read(other, "workflow-session.json") | {"session_id": "WFS-linked",
                                                     "updated_at": "2999-01-01T00:00:00+00:00"}
    atomic_write_text(other / "workflow-session.json", json.dumps(record))
    here = three_tasks(tmp_path / "here")
    (here.parent / "WFS-linked").symlink_to(other)
    before = tree(other)
    assert find_session(tmp_path / "here", None) == here
    code, out, err, _ = cli("replan", "add a task for docs", "--repo", str(tmp_path / "here"), "-y", "--json")
    assert code == 0 and json.loads(out)["session_id"] == here.name, err
    for command in (["replan", "IMPL-2", "title: New", "--session", "WFS-linked"], ["status", "WFS-linked"],
                    ["validate", "WFS-linked"], ["resume", "WFS-linked"]):
        assert main([*command, "--repo", str(tmp_path / "here")]) == 2, command
        said = " ".join(capsys.readouterr().err.split())
        assert f"{here.parent / 'WFS-linked'} is a symbolic link (to {other}), not a session folder of this " \
               "repository" in said, (command, said)
    assert main(["sessions", "--repo", str(tmp_path / "here"), "--json"]) in (0, None)
    rows = {row["session_id"]: row for row in json.loads(capsys.readouterr().out)["sessions"]}
    assert rows["WFS-linked"]["status"] == "damaged" and "is a symbolic link" in rows["WFS-linked"]["error"]
    # A folder by a task file's name is no task: counted as validate counts (it said one more).
    tasks = rows[here.name]["tasks"]
    (here / ".task" / f"IMPL-{tasks + 1}.json").mkdir()
    assert main(["sessions", "--repo", str(tmp_path / "here"), "--json"]) in (0, None)
    assert {r["session_id"]: r for r in json.loads(capsys.readouterr().out)["sessions"]}[here.name]["tasks"] == tasks
    assert tree(other) == before


def test_a_backup_is_not_restored_again_once_its_replan_is_undone_nor_as_a_copy_kept_elsewhere(
        tmp_path: Path) -> None:
    """Two ways past "last replan first": with every replan undone, any backup was restored again (the
    session then listed a task with no file); a copy of an older backup kept outside the session was restored
    over a later replan. Both left a session `verify` flags."""
    folder = three_tasks(tmp_path)
    first = json.loads(cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")[1])
    second = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    copy = tmp_path / "kept-elsewhere"
    shutil.copytree(first["backup"], copy)
    after_both = tree(folder, skip_backups=True)
    code, _, err, _ = cli("replan", "--restore", str(copy), "--repo", str(tmp_path))
    assert code == 2 and "is not the backup of WFS-test-session's last replan" in err, err
    assert tree(folder, skip_backups=True) == after_both
    assert cli("replan", "--restore", second["backup"], "--repo", str(tmp_path))[0] == 0
    assert cli("replan", "--restore", str(copy), "--repo", str(tmp_path))[0] == 0  # now the last: the copy serves
    before = tree(folder, skip_backups=True)
    for backup in (second["backup"], first["backup"]):
        code, _, err, _ = cli("replan", "--restore", backup, "--repo", str(tmp_path))
        assert code == 2 and "has no replan left to undo" in err, err
    assert tree(folder, skip_backups=True) == before



def test_a_copy_of_a_backup_is_told_from_one_made_in_the_same_second(tmp_path: Path) -> None:
    """Two identical replans in one second share timestamp, reason and scope: a copy of the first one's backup
    passed for the last replan's, undid the wrong one and left the other's task file beside the plan."""
    from wfqueue.workflow_session.replan.backup import MANIFEST

    folder = three_tasks(tmp_path)
    first = json.loads(cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")[1])
    second = json.loads(cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")[1])
    copy = tmp_path / "kept-elsewhere"
    shutil.copytree(first["backup"], copy)
    stamp = re.compile(r"^\*\*Timestamp\*\*: .*$", re.M)
    (stamp_of_second,) = stamp.findall((Path(second["backup"]) / MANIFEST).read_text())
    (copy / MANIFEST).write_text(stamp.sub(stamp_of_second, (copy / MANIFEST).read_text()))  # the same second
    after_both = tree(folder, skip_backups=True)
    code, _, err, _ = cli("replan", "--restore", str(copy), "--repo", str(tmp_path))
    assert code == 2 and "is not the backup of WFS-test-session's last replan" in err, err
    assert tree(folder, skip_backups=True) == after_both

def test_a_renamed_sessions_backups_are_its_own(tmp_path: Path) -> None:
    """A session folder renamed after a replan (a session of its own, README) could not restore the backups it
    keeps: their manifests name the old folder, and the hints sent the user to a session that no longer exists."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    replanned = json.loads(cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y",
                               "--json")[1])
    renamed = folder.parent / "WFS-ratelimit"
    folder.rename(renamed)
    backup = renamed / Path(replanned["backup"]).relative_to(folder)
    code, _, err, _ = cli("replan", "--restore", str(backup), "--session", "WFS-ratelimit", "--repo", str(tmp_path))
    assert code == 0, err
    assert tree(renamed, skip_backups=True) == before


def test_verify_waits_for_a_replan_under_way_instead_of_reading_half_of_it(tmp_path: Path) -> None:
    """A verify run while a replan wrote the session read plan.json already listing the new task and .task/
    without its file: "plan.json lists IMPL-4, which has no task file", a report of a plan that never was,
    saved as the session's findings. It reads under the replan's lock."""
    from wfqueue.errors import SessionBusyError
    from wfqueue.workflow_session.session import changes_locked
    from wfqueue.workflow_session.verify.run import verify_session

    folder = three_tasks(tmp_path)
    assert cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")[0] == 0
    gate = verify_session(folder).quality_gate
    with changes_locked(folder, 5):  # a replan under way: plan.json is written, the new task's file not yet
        plan = read(folder, "plan.json")
        atomic_write_text(folder / "plan.json", json.dumps({**plan, "task_ids": [*plan["task_ids"], "IMPL-4"]}))
        with pytest.raises(SessionBusyError, match="a replan of WFS-test-session holds its lock"):
            verify_session(folder, lock_timeout_s=0.2)
        atomic_write_text(folder / "plan.json", json.dumps(plan))  # the replan ends as it began
    after = verify_session(folder)
    assert after.quality_gate == gate and not any("IMPL-4" in f.summary for f in after.findings)


def test_verify_of_a_session_never_replanned_writes_no_lock_file(tmp_path: Path) -> None:
    from wfqueue.workflow_session.verify.run import verify_session

    folder = three_tasks(tmp_path)
    verify_session(folder)
    assert not (folder / ".process" / "replan.lock").exists()


def test_with_the_last_replans_backup_deleted_an_older_one_is_refused_without_naming_the_lost_one_to_restore(
        tmp_path: Path) -> None:
    """The hint sent the user to restore the last replan's backup, which they had deleted."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    first = json.loads(cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")[1])
    second = json.loads(cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")[1])
    shutil.rmtree(second["backup"])
    code, _, err, _ = cli("replan", "--restore", first["backup"], "--repo", str(tmp_path))
    assert code == 2 and f"({Path(second['backup']).name}) is gone" in err, err
    assert "--restore" not in err.split("hint:", 1)[-1]
    assert tree(folder, skip_backups=True) != before  # both replans still applied: nothing was restored


def test_a_replan_of_a_session_without_plan_json_is_refused_not_applied_half(tmp_path: Path) -> None:
    """With plan.json gone, "add a task" wrote the task file and TODO_LIST.md, said applied, and left plan.json
    missing and IMPL_PLAN.md counting the old tasks: `verify` then reported the mismatch the replan had made."""
    folder = three_tasks(tmp_path)
    (folder / "plan.json").unlink()
    before = tree(folder)
    code, _, err, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y")
    assert code == 2 and "plan.json is missing" in err and "nothing was changed" in err, err
    assert tree(folder) == before


def test_a_restore_keeps_the_edits_made_since_the_replan(tmp_path: Path) -> None:
    """A criterion added by hand to a task the replan changed, and a task the replan added then edited: the
    restore put the backup back and removed the task, and both edits were gone without a word."""
    folder = three_tasks(tmp_path)
    before = tree(folder, skip_backups=True)
    added = json.loads(cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")[1])
    (new_task,) = (folder / ".task").glob("IMPL-4.json")
    edited = json.loads(new_task.read_text())
    edited["convergence"]["criteria"].append("metrics are exported on /metrics")
    new_task.write_text(json.dumps(edited, indent=2))
    code, out, err, _ = cli("replan", "--restore", added["backup"], "--repo", str(tmp_path), "--json")
    assert code == 0, err
    kept = json.loads(out)["kept"]
    assert kept and json.loads((Path(kept) / ".task" / "IMPL-4.json").read_text()) == edited
    assert tree(folder, skip_backups=True) == before  # the session itself is the backup's, byte for byte
    # Nothing edited since but the session's record (wfqueue's own, which verify and execute rewrite): nothing
    # kept, nothing said.
    again = json.loads(cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y", "--json")[1])
    record = json.loads((folder / "workflow-session.json").read_text())
    (folder / "workflow-session.json").write_text(json.dumps({**record, "verified_at": "now"}, indent=2))
    code, out, err, _ = cli("replan", "--restore", again["backup"], "--repo", str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["kept"] is None, out + err


def test_restore_without_its_folder_says_so(tmp_path: Path) -> None:
    """`replan --restore --json` took "--json" as the backup folder ("--json: no such backup folder")."""
    three_tasks(tmp_path)
    code, _, err, _ = cli("replan", "--restore", "--json", "--repo", str(tmp_path))
    assert code == 2 and "--restore needs a backup folder, not '--json'" in err, err


def test_a_task_file_holding_another_id_is_refused_naming_it(tmp_path: Path) -> None:
    """.task/IMPL-2.json holding "IMPL-7": the replan wrote, failed its own check on plan.json's task list, put
    everything back and said only that plan.json did not match the task files, leaving a backup behind."""
    folder = three_tasks(tmp_path)
    task_file = folder / ".task" / "IMPL-2.json"
    task_file.write_text(task_file.read_text().replace('"IMPL-2"', '"IMPL-7"', 1))
    before = tree(folder)
    code, _, err, _ = cli("replan", "IMPL-7", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    assert code == 2 and ".task/IMPL-2.json holds the id IMPL-7, not IMPL-2 as its file name says" in err, err
    assert tree(folder) == before  # and no backup left behind


def test_a_files_replan_warns_of_criteria_still_naming_a_file_it_took_out(tmp_path: Path) -> None:
    """`files: app/tokens.py` left the title and criteria asking for a change to app/api.py, a change execute
    rejects, and nothing said so."""
    three_tasks(tmp_path)
    cli("replan", "IMPL-1", "criterion: src/config.py reads RATE_LIMIT", "--repo", str(tmp_path), "-y")
    code, out, err, _ = cli("replan", "IMPL-1", "files: src/limits.py", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    said = "IMPL-1's criteria still name src/config.py, no longer among its files"
    assert any(w.startswith(said) and w.endswith("edit them in .task/IMPL-1.json") for w in warnings), warnings
    # The title names it too; set again after the files in one request, it no longer does: the criteria alone.
    cli("replan", "IMPL-1", "title: Read src/config.py limits; files: src/config.py", "--repo", str(tmp_path), "-y")
    code, out, err, _ = cli("replan", "IMPL-1", "files: src/limits.py; title: Read the limits", "--repo",
                            str(tmp_path), "-y", "--json")
    assert code == 0, err
    warnings = [w for w in json.loads(out)["warnings"] if "still name" in w]
    assert [w.split(" still name")[0] for w in warnings] == ["IMPL-1's criteria"], warnings


def test_a_mistyped_id_is_refused_as_the_id_its_file_name_gives_not_called_a_copy(tmp_path: Path) -> None:
    """IMPL-1.json holding "IMPL-3" beside IMPL-3.json was called "a copy? move it out of .task/": following that
    would have dropped task IMPL-1."""
    folder = three_tasks(tmp_path)
    task_file = folder / ".task" / "IMPL-1.json"
    task_file.write_text(task_file.read_text().replace('"IMPL-1"', '"IMPL-3"', 1))
    code, _, err, _ = cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    assert code == 2 and "give it back the id IMPL-1" in err and "copy" not in err, err
