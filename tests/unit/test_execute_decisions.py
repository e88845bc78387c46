"""The execution coordinator's pure decisions and records: which changes a task's commit may make, who is skipped,
what a conflicting merge makes of a task, what `--continue` runs again, how an execution ends, the report, the
status, and the runtime fields written back into the plan."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer
from wfs_factory import make_session
from wfs_factory import task as wfs_task

from tests.execute_support import task
from wfqueue.cli.execute_cmd import finish_execution
from wfqueue.cli.main import main
from wfqueue.execute.decisions import (
    BranchGone,
    conflict_outcome,
    disallowed_changes,
    final_status,
    merge_hint,
    reopened,
    skip_reason,
)
from wfqueue.execute.load import load_plan
from wfqueue.execute.model import TaskFiles
from wfqueue.execute.outcome import execution_root, outcome, plan_slug
from wfqueue.execute.records import Execution, TaskRecord, render_report, save
from wfqueue.execute.writeback import runtime_fields, write_back
from wfqueue.workflow_session.verify.run import verify_session


def execution(**states: str) -> Execution:
    tasks = {t: TaskRecord(id=t, title=f"task {t}", wave=1, state=s, attempt=1)  # type: ignore[arg-type]
             for t, s in states.items()}
    return Execution(exec_id="EXEC-demo-2026-01-01", exec_dir="/x", repo="/r", source="/r/tasks.jsonl",
                     plan_kind="lite", plan_session="demo", branch="wfqueue/EXEC-demo-2026-01-01", base="a" * 40,
                     executor="command", parallel=2, waves=[list(states)], tasks=tasks)


def test_a_commit_may_touch_its_files_and_new_tests_and_delete_only_what_the_plan_deletes() -> None:
    t = task(files=TaskFiles(modify=["calc/ops.py"], create=["calc/new.py"], delete=["calc/old.py"]))
    allowed = [("M", "calc/ops.py"), ("A", "calc/new.py"), ("D", "calc/old.py"), ("A", "tests/test_new.py")]
    assert disallowed_changes(t, allowed) == []
    assert disallowed_changes(t, [("M", "README.md"), ("D", "calc/ops.py"), ("A", "calc/extra.py"),
                                  ("M", "tests/test_ops.py")]) == [
        "README.md (changed)", "calc/ops.py (deleted)", "calc/extra.py (added)", "tests/test_ops.py (changed)"]
    # A conftest.py configures every test below it (it can skip them all): not a new test file, unless named.
    assert disallowed_changes(t, [("A", "conftest.py"), ("A", "tests/conftest.py")]) == [
        "conftest.py (added)", "tests/conftest.py (added)"]
    # So do pytest.ini, setup.cfg, a jest config... under tests/ (tests/pytest.ini could set addopts to skip
    # every test); a fixture file among the tests is still a test file.
    assert disallowed_changes(t, [("A", "tests/pytest.ini"), ("A", "tests/setup.cfg"), ("A", "tests/.pytest.toml"),
                                  ("A", "tests/jest.config.js"), ("A", "tests/fixtures/users.json")]) == [
        "tests/pytest.ini (added)", "tests/setup.cfg (added)", "tests/.pytest.toml (added)",
        "tests/jest.config.js (added)"]
    named = task(files=TaskFiles(create=["tests/conftest.py"]))
    assert disallowed_changes(named, [("A", "tests/conftest.py")]) == []


def test_a_task_waits_on_no_failed_dependency() -> None:
    e = execution(T1="failed", T2="completed", T3="pending")
    assert skip_reason(task("T3", depends_on=["T2"]), e) is None
    assert skip_reason(task("T3", depends_on=["T2", "T1"]), e) == "depends on T1, which is failed"


def test_a_conflicting_task_runs_once_more_then_is_blocked_with_the_files() -> None:
    first = TaskRecord(id="T1", wave=1, state="running", attempt=1)
    assert conflict_outcome(first, ["calc/ops.py"]) == ("conflict", "its merge conflicted in calc/ops.py")
    rerun = first.model_copy(update={"state": "conflict", "attempt": 2})
    assert conflict_outcome(rerun, ["calc/ops.py", "tests/test_ops.py"]) == (
        "blocked", "its merge conflicts again (calc/ops.py, tests/test_ops.py)")
    # A task run again by --continue (attempt 3 after two) gets its one re-run on a conflict as well.
    retried = first.model_copy(update={"state": "running", "attempt": 3})
    assert conflict_outcome(retried, [])[0] == "conflict"
    # A blocked task's dependents are skipped, naming it.
    e = execution(T1="blocked", T2="pending")
    assert skip_reason(task("T2", depends_on=["T1"]), e) == "depends on T1, which is blocked"


def test_continue_runs_failed_rejected_and_blocked_tasks_again_and_reconsiders_skipped_ones() -> None:
    e = execution(T1="completed", T2="failed", T3="rejected", T4="blocked", T5="skipped", T6="running", T7="pending")
    e.tasks["T1"].merge = "m" * 40
    e.tasks["T2"].reason, e.tasks["T2"].attempt = "the executor failed", 2
    e.tasks["T3"].commit, e.tasks["T3"].rejected_files = "c" * 40, ["README.md (changed)"]
    e.tasks["T4"].attempt = 2
    e.tasks["T2"].worker, e.tasks["T2"].started_at, e.tasks["T2"].finished_at = "old@host", 1000.0, 1010.0
    again = reopened(e)
    # The next attempt's row shows no earlier run's worker or times (status showed attempt 1's for attempt 2).
    assert (again["T2"].worker, again["T2"].started_at, again["T2"].finished_at) == ("", None, None)
    assert sorted(again) == ["T2", "T3", "T4", "T5"]  # never the completed one, nor one in flight
    assert all(r.state == "pending" and r.reason is None and r.commit is None and r.base is None
               for r in again.values())
    assert again["T3"].rejected_files == []
    # The attempt numbers are kept: the next send is a new attempt (3 for T2), never one that already ran.
    assert {t: r.attempt for t, r in again.items()} == {"T2": 2, "T3": 1, "T4": 2, "T5": 1}
    assert e.tasks["T2"].state == "failed"  # the execution itself is not changed
    assert reopened(execution(T1="completed", T2="completed")) == {}


def test_a_blocked_task_shows_its_reason_in_the_report_and_the_status(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    e = execution(T1="completed", T2="blocked")
    folder = execution_root(repo) / e.exec_id
    folder.mkdir(parents=True)
    e.exec_dir, e.repo, e.status = str(folder), str(repo), "partial"
    e.tasks["T2"].attempt, e.tasks["T2"].reason = 2, "its merge conflicts again (calc/ops.py)"
    save(e)

    report = render_report(e, merge_hint(e))
    assert "| T2 task T2 | 1 | blocked | 2 |  | its merge conflicts again (calc/ops.py) |" in report
    assert "blocked 1." in report
    assert main(["status", e.exec_id, "--repo", str(repo), "--json"]) in (0, None)
    shown = json.loads(capsys.readouterr().out)
    assert shown["tasks"]["T2"]["state"] == "blocked"
    assert shown["tasks"]["T2"]["reason"] == "its merge conflicts again (calc/ops.py)"
    assert main(["status", e.exec_id, "--repo", str(repo)]) in (0, None)
    assert "blocked" in capsys.readouterr().out


def test_how_an_execution_ends_and_what_the_user_is_told() -> None:
    assert final_status(execution(T1="completed", T2="completed")) == "completed"
    partial = execution(T1="completed", T2="blocked")
    assert final_status(partial) == "partial"
    stopped = execution(T1="completed")
    stopped.stopped_wave = 1
    stopped.status = final_status(stopped)
    assert stopped.status == "stopped"
    assert "wfqueue execute --continue EXEC-demo-2026-01-01" in merge_hint(stopped)
    partial.status = "partial"
    hint = merge_hint(partial)
    assert "1 task(s) did not complete" in hint and "wfqueue execute --continue EXEC-demo-2026-01-01" in hint
    assert "git merge wfqueue/EXEC-demo-2026-01-01" in hint
    # Where a fix is seen: "fix the cause" alone sent users to fix it on their own branch, which continue ignores.
    assert "on the integration branch `wfqueue/EXEC-demo-2026-01-01`" in hint and "your own branch is not seen" in hint
    nothing = execution(T1="failed")
    nothing.status = "partial"
    assert "git merge" not in merge_hint(nothing)
    # Said as a fact, not as an alternative to running the tasks again ("...runs them again; or nothing was merged").
    assert merge_hint(nothing).endswith("runs them again. Nothing was merged: your branch has nothing to review yet.")
    assert partial.counts() == {"completed": ["T1"], "failed": [], "rejected": [], "skipped": [], "blocked": ["T2"],
                                "pending": []}
    # A rejected task is failed (as scripts read it) and named as rejected; one that has not run is pending.
    stopped = execution(T1="rejected", T2="pending")
    assert (stopped.counts()["failed"], stopped.counts()["rejected"], stopped.counts()["pending"]) == (
        ["T1"], ["T1"], ["T2"])


def test_a_partial_executions_deleted_branch_is_not_named_to_continue_on() -> None:
    """A partial execution whose integration branch is gone cannot be continued (--continue refuses it): the
    hint says to execute the plan again, and whether what completed is in the user's branch."""
    partial = execution(T1="completed", T2="failed")
    partial.status = "partial"
    merged = merge_hint(partial, gone=BranchGone(tip="a" * 40, in_head=True))
    assert "--continue" not in merged and "git merge" not in merged
    assert "1 task(s) did not complete" in merged and "`wfqueue execute " in merged
    assert "was merged into your branch (its last merge, aaaaaaaaaaaa)" in merged
    unmerged = merge_hint(partial, gone=BranchGone(tip="b" * 40, in_head=False))
    assert f"`git branch wfqueue/EXEC-demo-2026-01-01 {'b' * 40}`" in unmerged and "--continue" not in unmerged
    stopped = execution(T1="completed")
    stopped.status, stopped.stopped_wave = "stopped", 1  # only an ended execution's hint changes
    assert "--continue" in merge_hint(stopped, gone=BranchGone(tip=None, in_head=False))


