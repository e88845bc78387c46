"""`wfqueue execute` in process: the dry run's schedule (text and JSON), a plan with problems refused with
the full list, and the checks made before anything would run (a clean git tree, an executor), all of which
leave the repository exactly as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from wfs_factory import make_session, task

from wfqueue.cli.main import main
from wfqueue.execute.executors import choose_executor
from wfqueue.fsio import atomic_write_json
from wfqueue.settings import load_settings
from wfqueue.up_cluster import UpCluster, UpWorkerSettings, announced

SESSION = "WFS-test-session"
GIT = ["git", "-c", "user.name=wfqueue test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"]


def plan_session(repo: Path, tasks: list[dict[str, object]] | None = None) -> Path:
    return make_session(repo, "Add per-user rate limiting", tasks or [
        task(1, "Store request counts", ["notes_api/storage/db.py"]),
        task(2, "Limit requests in the handlers", ["notes_api/api/handlers.py"], depends=[1]),
        task(3, "Log limited requests", ["notes_api/api/handlers.py"]),
        task(4, "Configure the limits", ["notes_api/config.py"]),
    ])


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def committed(repo: Path) -> Path:
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def snapshot(repo: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under the repository (the .git folder included) with its mtime and bytes."""
    return {str(p.relative_to(repo)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(repo.rglob("*")) if p.is_file()}


def test_dry_run_prints_waves_the_critical_path_and_the_gate(sample_repo: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    plan_session(sample_repo)
    before = snapshot(sample_repo)
    assert main(["execute", SESSION, "--repo", str(sample_repo), "--dry-run", "--parallel", "2"]) in (0, None)
    out = capsys.readouterr().out
    assert "WFS-test-session (workflow plan, 4 tasks): 2 waves, at most 2 tasks at once" in out
    rows = [line.split()[:3] for line in out.splitlines() if line.startswith("  ")]
    # Two slots: IMPL-1 first (it starts the longest chain), then IMPL-3 in plan order; IMPL-4 waits for a slot.
    assert rows[:4] == [["wave", "1", "IMPL-1"], ["IMPL-3", "Log", "limited"], ["wave", "2", "IMPL-2"],
                        ["IMPL-4", "Configure", "the"]]
    assert "critical path (2 tasks): IMPL-1 -> IMPL-2" in out
    assert "python -m pytest -q" in out and "dry run: nothing was written" in out
    assert snapshot(sample_repo) == before


def test_dry_run_json_is_one_object_and_writes_nothing(sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = plan_session(sample_repo)
    before = snapshot(sample_repo)
    assert main(["execute", str(folder), "--dry-run", "--json"]) in (0, None)
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "dry_run"
    assert payload["plan"] == {"kind": "workflow", "session_id": SESSION, "source": str(folder / ".task"),
                               "repo": str(sample_repo.resolve()), "tasks": 4}
    assert [w["tasks"] for w in payload["waves"]] == [["IMPL-1", "IMPL-3", "IMPL-4"], ["IMPL-2"]]
    assert payload["parallel"] == 4  # the execute_parallel default
    assert payload["critical_path"] == {"tasks": ["IMPL-1", "IMPL-2"], "length": 2.0, "estimated": False}
    assert payload["gate_commands"] == ["python -m pytest -q"]
    by_id = {t["id"]: t for t in payload["tasks"]}
    assert by_id["IMPL-2"]["files"] == {"modify": ["notes_api/api/handlers.py"], "create": [], "delete": []}
    assert by_id["IMPL-2"]["wave"] == 2 and by_id["IMPL-2"]["verification_runs"] is True
    assert snapshot(sample_repo) == before


def test_the_test_command_setting_replaces_the_plans_gate(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = plan_session(sample_repo)
    monkeypatch.setenv("WFQUEUE_EXECUTE_TEST_COMMAND", "make test")
    monkeypatch.setenv("WFQUEUE_EXECUTE_PARALLEL", "1")
    assert main(["execute", str(folder), "--dry-run", "--json"]) in (0, None)
    payload = json.loads(capsys.readouterr().out)
    assert payload["gate_commands"] == ["make test"]
    assert all(len(w["tasks"]) == 1 for w in payload["waves"]) and len(payload["waves"]) == 4


def test_a_plan_with_problems_is_refused_with_all_of_them(sample_repo: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    folder = plan_session(sample_repo, [
        task(1, "One", ["notes_api/storage/db.py"], depends=[2]),
        task(2, "Two", ["notes_api/api/handlers.py"], depends=[1]),
        task(3, "Three", ["notes_api/api/handlers.py"], depends=[9]),
        task(4, "Four", ["notes_api/api/ratelimits.py"]),
    ])
    broken = json.loads((folder / ".task" / "IMPL-4.json").read_text())
    del broken["convergence"]
    atomic_write_json(folder / ".task" / "IMPL-5.json", {**broken, "id": "IMPL-5"})
    before = snapshot(sample_repo)
    for extra in (["--dry-run"], []):
        assert main(["execute", SESSION, "--repo", str(sample_repo), *extra]) == 2
        err = capsys.readouterr().err
        assert "the plan cannot be executed (4 problems)" in err
        assert "dependency cycle IMPL-1 -> IMPL-2 -> IMPL-1" in err
        assert "depends on IMPL-9, which no task in this plan has" in err
        assert "file notes_api/api/ratelimits.py does not exist" in err
        assert ".task/IMPL-5.json: convergence: Field required" in err
        assert "wfqueue validate" in err
    assert snapshot(sample_repo) == before


def test_an_unknown_session_or_path_is_bad_input(sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["execute", "WFS-nope", "--repo", str(sample_repo), "--dry-run"]) == 2
    assert "no session WFS-nope" in capsys.readouterr().err
    assert main(["execute", str(sample_repo / "missing" / "tasks.jsonl"), "--dry-run"]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_outside_git_execution_is_refused(sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_session(sample_repo)
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    err = capsys.readouterr().err
    assert "is not a git repository" in err and "git init" in err


def test_a_dirty_working_tree_is_refused_naming_the_files(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    committed(sample_repo)
    plan_session(sample_repo)  # the plan under .workflow/ is untracked, and does not count
    (sample_repo / "notes_api" / "config.py").write_text("LIMIT = 5\n", encoding="utf-8")
    (sample_repo / "scratch.txt").write_text("notes\n", encoding="utf-8")
    git(sample_repo, "add", "scratch.txt")
    (sample_repo / "draft.py").write_text("x = 1\n", encoding="utf-8")
    before = snapshot(sample_repo)
    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
    err = capsys.readouterr().err
    assert "is not clean (3 paths changed or untracked)" in err
    for name in ("notes_api/config.py", "scratch.txt", "draft.py"):
        assert name in err
    assert ".workflow" not in err.split("hint:")[0].split("untracked):")[1]
    assert "git stash --include-untracked" in err
    assert snapshot(sample_repo) == before  # .git/index included: checking the tree did not even refresh it


def with_submodule(repo: Path, tmp_path: Path) -> None:
    """``repo`` committed, with a repository of its own at vendor/lib as a submodule."""
    vendor = tmp_path / "vendor-lib"
    vendor.mkdir()
    (vendor / "lib.py").write_text("VALUE = 1\n", encoding="utf-8")
    committed(vendor)
    committed(repo)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(vendor), "vendor/lib")
    git(repo, "commit", "-qm", "vendor the lib")


def test_a_changed_submodule_is_named_with_how_to_clean_it_inside(sample_repo: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A change inside a submodule was refused with "commit or stash them (`git stash --include-untracked`)",
    which leaves a submodule's changes where they are: the command was refused again. The hint says to clean
    it inside the submodule, or to record its new commit."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    with_submodule(sample_repo, tmp_path)
    plan_session(sample_repo)
    (sample_repo / "vendor" / "lib" / "lib.py").write_text("VALUE = 2\n", encoding="utf-8")
    before = snapshot(sample_repo)

    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is not clean (1 path changed or untracked)" in err and "vendor/lib" in err, err
    module = sample_repo / "vendor" / "lib"  # by its whole path: the hint's command is run from anywhere
    assert f"in a submodule ({module}), commit or stash inside it (`git -C {module} stash --include-untracked`)" \
        in err, err
    assert snapshot(sample_repo) == before


def test_a_file_inside_a_submodule_is_refused_naming_the_submodule(sample_repo: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "git does not track 1 file ... (ignored, or never added): commit them": the file is tracked, by the
    submodule, and doing as told could not work."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    with_submodule(sample_repo, tmp_path)
    plan_session(sample_repo, [task(1, "Change the vendored value", ["vendor/lib/lib.py"])])
    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "file vendor/lib/lib.py is inside the submodule vendor/lib, another repository" in err, err
    assert "does not track" not in err and "--repo vendor/lib" in err
    assert main(["validate", SESSION, "--repo", str(sample_repo)]) == 2  # which said "0 problems"
    assert "file vendor/lib/lib.py is inside the submodule vendor/lib" in capsys.readouterr().out


def test_a_file_the_plan_changes_must_be_tracked_by_git(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    (sample_repo / ".gitignore").write_text("notes_api/config.py\n", encoding="utf-8")
    committed(sample_repo)  # the tree is clean, but config.py is not at HEAD, where every task starts
    plan_session(sample_repo)
    said = ("file notes_api/config.py is ignored by git: every task of an execution starts from HEAD, where it is "
            "not; stop ignoring it and commit it, or leave it out")
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    assert said in " ".join(capsys.readouterr().err.split())
    # `validate` says so too: it passed the plan ("4 tasks, 0 problems"), the file being there on disk.
    assert main(["validate", SESSION, "--repo", str(sample_repo), "--json"]) == 2
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [(p["task_id"], p["code"], p["message"]) for p in problems] == [("IMPL-4", "bad_path", said)]
    # A file never added (not ignored) is the working tree's to commit first, as execute's own check says.
    (sample_repo / ".gitignore").write_text("", encoding="utf-8")
    git(sample_repo, "commit", "-qam", "stop ignoring")  # config.py: there, never added
    assert main(["validate", SESSION, "--repo", str(sample_repo), "--json"]) == 0
    capsys.readouterr()
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    assert "is not clean" in capsys.readouterr().err


def test_a_copy_inside_another_checkout_that_ignores_it_is_told_to_become_a_repository(
        sample_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo` plans a copy under .demo/, which wfqueue's own checkout ignores: execute said "commit them (or
    stop ignoring them)", which meant committing the copy into wfqueue."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    outer = tmp_path / "project"
    outer.mkdir()
    (outer / ".gitignore").write_text(".demo/\n", encoding="utf-8")
    committed(outer)
    copy = outer / ".demo" / "sample-api"
    copy.parent.mkdir()
    sample_repo.rename(copy)
    plan_session(copy)
    assert main(["execute", SESSION, "--repo", str(copy)]) == 2
    err = capsys.readouterr().err
    assert f"{copy} is not a git repository of its own: it lies inside {outer}, whose git ignores it" in err
    assert "git init" in err and "commit them (or stop ignoring them)" not in err


def test_an_allow_list_gitignore_at_the_root_is_not_taken_for_another_checkout(
        sample_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`git check-ignore .` answers yes at a repository's own root when its .gitignore starts with `*`."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    (sample_repo / ".gitignore").write_text("*\n!*/\n!*.py\n!.gitignore\n", encoding="utf-8")
    committed(sample_repo)
    plan_session(sample_repo, [task(1, "Document the limits", ["README.md"])])
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    err = capsys.readouterr().err
    assert "file README.md is ignored by git: every task of an execution starts from HEAD" in " ".join(err.split())
    assert "not a git repository of its own" not in err


def test_a_file_the_plan_creates_must_not_be_ignored_by_git(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A planned `notes_api/rate_local.py` under a `*_local.py` ignore rule was left out of its task's commit,
    and the execution said "completed" (or "the executor changed nothing" when it was the task's only file)."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    (sample_repo / ".gitignore").write_text("*_local.py\n", encoding="utf-8")
    committed(sample_repo)
    creates = task(1, "Keep request counts", ["notes_api/config.py"])
    creates["files"] += [{"path": "notes_api/rate_local.py", "action": "create"},
                         {"path": "notes_api/zähler_local.py", "action": "create"},  # git quotes such names
                         {"path": "notes_api/rate.py", "action": "create"}]
    plan_session(sample_repo, [creates])
    before = snapshot(sample_repo)
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "git ignores 2 files the plan creates: notes_api/rate_local.py, notes_api/zähler_local.py; their " \
           "tasks' commits would leave them out" in err and "git check-ignore -v" in err, err
    assert snapshot(sample_repo) == before


def test_a_sparse_checkout_set_for_every_worktree_is_refused(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The old way of a sparse checkout (core.sparseCheckout in .git/config) holds for every worktree: turning it
    off in a task's worktree would turn it off in the user's checkout too."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "claude -p")
    committed(sample_repo)
    plan_session(sample_repo)
    git(sample_repo, "config", "core.sparseCheckout", "true")
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is a sparse checkout whose setting (core.sparseCheckout in .git/config) every worktree shares" in err, err
    assert git(sample_repo, "config", "core.sparseCheckout").strip() == "true"


def test_without_an_executor_execution_is_refused_and_says_how_to_configure_one(
        sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    committed(sample_repo)
    plan_session(sample_repo)
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 2
    err = capsys.readouterr().err
    assert "no executor is configured" in err
    assert "WFQUEUE_EXECUTOR_COMMAND" in err and "ANTHROPIC_API_KEY" in err and "--dry-run" in err
    assert main(["execute", SESSION, "--repo", str(sample_repo), "--executor", "claude"]) == 2
    assert "--executor claude needs an Anthropic API key" in capsys.readouterr().err
    assert main(["execute", SESSION, "--repo", str(sample_repo), "--executor", "codex"]) == 2
    assert "unknown executor" in capsys.readouterr().err


def test_beside_wfqueue_up_the_executor_its_workers_started_with_decides(
        sample_repo: Path, redis_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Up's workers run the tasks with up's settings: an executor set only in this shell would fail every task."""
    committed(sample_repo)
    plan_session(sample_repo)

    def outside_queue() -> dict[str, tuple[int, bytes]]:  # up.json is written in .workflow/.queue
        return {k: v for k, v in snapshot(sample_repo).items() if not k.startswith(".workflow/.queue")}

    before = outside_queue()
    up = UpCluster(pid=os.getpid(), broker_url=redis_url, workers=2, worker_settings=UpWorkerSettings())
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", "agent-cli {prompt_file}")
    with announced(sample_repo, up):
        assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
        err = capsys.readouterr().err
        assert "no executor is configured" in err and f"the workers of the `wfqueue up` of this repository " \
                                                      f"(pid {os.getpid()})" in " ".join(err.split()), err
        assert outside_queue() == before
    up_with_key = up.model_copy(update={"worker_settings": UpWorkerSettings(anthropic_key=True)})
    assert choose_executor(load_settings(), None, up_with_key) == "claude"
    assert choose_executor(load_settings(), None, up.model_copy(update={"worker_settings": None})) == "command"


@pytest.mark.parametrize(("variable", "value", "executor"), [
    # A program this machine has: one it lacks is refused before the question (never asked here).
    ("WFQUEUE_EXECUTOR_COMMAND", f"{sys.executable} -m aider --yes --message-file {{prompt_file}}", "command"),
    ("WFQUEUE_ANTHROPIC_API_KEY", "sk-test", "claude"),
])
def test_on_a_terminal_the_schedule_is_confirmed_first_and_declining_changes_nothing(
        variable: str, value: str, executor: str, sample_repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, value)
    committed(sample_repo)
    plan_session(sample_repo)
    head, branches, before = git(sample_repo, "rev-parse", "HEAD"), git(sample_repo, "branch", "-a"), \
        snapshot(sample_repo)
    asked: list[str] = []

    class _Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("rich.prompt.Confirm.ask", lambda text, **_: asked.append(text) or False)
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 0  # declined: as a plan cancelled, not failed
    err = capsys.readouterr().err
    assert asked == ["start these tasks?"]
    assert "WFS-test-session (workflow plan, 4 tasks): 2 waves" in err and "not started; nothing was written" in err
    assert "[notes_api/storage/db.py]" in err  # each task's files, in brackets: they were read as rich markup
    assert git(sample_repo, "rev-parse", "HEAD") == head and git(sample_repo, "branch", "-a") == branches
    assert snapshot(sample_repo) == before
    assert not (sample_repo / ".workflow" / ".execution").exists()


def test_ctrl_d_at_the_question_declines_it(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of input at "start these tasks?" was said as "interrupted" (exit 130): it answers no."""
    monkeypatch.setenv("WFQUEUE_EXECUTOR_COMMAND", f"{sys.executable} -m aider --message-file {{prompt_file}}")
    committed(sample_repo)
    plan_session(sample_repo)

    class _Terminal:
        def isatty(self) -> bool:
            return True

    def end_of_input(text: str, **_: object) -> bool:
        raise EOFError

    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("rich.prompt.Confirm.ask", end_of_input)
    assert main(["execute", SESSION, "--repo", str(sample_repo)]) == 0
    err = capsys.readouterr().err
    assert "not started; nothing was written" in err and "interrupted" not in err
    assert not (sample_repo / ".workflow" / ".execution").exists()
    # With --json, one object says so (stdout was empty).
    assert main(["execute", SESSION, "--repo", str(sample_repo), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["status"] == "cancelled" and said["plan"]["session_id"] == SESSION and said["plan"]["tasks"] == 4


def test_an_agent_plan_may_keep_its_tasks_in_task_files(sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = sample_repo / ".workflow" / ".planning" / "CPLAN-by-hand-2026-11-24"
    overview = {"summary": "s", "approach": "a", "task_ids": ["TASK-001", "TASK-002"], "task_count": 2,
                "_metadata": {"timestamp": "2026-11-24T08:00:00+00:00", "source": "other-tool",
                              "plan_type": "collaborative"}}
    atomic_write_json(folder / "agents" / "api" / "plan.json", overview)
    for n, depends in ((1, []), (2, [1])):
        data = {**task(n, f"Step {n}", ["notes_api/api/handlers.py"], depends=[]), "id": f"TASK-00{n}",
                "depends_on": [f"TASK-00{d}" for d in depends]}
        atomic_write_json(folder / "agents" / "api" / ".task" / f"TASK-00{n}.json", data)
    assert main(["execute", folder.name, "--repo", str(sample_repo), "--dry-run", "--json"]) in (0, None)
    payload = json.loads(capsys.readouterr().out)
    assert payload["plan"]["kind"] == "collab"
    assert [w["tasks"] for w in payload["waves"]] == [["TASK-001"], ["TASK-002"]]


def test_a_plan_still_being_planned_is_not_ready_for_validate_nor_execute(sample_repo: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A collab plan interrupted with one agent's plan in (its note still "planning", no conflicts detected) passed
    `validate` ("0 problems", or "depends on TASK-101, which no task has; fix the id or remove it") and ran; a lite
    plan interrupted before its tasks.jsonl was "no such file or folder". Both are not ready, saying to resume."""
    collab = sample_repo / ".workflow" / ".planning" / "CPLAN-half-done-2026-11-28"
    (collab / "plan-note.md").parent.mkdir(parents=True)
    (collab / "plan-note.md").write_text("---\nsession_id: CPLAN-half-done-2026-11-28\nstatus: planning\n---\n",
                                         encoding="utf-8")
    overview = {"summary": "s", "approach": "a", "task_ids": ["TASK-001"], "task_count": 1,
                "tasks": [{**task(1, "Step 1", ["notes_api/api/handlers.py"]), "id": "TASK-001",
                           "depends_on": ["TASK-101"]}]}
    atomic_write_json(collab / "agents" / "api" / "plan.json", overview)
    lite = sample_repo / ".workflow" / ".lite-plan" / "half-done-2026-11-28"
    lite.mkdir(parents=True)
    for target, said in ((collab.name, "CPLAN-half-done-2026-11-28 is still being planned"),
                         (str(collab), "CPLAN-half-done-2026-11-28 is still being planned"),
                         (lite.name, "half-done-2026-11-28 has no tasks.jsonl yet: its plan did not finish"),
                         (str(lite), "half-done-2026-11-28 has no tasks.jsonl yet"),
                         (str(lite / "tasks.jsonl"), "half-done-2026-11-28 has no tasks.jsonl yet")):
        assert main(["validate", target, "--repo", str(sample_repo), "--json"]) == 2, target
        (problem,) = json.loads(capsys.readouterr().out)["problems"]  # no task's problem beside it
        assert problem["code"] == "not_ready" and said in problem["message"], problem
        assert "wfqueue resume half-done-2026-11-28" in problem["message"] or \
            "wfqueue resume CPLAN-half-done-2026-11-28" in problem["message"], problem
        assert main(["execute", target, "--repo", str(sample_repo), "--dry-run"]) == 2, target
        assert said in " ".join(capsys.readouterr().err.split())
    # Once its callback has written the plan, the note says so and the plan is read.
    (collab / "plan-note.md").write_text("---\nsession_id: CPLAN-half-done-2026-11-28\nstatus: completed\n---\n",
                                         encoding="utf-8")
    assert main(["validate", collab.name, "--repo", str(sample_repo), "--json"]) == 2
    assert [p["code"] for p in json.loads(capsys.readouterr().out)["problems"]] == ["unknown_dependency"]


def test_continue_needs_a_known_execution_and_no_plan(sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["execute", "--repo", str(sample_repo)]) == 2
    assert "missing SESSION_OR_PLAN" in capsys.readouterr().err
    assert main(["execute", "--continue", "EXEC-nothing-2026-01-01", "--repo", str(sample_repo)]) == 2
    assert "no session EXEC-nothing-2026-01-01" in capsys.readouterr().err
    assert main(["execute", SESSION, "--continue", "EXEC-nothing-2026-01-01", "--repo", str(sample_repo)]) == 2
    assert "--continue takes an execution id, not a plan as well" in capsys.readouterr().err
    plan_session(sample_repo)  # a plan's id is not an execution to continue
    assert main(["execute", "--continue", SESSION, "--repo", str(sample_repo)]) == 2
    err = capsys.readouterr().err
    assert "that is a workflow session, not an execution" in err and f"wfqueue execute {SESSION}" in err


def test_a_session_its_verification_blocks_is_refused_until_reverified_or_forced(
        sample_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PLAN_VERIFICATION.md says "do not execute"; `execute` holds to it unless told --force."""
    committed(sample_repo)
    folder = make_session(sample_repo, "Add per-user rate limiting with quotas, audit trails and billing exports", [
        task(1, "Tidy the storage module", ["notes_api/storage/db.py"])])
    assert main(["verify", "--session", SESSION, "--repo", str(sample_repo)]) == 1
    capsys.readouterr()
    before = snapshot(sample_repo)
    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{SESSION}: its verification says BLOCK_EXECUTION - C1 IMPL_PLAN.md, workflow-session.json: tasks " \
           "cover" in err, err
    assert f"`wfqueue verify --session {SESSION} --repo {sample_repo}` again" in err and "--force" in err
    assert snapshot(sample_repo) == before and not (sample_repo / ".workflow" / ".execution").exists()

    assert main(["execute", SESSION, "--repo", str(sample_repo), "--dry-run"]) in (0, None)
    assert "verification: BLOCK_EXECUTION; execute refuses the plan without --force" in capsys.readouterr().out
    # Forced, the verdict no longer stops it: what stops it now is the next check (no executor configured).
    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y", "--force"]) == 2
    assert "no executor is configured" in capsys.readouterr().err

    # What an execution writes back into a task (its status, result, commit) is no change of the plan: still
    # refused as verified, with no word of a change (the files' times said there was one).
    impl = folder / ".task" / "IMPL-1.json"
    written_back = json.loads(impl.read_text())
    impl.write_text(json.dumps({**written_back, "status": "failed", "executed_at": "2026-11-26T09:00:00+00:00",
                                "result": {"success": False}, "attempts": 1}))
    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
    assert "changed after" not in capsys.readouterr().err
    # Tasks edited after the verification: its verdict may be out of date, and the hint says to verify again.
    impl.write_text(json.dumps({**written_back, "title": "Tidy the storage module and its indexes"}))
    assert main(["execute", SESSION, "--repo", str(sample_repo), "-y"]) == 2
    assert "its tasks changed after that verification" in " ".join(capsys.readouterr().err.split())
    assert main(["execute", SESSION, "--repo", str(sample_repo), "--dry-run", "--json"]) in (0, None)
    verdict = json.loads(capsys.readouterr().out)["verification"]
    assert verdict["quality_gate"] == "BLOCK_EXECUTION" and verdict["stale"] and verdict["critical"]
