"""`wfqueue execute` end to end: the real CLI in a subprocess, embedded Redis and workers, real git repositories,
and the test executor program (tests/executor_program.py) applying the edits each test wrote per task."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import cli_process, kill_processes_mentioning, processes_mentioning, run_cli, wait_until, wfqueue_env

from tests.execute_support import EXECUTOR_COMMAND, cache, git, log_entries, snapshot, write_edits

pytestmark = [pytest.mark.integration, pytest.mark.long]

OPS = "def add(a, b):\n    return a + b\n"
SUB = OPS + "\n\ndef sub(a, b):\n    return a - b\n"
SUB_TEST = "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
WRONG_SUB = OPS + "\n\ndef sub(a, b):\n    return b - a\n"
SHARED_V1 = "def test_shared_one():\n    assert True\n"
SHARED_V2 = "def test_shared_two():\n    assert 1 + 1 == 2\n"
FAILING_TEST = "def test_extra():\n    assert False\n"


def project(root: Path) -> Path:
    repo = root / "repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "calc" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "calc" / "ops.py").write_text(OPS, encoding="utf-8")
    (repo / "calc" / "text.py").write_text("NAME = 'calc'\n", encoding="utf-8")
    (repo / "calc" / "extra.py").write_text("EXTRA = 1\n", encoding="utf-8")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_ops.py").write_text("from calc.ops import add\n\n\ndef test_add():\n"
                                                "    assert add(2, 3) == 5\n", encoding="utf-8")
    (repo / ".gitignore").write_text(".workflow/\n__pycache__/\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.name", "Repo Owner")
    git(repo, "config", "user.email", "owner@example.invalid")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    return repo


def lite_task(n: int, title: str, modify: list[str], create: list[str] | None = None,
              depends: list[int] | None = None, verification: str = "python -m pytest -q tests") -> dict[str, Any]:
    files = [{"path": f, "action": "modify"} for f in modify] + [{"path": f, "action": "create"}
                                                                   for f in create or []]
    return {"id": f"TASK-{n:03d}", "title": title, "description": f"{title}.", "type": "feature",
            "depends_on": [f"TASK-{d:03d}" for d in depends or []], "files": files,
            "convergence": {"criteria": [f"{title} works"], "verification": verification,
                            "definition_of_done": f"{title} is done"}}


def lite_plan(repo: Path, tasks: list[dict[str, Any]]) -> Path:
    tasks_file = repo / ".workflow" / ".lite-plan" / "calc-work-2026-01-01" / "tasks.jsonl"
    tasks_file.parent.mkdir(parents=True)
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return tasks_file


def env_for(tmp_path: Path, edits: dict[str, Any]) -> dict[str, str]:
    return wfqueue_env(WFQUEUE_EXECUTOR_COMMAND=EXECUTOR_COMMAND,
                       WFQUEUE_TEST_EDITS=str(write_edits(tmp_path / "edits.json", edits)),
                       WFQUEUE_TEST_EXECUTOR_LOG=str(tmp_path / "executor.log"),
                       PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def task_commits(repo: Path, branch: str, task_id: str) -> list[str]:
    """The non-merge commits on ``branch`` whose trailer names ``task_id``."""
    return [c for c in git(repo, "log", "--no-merges", "--format=%H", f"--grep=^Task: {task_id}$", branch,
                           "--not", "main").splitlines() if c]


def runs_of(log: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    return [e for e in log if e["task"] == task_id]


def test_waves_merges_a_conflict_a_failure_and_a_red_gate_then_continue(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [
        lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"], verification="python -m pytest -q tests"),
        lite_task(2, "Rename the package", ["calc/text.py"], ["tests/test_shared.py"]),
        lite_task(3, "Document add", ["calc/ops.py"], verification="python -m pytest -q tests/test_ops.py"),
        lite_task(4, "Add an extra", ["calc/extra.py"], ["tests/test_extra.py"]),
        lite_task(5, "Use the extra", ["calc/extra.py"], depends=[4]),
    ])
    before = snapshot(repo)
    env = env_for(tmp_path, {
        # TASK-001 also adds a test file TASK-002 creates: allowed (a new test file), and TASK-002's merge conflicts.
        "TASK-001": {"edits": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST, "tests/test_shared.py": SHARED_V1},
                     "sleep": 1.0},
        "TASK-002": {"edits": {"calc/text.py": "NAME = 'calculator'\n", "tests/test_shared.py": SHARED_V2},
                     "sleep": 1.0},
        # Writes ops.py as TASK-001 does, so it runs in the next wave; its own test passes, the gate's does not.
        "TASK-003": {"calc/ops.py": {"replace": ["return a - b", "return b - a"]}},
        "TASK-004": {"edits": {"calc/extra.py": "EXTRA = 2\n", "tests/test_extra.py": FAILING_TEST},
                     "fix_edits": {"calc/extra.py": "EXTRA = 3\n"}},
        "TASK-005": {"calc/extra.py": "EXTRA = 5\n"},
    })
    run = run_cli("execute", str(tasks_file), "--parallel", "3", "-y", "--json", env=env, timeout=300)
    assert run.code == 1, run.stderr
    result = run.json()
    exec_id, branch = result["exec_id"], result["branch"]
    assert branch == f"wfqueue/{exec_id}" and exec_id.startswith("EXEC-calc-work-2")
    assert result["status"] == "stopped", run.stderr
    assert "gate after wave 2 is red" in run.stderr and "TASK-003" in run.stderr
    assert "wfqueue execute --continue " + exec_id in run.stderr

    log = log_entries(tmp_path / "executor.log")
    one, two, three = runs_of(log, "TASK-001")[0], runs_of(log, "TASK-002")[0], runs_of(log, "TASK-003")[0]
    # Independent tasks ran at once, on different worker processes...
    assert one["start"] < two["end"] and two["start"] < one["end"]
    assert one["ancestors"][1][0] != two["ancestors"][1][0]  # the pool processes (the parents are their guards)
    # ...and the task writing the same file as TASK-001 started only after it ended.
    assert three["start"] >= one["end"]
    # TASK-002 conflicted on the new test file and was run again once on the new head, then merged.
    assert len(runs_of(log, "TASK-002")) == 2
    assert "TASK-002 conflict in tests/test_shared.py" in run.stderr
    # TASK-004's verification failed twice: it failed, and TASK-005 was skipped, never run.
    assert runs_of(log, "TASK-005") == []

    status = run_cli("status", exec_id, "--repo", str(repo), "--json", env=env)
    assert status.code == 0, status.stderr
    shown = status.json()
    assert [sorted(w) for w in shown["waves"]] == [["TASK-001", "TASK-002", "TASK-004"], ["TASK-003", "TASK-005"]]
    states = {t: r["state"] for t, r in shown["tasks"].items()}
    assert states == {"TASK-001": "completed", "TASK-002": "completed", "TASK-003": "completed",
                      "TASK-004": "failed", "TASK-005": "skipped"}
    assert shown["tasks"]["TASK-002"]["attempt"] == 2
    assert "TASK-004" in shown["tasks"]["TASK-005"]["reason"]
    table = run_cli("status", exec_id, "--repo", str(repo), env=env)  # as a person reads it
    assert table.code == 0, table.stderr
    for task_id, state in (("TASK-003", "completed"), ("TASK-004", "failed"), ("TASK-005", "skipped")):
        assert any(task_id in line and state in line for line in table.stdout.splitlines()), table.stdout
    assert f"wfqueue execute --continue {exec_id}" in table.stdout

    exec_dir = Path(result["exec_dir"])
    report = (exec_dir / "execution.md").read_text(encoding="utf-8")
    assert "| TASK-004 Add an extra | 1 | failed |" in report
    written = {json.loads(line)["id"]: json.loads(line) for line in tasks_file.read_text().splitlines()}
    assert written["TASK-001"]["_execution"]["status"] == "completed"
    assert written["TASK-005"]["_execution"]["status"] == "skipped"

    # The fixes: the integration branch, as a user would fix it (in a worktree of their own), and TASK-004's cause
    # (its executor now makes a change whose test passes). Then --continue.
    fix = tmp_path / "fix"
    git(repo, "worktree", "add", "-q", str(fix), branch)
    (fix / "calc" / "ops.py").write_text(SUB, encoding="utf-8")
    git(fix, "commit", "-qam", "fix sub")
    git(repo, "worktree", "remove", str(fix))
    write_edits(tmp_path / "edits.json", {"TASK-004": {"calc/extra.py": "EXTRA = 4\n"},
                                          "TASK-005": {"calc/extra.py": {"replace": ["EXTRA = 4", "EXTRA = 5"]}}})
    again = run_cli("execute", "--continue", exec_id, "--repo", str(repo), "--json", env=env, timeout=300)
    assert again.code == 0, again.stderr
    final = again.json()
    assert final["status"] == "completed"
    assert final["tasks"] == {"completed": ["TASK-001", "TASK-002", "TASK-003", "TASK-004", "TASK-005"],
                              "failed": [], "rejected": [], "skipped": [], "blocked": [], "pending": []}
    assert "gate after wave 2 passed" in again.stderr
    assert "TASK-004 runs again as attempt 2 (before: failed, " in again.stderr
    # The failed task ran again as a new attempt, then the task it had skipped; the completed ones never ran again.
    rerun = log_entries(tmp_path / "executor.log")[len(log):]
    assert [e["task"] for e in rerun] == ["TASK-004", "TASK-005"]
    assert rerun[0]["cwd"].endswith("TASK-004/2")

    for task_id in ("TASK-001", "TASK-002", "TASK-003", "TASK-004", "TASK-005"):
        assert len(task_commits(repo, branch, task_id)) == 1, task_id
    assert git(repo, "show", f"{branch}:calc/extra.py") == "EXTRA = 5"
    report = (exec_dir / "execution.md").read_text(encoding="utf-8")
    assert f"git merge {branch}" in report and "| TASK-004 Add an extra | 1 | completed | 2 |" in report
    assert "gate after wave 2 is red" in (exec_dir / "execution-events.md").read_text(encoding="utf-8")
    written = {json.loads(line)["id"]: json.loads(line) for line in tasks_file.read_text().splitlines()}
    assert written["TASK-005"]["_execution"]["status"] == "completed"
    # The user's branch, HEAD, index and files are as they were. The only worktree left is the failed attempt's,
    # which holds its uncommitted change, and it is named.
    assert snapshot(repo) == before
    (kept,) = [line.split(" ", 1)[1] for line in git(repo, "worktree", "list", "--porcelain").splitlines()
               if line.startswith("worktree ") and line.split(" ", 1)[1] != str(repo)]
    assert "TASK-004" in kept and f"kept in {kept}" in shown["tasks"]["TASK-004"]["reason"]
    # and how to remove it once it is no longer needed: once in the events (each later run named it again), and
    # in the report for as long as it is there.
    events = (exec_dir / "execution-events.md").read_text(encoding="utf-8")
    assert events.count(f"git worktree remove --force {kept}") == 1, events
    assert "## Worktrees kept" in report and f"- `git worktree remove --force {kept}`" in report
    assert processes_mentioning(str(repo / ".workflow" / ".queue")) == []


def test_continue_with_parallel_runs_at_most_that_many_tasks_at_once(tmp_path: Path) -> None:
    """`execute --continue EXEC --parallel 1` (fewer agents at once, say after a rate limit) ran the cap the
    execution started with, saying nothing."""
    repo = project(tmp_path)
    files = {1: "calc/ops.py", 2: "calc/text.py", 3: "calc/extra.py"}
    kept = {"calc/ops.py": OPS, "calc/text.py": "NAME = 'calc'\n", "calc/extra.py": "EXTRA = 1\n"}
    tasks_file = lite_plan(repo, [lite_task(n, f"Mark {path}", [path]) for n, path in files.items()])
    env = env_for(tmp_path, {f"TASK-{n:03d}": {"edits": {path: kept[path] + "X = 1\n"}, "exit": 3}
                             for n, path in files.items()})
    first = run_cli("execute", str(tasks_file), "--parallel", "3", "-y", "--json", env=env, timeout=300)
    assert first.code == 1 and first.json()["tasks"]["failed"] == ["TASK-001", "TASK-002", "TASK-003"], first.stderr
    exec_id, ran = first.json()["exec_id"], len(log_entries(tmp_path / "executor.log"))
    write_edits(tmp_path / "edits.json", {f"TASK-{n:03d}": {"edits": {path: kept[path] + "X = 2\n"}, "sleep": 0.5}
                                          for n, path in files.items()})
    again = run_cli("execute", "--continue", exec_id, "--repo", str(repo), "--parallel", "1", "--json", env=env,
                    timeout=300)
    assert again.code == 0 and again.json()["status"] == "completed", again.stderr
    assert "at most 1 task(s) at once from now on (--parallel)" in again.stderr
    runs = sorted(log_entries(tmp_path / "executor.log")[ran:], key=lambda entry: entry["start"])
    assert len(runs) == 3 and all(later["start"] >= earlier["end"] for earlier, later in itertools.pairwise(runs)), runs
    recorded = json.loads((Path(first.json()["exec_dir"]) / "execution.json").read_text(encoding="utf-8"))
    assert recorded["parallel"] == 1 and len(recorded["waves"]) == 3


def test_a_killed_coordinator_resumes_without_a_duplicate_commit(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [
        lite_task(1, "Add sub slowly", ["calc/ops.py"], ["tests/test_sub.py"]),
        lite_task(2, "Rename the package", ["calc/text.py"]),
        lite_task(3, "Raise the extra", ["calc/extra.py"]),
    ])
    env = env_for(tmp_path, {"TASK-001": {"edits": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}, "sleep": 4},
                             "TASK-002": {"calc/text.py": "NAME = 'calculator'\n"},
                             # Also writes a file its task does not name: rejected, not merged.
                             "TASK-003": {"calc/extra.py": "EXTRA = 3\n", "notes.txt": "mine\n"}})
    before = snapshot(repo)
    (repo / "stray.txt").write_text("not committed\n", encoding="utf-8")
    refused = run_cli("execute", str(tasks_file), "-y", env=env)
    assert refused.code == 2 and "stray.txt" in refused.stderr
    (repo / "stray.txt").unlink()
    assert not (repo / ".workflow" / ".execution").exists()

    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "execute", str(tasks_file), "-y"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    root = repo / ".workflow" / ".execution"

    def committed_not_merged() -> str | None:
        # TASK-002 has its commit while the coordinator still waits for TASK-001 (sent first: it is slower to
        # come back, and results are merged in wave order).
        folders = list(root.glob("EXEC-*")) if root.is_dir() else []
        if not folders:
            return None
        exec_id = folders[0].name
        done = subprocess.run(["git", "-C", str(repo), "log", "--format=%H", f"wfqueue/tasks/{exec_id}/TASK-002",
                               "--not", "main"], capture_output=True, text=True, check=False).stdout.strip()
        return exec_id if done else None

    exec_id = wait_until(committed_not_merged, 120, "TASK-002 committed")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kill_processes_mentioning(str(repo / ".workflow" / ".queue"))

    # `wfqueue resume` goes on with an execution as `wfqueue execute --continue` does, and says what it says (it
    # printed a plan's "N tasks, 0 conflicts", its --json a plan's fields).
    again = run_cli("resume", exec_id, "--repo", str(repo), "--json", env=env, timeout=300)
    assert again.code == 1, again.stderr
    assert again.json()["exec_id"] == exec_id and again.json()["status"] == "partial"
    assert again.json()["tasks"]["completed"] == ["TASK-001", "TASK-002"]  # TASK-003 was rejected
    assert "TASK-003 rejected, not merged: it changes notes.txt (added)" in again.stderr
    # The report does not send its reader to itself ("see execution.md for why" read there).
    report = (root / exec_id / "execution.md").read_text(encoding="utf-8")
    assert "did not complete (see the tasks above for why)" in report and "see execution.md" not in report
    branch = f"wfqueue/{exec_id}"
    assert task_commits(repo, branch, "TASK-003") == []
    assert len(task_commits(repo, branch, "TASK-001")) == 1
    assert len(task_commits(repo, branch, "TASK-002")) == 1
    assert len(runs_of(log_entries(tmp_path / "executor.log"), "TASK-002")) == 1, "TASK-002 ran twice"
    assert git(repo, "show", f"{branch}:calc/text.py") == "NAME = 'calculator'"
    assert snapshot(repo) == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_ctrl_c_stops_the_execution_and_leaves_no_worktree(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub slowly", ["calc/ops.py"], ["tests/test_sub.py"])])
    env = env_for(tmp_path, {"TASK-001": {"edits": {"calc/ops.py": SUB}, "sleep": 60}})
    before = snapshot(repo)
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "execute", str(tasks_file), "-y", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    worktrees = cache() / "worktrees"  # {host}/{repo}-{hash}/ below it
    wait_until(lambda: list(worktrees.glob("*/*/EXEC-*/TASK-001/1")), 120, "the task's worktree")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    exec_dir = next((repo / ".workflow" / ".execution").iterdir())
    assert json.loads((exec_dir / "execution.json").read_text())["status"] == "interrupted"
    # The --json object says how to finish it, as stderr does (its hint was null).
    stopped = json.loads(out)
    assert stopped["status"] == "interrupted" and stopped["session_id"] == exec_dir.name
    assert f"wfqueue execute --continue {exec_dir.name} --repo {repo}" in stopped["hint"], stopped
    assert f"wfqueue execute --continue {exec_dir.name}" in (exec_dir / "execution.md").read_text()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1, err
    assert snapshot(repo) == before
    assert processes_mentioning(str(repo / ".workflow" / ".queue")) == []


@pytest.mark.parametrize("shared_disk", [True, False], ids=["shared-disk", "no-shared-disk"])
def test_a_project_in_a_subfolder_of_its_repository_executes_there(tmp_path: Path, shared_disk: bool) -> None:
    """The plan's paths are relative to the project, not to the git repository around it; without the shared
    disk the worker has only its cache's bare repository, so the project's place must travel with the task."""
    mono = tmp_path / "mono"
    repo = project(tmp_path)
    mono.mkdir()
    (mono / "README").write_text("two projects\n", encoding="utf-8")
    os.rename(repo / ".git", mono / ".git")  # the project's history, now one folder down in a larger repository
    os.rename(repo, mono / "calc-project")
    repo = mono / "calc-project"
    git(mono, "add", "-A")
    git(mono, "commit", "-qm", "the project moves into a subfolder")
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}})
    cache = tmp_path / "worker-cache"
    env.update(WFQUEUE_SHARED_DISK=str(shared_disk).lower(), WFQUEUE_WORKER_CACHE_DIR=str(cache))
    before = snapshot(repo)

    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=240)

    assert run.code == 0, run.stderr
    outcome = run.json()
    assert outcome["status"] == "completed" and outcome["tasks"]["completed"] == ["TASK-001"], run.stderr
    changed = git(mono, "diff", "--name-only", f"main...{outcome['branch']}").splitlines()
    assert sorted(changed) == ["calc-project/calc/ops.py", "calc-project/tests/test_sub.py"]
    assert "def sub" in git(mono, "show", f"{outcome['branch']}:calc-project/calc/ops.py")
    assert snapshot(repo) == before and git(mono, "status", "--porcelain") == ""  # the user's checkout as it was
    # Which way the repository reached the agent: in place, or through Redis into the worker's own cache.
    assert (cache / "git").is_dir() is not shared_disk
    # From inside the project, the execution is found without --repo (the git repository's top has no sessions).
    status = run_cli("status", outcome["exec_id"], env=env, cwd=repo / "calc")
    assert status.code == 0 and "TASK-001" in status.stdout, status.stderr


MUL = "def mul(a, b):\n    return a * b\n"
MUL_TEST = "from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


def test_a_task_extends_a_module_the_task_it_depends_on_creates(tmp_path: Path) -> None:
    """"TASK-001 creates calc/mul.py; TASK-002, after it, extends it" was refused before anything ran: the file
    to modify was looked for in the repository only. It executes now, TASK-002 in the wave after its creator's
    merge, so its worktree holds the new module."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [
        lite_task(1, "Add mul", [], ["calc/mul.py", "tests/test_mul.py"]),
        lite_task(2, "Add a square to mul", ["calc/mul.py"], depends=[1]),
    ])
    env = env_for(tmp_path, {
        "TASK-001": {"calc/mul.py": MUL, "tests/test_mul.py": MUL_TEST},
        "TASK-002": {"calc/mul.py": {"replace": ["return a * b\n", "return a * b\n\n\ndef square(a):\n"
                                                                   "    return mul(a, a)\n"]}},
    })

    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=240)

    assert run.code == 0, run.stderr
    outcome = run.json()
    assert outcome["status"] == "completed" and outcome["tasks"]["completed"] == ["TASK-001", "TASK-002"]
    merged = git(repo, "show", f"{outcome['branch']}:calc/mul.py")
    assert "def mul" in merged and "def square" in merged
    log = log_entries(tmp_path / "executor.log")
    assert runs_of(log, "TASK-002")[0]["start"] >= runs_of(log, "TASK-001")[0]["end"]


