"""A worker process SIGKILLed while it runs a task of an execution: the task is delivered again, runs on another
process, and the execution ends with every task merged once."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from support import cli_process, parent_of, processes_mentioning, wait_until
from test_execute_run import OPS, SUB, SUB_TEST, env_for, lite_plan, lite_task, project, runs_of, task_commits

from tests.execute_support import EXECUTOR_PROGRAM, git, log_entries, snapshot

pytestmark = [pytest.mark.integration, pytest.mark.long]


def test_a_worker_killed_mid_task_leaves_one_merged_commit_per_task(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [
        lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"]),
        lite_task(2, "Rename the package", ["calc/text.py"]),
    ])
    env = env_for(tmp_path, {"TASK-001": {"edits": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}, "sleep": 6},
                             "TASK-002": {"calc/text.py": "NAME = 'calculator'\n"}})
    before = snapshot(repo)
    with cli_process("execute", str(tasks_file), "-y", "--json", env=env) as proc:
        def running_agent() -> list[int]:
            # The executor program of TASK-001, sleeping inside the task's worktree: its parent is the guard of
            # its process group, whose parent is the worker's pool process that runs the task.
            return [int(line.split(":")[0]) for line in processes_mentioning(str(EXECUTOR_PROGRAM))
                    if "TASK-001" in _cwd(int(line.split(":")[0]))]

        agent = wait_until(running_agent, 120, "TASK-001's executor running")[0]
        guard = parent_of(agent)
        pool_process = parent_of(guard)
        os.kill(pool_process, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)

    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "completed" and sorted(result["tasks"]["completed"]) == ["TASK-001", "TASK-002"]
    branch = result["branch"]
    assert len(task_commits(repo, branch, "TASK-001")) == 1
    assert len(task_commits(repo, branch, "TASK-002")) == 1
    assert git(repo, "show", f"{branch}:calc/ops.py") == SUB.strip() != OPS.strip()
    # The killed run never finished (its agent died with its worker); the task finished on another process.
    finished = runs_of(log_entries(tmp_path / "executor.log"), "TASK-001")
    assert len(finished) == 1 and finished[0]["ancestors"][1][0] != pool_process
    assert snapshot(repo) == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert processes_mentioning(str(repo / ".workflow" / ".queue")) == []


def _cwd(pid: int) -> str:
    """The folder ``pid`` runs in; "" once it has ended (another test's executor may end between the listing and
    this read)."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except FileNotFoundError:
        return ""