def test_the_report_lists_waves_tasks_and_the_success_rate() -> None:
    e = execution(T1="completed", T2="rejected")
    e.tasks["T2"].rejected_files = ["README.md (changed)"]
    e.status = "partial"
    report = render_report(e, merge_hint(e))
    assert "# Execution EXEC-demo-2026-01-01" in report and "1. T1, T2" in report
    assert "| T2 task T2 | 1 | rejected | 1 |  | README.md (changed) |" in report
    assert "1 of 2 task(s) completed (50%)" in report and "git merge wfqueue/EXEC-demo-2026-01-01" in report


def test_runtime_fields_follow_the_unified_task_format() -> None:
    e = execution(T1="completed")
    e.tasks["T1"].commit, e.tasks["T1"].files_changed = "c" * 40, ["calc/ops.py"]
    fields = runtime_fields(task("T1"), e.tasks["T1"], e)
    assert fields["status"] == "completed" and fields["result"]["success"] is True
    assert fields["result"]["files_modified"] == ["calc/ops.py"] and fields["result"]["convergence_verified"] == [True]
    assert fields["commit"] == "c" * 40 and fields["branch"] == e.branch and fields["attempts"] == 1


def test_a_task_in_flight_when_its_execution_was_interrupted_is_written_back_pending() -> None:
    """The plan said "in_progress" for tasks nobody was running any more after Ctrl-C or a kill."""
    e = execution(T1="running", T2="conflict")
    e.status = "interrupted"
    assert [runtime_fields(task(t), e.tasks[t], e)["status"] for t in ("T1", "T2")] == ["pending", "pending"]
    e.status = "running"  # while it runs, it is in progress
    assert runtime_fields(task("T1"), e.tasks["T1"], e)["status"] == "in_progress"