def test_a_wave_whose_tasks_have_only_manual_checks_is_gated_by_the_plans_own_checks(tmp_path: Path) -> None:
    """The gate after a wave ran only the merged tasks' checks: with manual ones only, none ran, a change that
    broke the package was merged untested, and the next task failed for it. The plan's checks that can run on
    the merged tree gate the wave, and it stops there."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [
        lite_task(1, "Tidy ops", ["calc/ops.py"], verification="manual: read the module"),
        lite_task(2, "Rename the package", ["calc/text.py"], depends=[1]),
    ])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": "raise ImportError('broken by TASK-001')\n"},
                             "TASK-002": {"calc/text.py": "NAME = 'calculator'\n"}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=240)
    assert run.code == 1, run.stderr
    assert run.json()["status"] == "stopped", run.stderr
    said = " ".join(run.stderr.split())
    assert "gate after wave 1: python -m pytest -q tests" in said and "gate after wave 1 is red" in said, said
    assert runs_of(log_entries(tmp_path / "executor.log"), "TASK-002") == []  # stopped before the next wave


def test_a_sparse_checkouts_plan_executes_in_whole_worktrees_and_the_users_cone_stays(tmp_path: Path) -> None:
    """From a sparse checkout (`git sparse-checkout set calc`), each worktree took the user's cone: the agent
    could not open tests/test_ops.py, the verification found no conftest, and a plan naming a tracked file
    outside the cone was refused as naming a file that "does not exist"."""
    repo = project(tmp_path)
    git(repo, "sparse-checkout", "set", "calc")
    assert not (repo / "tests").exists()
    tasks_file = lite_plan(repo, [
        lite_task(1, "Add sub", ["calc/ops.py", "tests/test_ops.py"]),
    ])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB,
                                          "tests/test_ops.py": {"replace": ["def test_add():",
                                                                            "from calc.ops import sub\n\n\n"
                                                                            "def test_sub():\n"
                                                                            "    assert sub(5, 3) == 2\n\n\n"
                                                                            "def test_add():"]}}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=240)
    assert run.code == 0, run.stderr
    outcome = run.json()
    assert outcome["status"] == "completed", run.stderr
    assert "def test_sub" in git(repo, "show", f"{outcome['branch']}:tests/test_ops.py")
    assert git(repo, "sparse-checkout", "list").split() == ["calc"] and not (repo / "tests").exists()


def test_an_integration_branch_deleted_while_the_execution_runs_ends_it_with_one_clear_word(tmp_path: Path) -> None:
    """`git update-ref -d` of the integration branch mid-run: every task's merge failed with git's "Non-fast-forward
    commit does not make sense into an empty head", the run said to finish it with --continue (which then
    refused: the branch is gone), ended on a traceback-like git error (exit 3) and left its worktree registered."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    release = tmp_path / "release"
    env = env_for(tmp_path, {"TASK-001": {"edits": {"calc/text.py": "NAME = 'calculator'\n"},
                                          "wait_for": str(release)}})
    with cli_process("execute", str(tasks_file), "-y", "--json", env=env) as proc:
        worktrees = cache() / "worktrees"  # {host}/{repo}-{hash}/ below it
        wait_until(lambda: any(worktrees.glob("*/*/EXEC-*/TASK-001/*/calc")), 120, "TASK-001's worktree made")
        (branch,) = [b for b in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/wfqueue").split()
                     if "/tasks/" not in b]
        git(repo, "update-ref", "-d", branch)
        release.touch()
        _, err = proc.communicate(timeout=240)
    said = " ".join(err.split())
    assert proc.returncode == 2, err
    assert f"the integration branch {branch.removeprefix('refs/heads/')} was deleted while" in said, said
    assert "--continue" not in said and "wfqueue execute " in said.split("hint:")[-1], said
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1  # the checkout's own


