"""`wfqueue status EXEC-ID` on a recorded execution folder, with no broker: a table of the waves and each task's
state, the gates, and how to continue or merge; `--json` prints the record itself."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from wfqueue.cli.main import main
from wfqueue.execute import records
from wfqueue.execute.coordinator import read_status
from wfqueue.execute.records import Execution, GateRun, TaskRecord
from wfqueue.redis_owner import RedisOwnership
from wfqueue.sessions import queue_dir
from wfqueue.settings import Settings
from wfqueue.state import SessionState, connect

EXEC_ID = "EXEC-calc-work-2026-01-01"


def recorded(repo: Path, status: str, stopped_wave: int | None, tasks: list[TaskRecord],
             gates: list[GateRun]) -> Execution:
    exec_dir = repo / ".workflow" / ".execution" / EXEC_ID
    exec_dir.mkdir(parents=True)
    waves: dict[int, list[str]] = {}
    for record in tasks:
        waves.setdefault(record.wave, []).append(record.id)
    execution = Execution(exec_id=EXEC_ID, exec_dir=str(exec_dir), repo=str(repo), source="tasks.jsonl",
                          plan_kind="lite", plan_session="calc-work-2026-01-01", branch=f"wfqueue/{EXEC_ID}",
                          base="0123456789abcdef", executor="command", parallel=3,
                          waves=[waves[n] for n in sorted(waves)], tasks={t.id: t for t in tasks}, gates=gates,
                          status=status, stopped_wave=stopped_wave, started_at=1767225600.0,  # type: ignore[arg-type]
                          finished_at=1767225660.0)
    records.save(execution)
    return execution


def done(task_id: str, wave: int, **fields: object) -> TaskRecord:
    values: dict[str, object] = {"id": task_id, "title": f"Work on {task_id}", "wave": wave, "state": "completed",
                                 "attempt": 1, "worker": "exec@host", "started_at": 1767225601.0,
                                 "finished_at": 1767225603.5, "merge": "feedfacecafe0000"}
    values.update(fields)
    return TaskRecord.model_validate(values)


def status_table(repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                 *extra: str) -> str:
    monkeypatch.setenv("COLUMNS", "250")  # one table row per line
    monkeypatch.delenv("WFQUEUE_BROKER_URL", raising=False)
    assert main(["status", EXEC_ID, "--repo", str(repo), *extra]) in (0, None)
    return capsys.readouterr().out


def cells(out: str, task_id: str) -> list[str]:
    (line,) = [line for line in out.splitlines() if f" {task_id} " in line]
    return [c.strip() for c in line.strip("│ ").split("│")]


def test_a_stopped_execution_shows_waves_states_and_how_to_continue(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(tmp_path, "stopped", 2, [
        done("TASK-001", 1),
        done("TASK-002", 1, attempt=2),
        done("TASK-004", 1, state="failed", merge=None, reason="the verification still fails after 2 executor runs"),
        done("TASK-003", 2),
        done("TASK-005", 2, state="skipped", attempt=0, worker="", started_at=None, finished_at=None, merge=None,
             reason="depends on TASK-004, which is failed"),
        done("TASK-006", 2, state="rejected", merge=None, reason="its commit changes files the task does not name",
             rejected_files=["notes.txt (added)"]),
        done("TASK-007", 3, state="pending", attempt=0, worker="", started_at=None, finished_at=None, merge=None),
    ], [GateRun(wave=1, passed=True, commands=["python -m pytest -q"], at=1767225610.0),
        GateRun(wave=2, passed=False, commands=["python -m pytest -q"], failed_command="python -m pytest -q",
                at=1767225650.0)])
    out = status_table(tmp_path, capsys, monkeypatch)
    assert not out.lstrip().startswith("{")
    assert (f"{EXEC_ID} (execution of calc-work-2026-01-01, lite plan): stopped (the gate after wave 2 is red), "
            "3 of 7 task(s) completed in 3 wave(s)") in out
    assert f"integration branch: wfqueue/{EXEC_ID} (started at 0123456789ab)" in out
    assert cells(out, "TASK-002") == ["1", "TASK-002", "Work on TASK-002", "completed", "2", "2.5", "exec@host"]
    assert cells(out, "TASK-004")[3:] == ["failed", "1", "2.5", "exec@host"]
    assert cells(out, "TASK-005")[3:6] == ["skipped", "-", "-"]
    assert cells(out, "TASK-006")[3] == "rejected"
    # Each task's detail follows the table whole, one line a task.
    details = [line for line in out.splitlines() if line.startswith("TASK-")]
    assert "TASK-002: merged as feedfacecafe" in details
    assert "TASK-004: the verification still fails after 2 executor runs" in details
    assert "TASK-005: depends on TASK-004, which is failed" in details
    assert any(line.startswith("TASK-006: ") and "notes.txt (added)" in line for line in details)
    assert cells(out, "TASK-007")[:4] == ["3", "TASK-007", "Work on TASK-007", "not started"]
    # Wave by wave, in the schedule's order.
    order = [line.split("│")[2].strip() for line in out.splitlines() if "│ TASK-" in line]
    assert order == ["TASK-001", "TASK-002", "TASK-004", "TASK-003", "TASK-005", "TASK-006", "TASK-007"]
    assert "gate after wave 1: passed" in out and "gate after wave 2: red (`python -m pytest -q`)" in out
    assert f"wfqueue execute --continue {EXEC_ID}" in out


def test_a_completed_execution_says_how_to_merge_and_json_is_the_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    execution = recorded(tmp_path, "completed", None, [done("TASK-001", 1), done("TASK-002", 2)],
                         [GateRun(wave=1, passed=True, commands=["pytest"], at=1767225610.0)])
    out = status_table(tmp_path, capsys, monkeypatch)
    assert "completed, 2 of 2 task(s) completed in 2 wave(s)" in out
    assert f"git merge wfqueue/{EXEC_ID}" in out
    shown = json.loads(status_table(tmp_path, capsys, monkeypatch, "--json"))
    assert Execution.model_validate(shown) == execution


def test_a_running_execution_shows_tasks_not_sent_yet_as_queued(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(tmp_path, "running", None, [
        done("TASK-001", 1, state="running", finished_at=None, merge=None),
        done("TASK-002", 2, state="pending", attempt=0, worker="", started_at=None, finished_at=None, merge=None),
    ], [])
    owner = RedisOwnership(queue_dir(tmp_path) / "redis")  # the command running it holds the repository's Redis
    owner.acquire()
    try:
        out = status_table(tmp_path, capsys, monkeypatch)
    finally:
        owner.release()
    assert cells(out, "TASK-001")[3:6] == ["running", "1", "-"]
    assert cells(out, "TASK-002")[3] == "queued"
    assert f"wfqueue execute --continue {EXEC_ID}" in out
    # Killed outright, that command could not mark the execution: with nobody holding the Redis it shows as
    # interrupted, its unsent task as not started.
    out = status_table(tmp_path, capsys, monkeypatch)
    assert "interrupted" in out and cells(out, "TASK-002")[3] == "not started"
    # Its task in flight is not running any more (it showed "running" after the command was gone).
    assert cells(out, "TASK-001")[3] == "interrupted"


def test_a_session_planned_from_another_machine_is_named_as_such(
        tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """On a shared broker, `status` of a session this machine has no folder of said "existing sessions: none", as
    if the session did not exist; the broker knows where its folder is."""
    from wfqueue.state import SessionState, redis_client

    state = SessionState(redis_client(redis_url, 2.0), "EXEC-limits-2026-11-27", 600)
    state.set_meta(kind="execute", repo="/srv/team/app", session_dir="/srv/team/app/.workflow/.execution/"
                                                                     "EXEC-limits-2026-11-27")
    here = tmp_path / "checkout"
    here.mkdir()
    monkeypatch.setenv("WFQUEUE_BROKER_URL", redis_url)
    assert main(["status", "EXEC-limits-2026-11-27", "--repo", str(here)]) == 2
    err = capsys.readouterr().err
    assert "EXEC-limits-2026-11-27 is not run from here: the broker knows it, its folder is /srv/team/app/" in err
    assert "run `wfqueue status EXEC-limits-2026-11-27` on that machine" in err
    assert main(["status", "EXEC-other-2026-11-27", "--repo", str(here)]) == 2  # one nobody knows
    assert "no session EXEC-other-2026-11-27 under" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["", '{"exec_id": "EXEC-calc-work-2026-01-01"', "[]"])
def test_a_damaged_execution_record_is_named_with_what_to_do(
        content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An emptied or cut execution.json ended `status` and `execute --continue` in a pydantic traceback and exit 1,
    which says that tasks failed. It is bad input (exit 2) naming the file, and what to do."""
    monkeypatch.delenv("WFQUEUE_BROKER_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "1000")  # the message on one line, whatever the path's length
    monkeypatch.setattr("os.execve", lambda *args: pytest.fail("nothing may replace this process"))
    record = tmp_path / ".workflow" / ".execution" / EXEC_ID / "execution.json"
    record.parent.mkdir(parents=True)
    record.write_text(content, encoding="utf-8")
    for command in (["status", EXEC_ID], ["execute", "--continue", EXEC_ID]):
        assert main([*command, "--repo", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"{record} cannot be read: it {'is empty' if not content else 'is not an execution record'}" in err
        assert "start a new execution of the plan" in err and f"wfqueue/{EXEC_ID}" in err and "Traceback" not in err
    assert record.read_text(encoding="utf-8") == content


@pytest.mark.parametrize("original_there", [True, False], ids=["copied", "moved"])
def test_an_execution_of_a_copied_or_moved_repository_is_not_continued_elsewhere(
        original_there: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`execute --continue EXEC --repo COPY` (and `resume`) went on with the execution in the repository its record
    names: the original's branch moved and its plan was rewritten, the copy's record stayed as it was. A moved
    repository ended in "git is not installed here". Both are refused, saying where it ran and what to do."""
    monkeypatch.delenv("WFQUEUE_BROKER_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setattr("os.execve", lambda *args: pytest.fail("nothing may replace this process"))
    original = tmp_path / "original"
    copy = tmp_path / "copy"
    execution = recorded(copy, "partial", 1, [done("TASK-001", 1), done("TASK-002", 1, state="failed")], [])
    records.save(execution.model_copy(update={"repo": str(original)}))
    if original_there:
        original.mkdir()
    before = (copy / ".workflow" / ".execution" / EXEC_ID / "execution.json").read_bytes()
    for command in (["execute", "--continue", EXEC_ID], ["resume", EXEC_ID]):
        assert main([*command, "--repo", str(copy)]) == 2
        err = capsys.readouterr().err
        assert f"{EXEC_ID} ran in {original}, and this repository is {copy}: it was " \
               f"{'copied' if original_there else 'moved'} since" in err, err
        assert (f"--continue {EXEC_ID} --repo {original}" if original_there else
                f"move the repository back to {original}") in err
    assert (copy / ".workflow" / ".execution" / EXEC_ID / "execution.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", *(["original"] if original_there else [])]
    assert not original_there or list(original.iterdir()) == []  # nothing written where it ran


def test_an_execution_whose_retried_task_has_its_branch_checked_out_elsewhere_is_refused_up_front(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A person checked out a failed task's branch to look at it; `--continue` sent the task again, whose worktree
    could not take the branch (git's "cannot force update the branch"): the attempt was spent on it."""
    from tests.execute_support import git, make_repo

    monkeypatch.delenv("WFQUEUE_BROKER_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setattr("os.execve", lambda *args: pytest.fail("nothing may replace this process"))
    repo = make_repo(tmp_path)
    recorded(repo, "partial", None, [done("TASK-001", 1), done("TASK-002", 1, state="failed")], [])
    git(repo, "branch", f"wfqueue/{EXEC_ID}")
    branch = f"wfqueue/tasks/{EXEC_ID}/TASK-002"
    git(repo, "branch", branch)
    git(repo, "worktree", "add", "-q", str(tmp_path / "peek"), branch)
    assert main(["execute", "--continue", EXEC_ID, "--repo", str(repo)]) == 2
    err = capsys.readouterr().err
    assert f"the branch of TASK-002, {branch}, is checked out in {tmp_path / 'peek'}" in err, err
    assert records.load(repo / ".workflow" / ".execution" / EXEC_ID).tasks["TASK-002"].attempt == 1


def test_continue_refuses_the_options_that_decide_how_an_execution_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`execute --continue EXEC --dry-run` ran and merged every task left (a run meant to write nothing), and
    --force and another --executor were taken and ignored."""
    from tests.execute_support import make_repo

    monkeypatch.delenv("WFQUEUE_BROKER_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "git status")
    monkeypatch.setattr("os.execve", lambda *args: pytest.fail("nothing may replace this process"))
    repo = make_repo(tmp_path)
    recorded(repo, "partial", None, [done("TASK-001", 1), done("TASK-002", 1, state="failed")], [])
    record = repo / ".workflow" / ".execution" / EXEC_ID / "execution.json"
    before = record.read_bytes()
    for option, said in ((["--dry-run"], "--dry-run shows a plan's schedule before it starts"),
                         (["--force"], "a continued execution is not checked again"),
                         (["--executor", "claude"], f"{EXEC_ID} runs the command executor, and a continued "
                                                    "execution keeps it")):
        assert main(["execute", "--continue", EXEC_ID, "--repo", str(repo), *option, "--json"]) == 2, option
        out, err = capsys.readouterr()
        assert said in " ".join(err.split()) and json.loads(out)["exit_code"] == 2, err
    assert record.read_bytes() == before
    assert not (repo / ".workflow" / ".queue").exists()  # no Redis, no worker was started


@pytest.mark.parametrize(("command", "said"), [
    (None, f"{EXEC_ID}'s command executor needs an executor command, and none is configured"),
    ("/nonexistent/agent --yes", "the executor command's program '/nonexistent/agent' is not found"),
])
def test_a_continued_execution_whose_executor_is_not_configured_is_refused_before_any_task_runs(
        command: str | None, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new execution without its executor is refused at once (exit 2); `--continue` and `resume` sent every task
    to the workers, which all failed, each attempt spent, and exited 1 blaming the tasks."""
    from tests.execute_support import git, make_repo

    monkeypatch.delenv("WFQUEUE_BROKER_URL", raising=False)
    for variable in ("WFQUEUE_EXECUTOR_COMMAND", "WFQUEUE_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    if command is not None:
        monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", command)
    monkeypatch.setattr("os.execve", lambda *args: pytest.fail("nothing may replace this process"))
    repo = make_repo(tmp_path)
    recorded(repo, "partial", None, [done("TASK-001", 1), done("TASK-002", 1, state="failed")], [])
    git(repo, "branch", f"wfqueue/{EXEC_ID}")
    record = repo / ".workflow" / ".execution" / EXEC_ID / "execution.json"
    before, branches = record.read_bytes(), git(repo, "branch", "--list")
    for run in (["execute", "--continue", EXEC_ID], ["resume", EXEC_ID]):
        assert main([*run, "--repo", str(repo)]) == 2, run
        assert said in " ".join(capsys.readouterr().err.split())
    assert record.read_bytes() == before and git(repo, "branch", "--list") == branches
    assert not (repo / ".workflow" / ".queue").exists()


def test_a_running_tasks_row_says_what_its_agent_record_says(tmp_path: Path, redis_url: str) -> None:
    """A task done early read "running", with no worker, until the tasks sent before it were merged (results are
    settled in the order sent); a task whose worker died read "running" for the hour before redelivery."""
    running = {"state": "running", "attempt": 1, "worker": "", "started_at": None, "finished_at": None,
               "merge": None}
    # T4 runs its second attempt; execution.json still names the first one's worker and times.
    again = {**running, "attempt": 2, "worker": "old@a", "started_at": 1000.0, "finished_at": 1010.0}
    execution = recorded(tmp_path, "running", None, [*(done(t, 1, **running) for t in ("T1", "T2", "T3")),
                                                     done("T4", 1, **again), done("T5", 1, **running)], [])
    settings = Settings(broker_url=redis_url)
    state = SessionState(connect(settings), execution.exec_id, settings.state_ttl_s)
    now = time.time()
    state.set_agent("T1", state="running", attempt=1, worker="w1@a", started_at=now - 5, alive_at=now,
                    beat_every_s=30)
    state.set_agent("T2", state="done", attempt=1, worker="w2@b", started_at=now - 9, finished_at=now - 4,
                    beat_every_s=30)
    state.set_agent("T3", state="running", attempt=1, worker="w3@c", started_at=now - 700, alive_at=now - 600,
                    beat_every_s=30)
    state.set_agent("T4", state="running", attempt=2, worker="w4@new", started_at=now - 10, alive_at=now,
                    beat_every_s=30)
    # Waiting out a retry-after: queued, its last beat long ago, and no dead worker for that.
    state.set_agent("T5", state="queued", attempt=1, worker="w5@e", started_at=now - 700, alive_at=now - 600,
                    beat_every_s=30, note="429 rate limited; tried again in 600s")
    tasks = read_status(Path(execution.exec_dir), settings).tasks
    assert [tasks[t].worker for t in ("T1", "T2", "T3", "T4", "T5")] == ["w1@a", "w2@b", "w3@c", "w4@new", ""]
    assert tasks["T4"].started_at == pytest.approx(now - 10) and tasks["T4"].finished_at is None
    assert tasks["T5"].note == "429 rate limited; tried again in 600s"
    assert tasks["T1"].note is None and tasks["T1"].started_at == pytest.approx(now - 5)
    assert tasks["T2"].note is not None and tasks["T2"].note.startswith("done on its worker; merged once")
    assert tasks["T3"].note is not None and tasks["T3"].note.startswith("no heartbeat from its worker for 600s")


def test_one_sessions_status_on_an_unreachable_shared_broker_is_what_its_files_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`wfqueue status SESSION` with the shared broker stopped (or refusing the password) failed, exit 3, even for a
    completed session; the listing shows the files with a warning. So does one session's view."""
    from tests.execute_support import make_repo

    repo = make_repo(tmp_path)
    (repo / ".workflow" / ".planning" / "CPLAN-existing-2026-11-22").mkdir(parents=True)
    monkeypatch.setenv("WFQUEUE_BROKER_URL", "redis://:s3cret@127.0.0.1:1/0")
    assert main(["status", "CPLAN-existing-2026-11-22", "--repo", str(repo), "--json"]) in (0, None)
    out, err = capsys.readouterr()
    assert json.loads(out)["session_id"] == "CPLAN-existing-2026-11-22"
    said = " ".join(err.split())
    assert "warning: cannot reach the broker at redis://:***@127.0.0.1:1/0" in said, said
    assert "the state below is what the session files say" in said and "s3cret" not in said