def test_the_end_of_an_execution_names_each_unfinished_task_with_its_own_state_and_why(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A rejected task was listed as "failed: T2", without why; --json keeps counting it among the failed."""
    e = execution(T1="completed", T2="rejected", T3="skipped")
    e.tasks["T2"].reason = "it changes .gitignore (modified), which its task does not name"
    e.tasks["T3"].reason = "depends on T2, which is rejected"
    e.status = "partial"
    result = outcome(e)
    assert result.execute_json()["tasks"]["failed"] == ["T2"]
    with pytest.raises(typer.Exit) as exited:
        finish_execution(result, as_json=False)
    assert exited.value.exit_code == 1
    said = capsys.readouterr()
    text = said.out + said.err
    assert "T2 rejected: it changes .gitignore (modified), which its task does not name" in text, text
    assert "T3 skipped: depends on T2, which is rejected" in text and "failed: T2" not in text


def test_the_exec_id_names_the_plan_without_its_prefix_or_date() -> None:
    assert plan_slug("calc-work-2026-01-01") == "calc-work"
    assert plan_slug("WFS-rate-limits") == "rate-limits"
    assert plan_slug("CPLAN-notes-api-2026-01-01-2") == "notes-api"


def test_states_are_written_back_into_a_workflow_session(sample_repo: Path) -> None:
    folder = make_session(sample_repo, "Add limits", [wfs_task(1, "Store counts", ["notes_api/storage/db.py"]),
                                                      wfs_task(2, "Limit", ["notes_api/config.py"], depends=[1])])
    plan = load_plan(str(folder), str(sample_repo))
    e = execution(**{"IMPL-1": "completed", "IMPL-2": "skipped"})
    e.tasks["IMPL-2"].reason = "depends on IMPL-1, which is failed"
    write_back(plan, e)
    first = json.loads((folder / ".task" / "IMPL-1.json").read_text())
    second = json.loads((folder / ".task" / "IMPL-2.json").read_text())
    assert first["status"] == "completed" and first["result"]["success"] is True
    assert first["execution"]["branch"] == e.branch and first["title"] == "Store counts"
    assert second["status"] == "skipped" and second["result"]["error"] == "depends on IMPL-1, which is failed"
    todo = (folder / "TODO_LIST.md").read_text()
    # ARTIFACTS §5: a done task's line links its summary, which says what was merged and what it was held to
    assert "- [x] **IMPL-1**: Store counts → [✅](./.summaries/IMPL-1-summary.md)" in todo
    assert "- [ ] **IMPL-2**: Limit → [📋](./.task/IMPL-2.json)" in todo
    summary = (folder / ".summaries" / "IMPL-1-summary.md").read_text()
    assert summary.startswith("# IMPL-1: Store counts") and f"merged into {e.branch}" in summary
    assert not (folder / ".summaries" / "IMPL-2-summary.md").exists()
    # a link the user added to a line stays; ticking again (a --continue) changes nothing
    todo_file = folder / "TODO_LIST.md"
    todo_file.write_text(todo.replace("(./.summaries/IMPL-1-summary.md)",
                                      "(./.summaries/IMPL-1-summary.md) → [PR #4](x)"))
    write_back(plan, e)
    assert "**IMPL-1**: Store counts → [✅](./.summaries/IMPL-1-summary.md) → [PR #4](x)" in todo_file.read_text()
    # a box the user ticked by hand, with a capital X, still gets its summary's link
    todo_file.write_text(todo.replace("- [x] **IMPL-1**: Store counts → [✅](./.summaries/IMPL-1-summary.md)",
                                      "- [X] **IMPL-1**: Store counts → [📋](./.task/IMPL-1.json)"))
    write_back(plan, e)
    assert "- [x] **IMPL-1**: Store counts → [✅](./.summaries/IMPL-1-summary.md)" in todo_file.read_text()
    todo = todo_file.read_text()
    # verify reads the ticked line as the planner's own: no TODO_LIST.md finding
    assert not [f for f in verify_session(folder).findings if any("TODO_LIST" in at for at in f.location)]
    # The plan still loads, with the same tasks.
    assert [t.id for t in load_plan(str(folder), str(sample_repo)).tasks] == ["IMPL-1", "IMPL-2"]
    session = json.loads((folder / "workflow-session.json").read_text())
    assert session["status"] == "active"  # partial: not done
    # Every task merged: the session is completed, which beat's maintenance archives after a while.
    done = execution(**{"IMPL-1": "completed", "IMPL-2": "completed"})
    done.status = "completed"
    write_back(plan, done)
    assert json.loads((folder / "workflow-session.json").read_text())["status"] == "completed"


def test_states_written_back_into_tasks_jsonl_leave_every_other_byte_as_it_was(sample_repo: Path) -> None:
    """A title holding U+2028 (legal, unescaped, in a JSON string) had its task split in two lines: the plan no
    longer read. With a byte order mark the first task got no state; CRLF endings became LF."""
    def lite(n: int, title: str) -> str:
        return json.dumps({"id": f"TASK-00{n}", "title": title, "description": "d", "depends_on": [],
                           "files": [{"path": "notes_api/config.py", "action": "modify"}],
                           "convergence": {"criteria": ["c"], "verification": "pytest", "definition_of_done": "x"},
                           "keep": "as written"}, ensure_ascii=False, separators=(",", ":"))

    folder = sample_repo / ".workflow" / ".lite-plan" / "limits-2026-01-01"
    folder.mkdir(parents=True)
    tasks_file = folder / "tasks.jsonl"
    untouched = lite(2, "Not run")
    tasks_file.write_bytes(("\ufeff" + lite(1, "Limit\u2028per user") + "\r\n" + untouched + "\r\n").encode())
    plan = load_plan(str(tasks_file), str(sample_repo))
    write_back(plan, execution(**{"TASK-001": "completed"}))

    text = tasks_file.read_bytes().decode("utf-8")
    assert text.startswith("\ufeff") and text.endswith("\r\n") and text.count("\n") == 2 == text.count("\r\n")
    first, second = text[1:].split("\r\n")[:2]
    assert second == untouched
    entry = json.loads(first)
    assert entry["title"] == "Limit\u2028per user" and entry["_execution"]["status"] == "completed"
    assert ", " not in first and entry["keep"] == "as written"  # written as compact as it was read
    assert [t.id for t in load_plan(str(tasks_file), str(sample_repo)).tasks] == ["TASK-001", "TASK-002"]


def test_a_todo_list_with_crlf_endings_keeps_them_when_ticked(sample_repo: Path) -> None:
    folder = make_session(sample_repo, "Add limits", [wfs_task(1, "Store counts", ["notes_api/storage/db.py"])])
    todo = folder / "TODO_LIST.md"
    todo.write_bytes(todo.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") + b"Notes by hand\r\n")
    write_back(load_plan(str(folder), str(sample_repo)), execution(**{"IMPL-1": "completed"}))
    text = todo.read_bytes().decode("utf-8")
    assert "- [x] **IMPL-1**" in text and "\n" not in text.replace("\r\n", "") and text.endswith("Notes by hand\r\n")