def test_an_integration_branch_moved_while_the_execution_runs_stops_it_and_continue_goes_on_once_put_back(
        tmp_path: Path) -> None:
    """`git update-ref` of the integration branch to another commit mid-run: `status` still said TASK-001 was merged
    (the branch no longer held it), TASK-002's merge failed on "local changes would be overwritten", and every
    `--continue` ran TASK-002's agent again and failed the same way."""
    repo = project(tmp_path)
    start = git(repo, "rev-parse", "HEAD")
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"]),
                                  lite_task(2, "Add sub", ["calc/ops.py"], depends=[1])])
    release = tmp_path / "release"
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"},
                             "TASK-002": {"edits": {"calc/ops.py": SUB}, "wait_for": str(release)}})
    with cli_process("execute", str(tasks_file), "-y", "--json", env=env) as proc:
        worktrees = cache() / "worktrees"  # {host}/{repo}-{hash}/ below it
        wait_until(lambda: any(worktrees.glob("*/*/EXEC-*/TASK-002/*/calc")), 120, "TASK-002's worktree made")
        (branch,) = [b for b in git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/wfqueue").split()
                     if "/tasks/" not in b]
        merged = git(repo, "rev-parse", branch)
        git(repo, "update-ref", branch, start)  # "reset" by hand, while the execution goes on
        release.touch()
        _, err = proc.communicate(timeout=240)
    said = " ".join(err.split())
    assert proc.returncode == 2, err
    assert f"the integration branch {branch.removeprefix('refs/heads/')} was moved while" in said, said
    assert f"git update-ref {branch} {merged}" in said, said
    git(repo, "update-ref", branch, merged)  # put back, as the hint says
    exec_id = branch.rsplit("/", 1)[-1]
    again = run_cli("execute", "--continue", exec_id, "--repo", str(repo), "--json", env=env, timeout=240)
    assert again.code == 0, again.stderr
    assert again.json()["status"] == "completed"
    assert git(repo, "show", f"{branch}:calc/text.py") == "NAME = 'calculator'"
    assert "def sub" in git(repo, "show", f"{branch}:calc/ops.py")


def test_a_completed_executions_branch_merged_and_deleted_is_not_named_to_merge_again(tmp_path: Path) -> None:
    """Once a user merged the integration branch and deleted it, as one does after a review, `status` and
    `execute --continue` still said to `git merge` it: a branch that no longer exists. They say that nothing is
    left to do; a branch deleted unmerged is named with the command that brings it back."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=240)
    assert run.code == 0, run.stderr
    exec_id, branch = run.json()["exec_id"], run.json()["branch"]
    assert f"git merge {branch}" in run.json()["hint"]

    git(repo, "branch", "-D", branch)  # deleted unmerged: the hint says how to get it back
    status = run_cli("status", exec_id, "--repo", str(repo), env=env)
    said = " ".join(status.stdout.split())
    assert status.code == 0 and "git merge" not in said, said
    back = said.split("`git branch ")[1].split("`")[0]
    git(repo, *["branch", *back.split()])
    assert git(repo, "show", f"{branch}:calc/text.py") == "NAME = 'calculator'"

    git(repo, "merge", "-q", "--no-edit", branch)
    git(repo, "branch", "-d", branch)
    for command in (["status", exec_id], ["execute", "--continue", exec_id]):
        again = run_cli(*command, "--repo", str(repo), env=env, timeout=240)
        said = " ".join((again.stdout + again.stderr).split())
        assert again.code == 0, said
        assert "Nothing is left to do" in said and f"`{branch}` was merged into your branch" in said, said
        assert "git merge" not in said, said
    assert "Nothing is left to do" in (Path(run.json()["exec_dir"]) / "execution.md").read_text(encoding="utf-8")


def test_a_plan_committed_in_the_checkout_is_not_written_into_and_runs_again(tmp_path: Path) -> None:
    """A tasks.jsonl kept in the repository (plans/tasks.jsonl, committed) got each task's state written into it: the
    checkout the execution promises not to touch was dirty, and running the plan again was refused for it."""
    repo = project(tmp_path)
    tasks_file = repo / "plans" / "tasks.jsonl"
    tasks_file.parent.mkdir()
    tasks_file.write_text(json.dumps(lite_task(1, "Add sub", ["calc/ops.py"])) + "\n", encoding="utf-8")
    git(repo, "add", "plans")
    git(repo, "commit", "-qm", "the plan")
    committed = tasks_file.read_bytes()
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB}})
    first = run_cli("execute", str(tasks_file), "--repo", str(repo), "-y", "--json", env=env, timeout=240)
    assert first.code == 0 and first.json()["status"] == "completed", first.stderr
    assert tasks_file.read_bytes() == committed
    assert git(repo, "status", "--porcelain") == ""
    assert "git tracks it in your checkout" in " ".join(first.stderr.split())
    again = run_cli("execute", str(tasks_file), "--repo", str(repo), "-y", "--json", env=env, timeout=240)
    assert again.code == 0, again.stderr  # it was refused: "your working tree is not clean"
