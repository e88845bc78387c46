"""The wfqueue.execute.task task on a real embedded worker: the command executor runs in a worker's pool process,
its change is committed on the task's branch, and the user's checkout stays byte for byte as it was."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support import QuietUI

from tests.execute_support import (
    EXEC_ID,
    EXECUTOR_COMMAND,
    SUB,
    SUB_TEST,
    git,
    log_entries,
    make_repo,
    payload,
    snapshot,
    write_edits,
)
from tests.execute_support import task as make_task
from wfqueue.execute.model import TaskRun
from wfqueue.keys import task_run_key
from wfqueue.runtime import broker_runtime
from wfqueue.settings import load_settings
from wfqueue.state import SessionState

pytestmark = pytest.mark.integration


def test_a_task_runs_on_a_worker_and_leaves_the_users_checkout_untouched(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    exec_dir = repo / ".workflow" / ".execution" / EXEC_ID
    log = tmp_path / "executor.log"
    edits = write_edits(tmp_path / "edits.json", {"T1": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}})
    worker_env = {"WFQUEUE_EXECUTOR_COMMAND": EXECUTOR_COMMAND, "WFQUEUE_TEST_EDITS": str(edits),
                  "WFQUEUE_TEST_EXECUTOR_LOG": str(log),
                  "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    sent = payload(repo, exec_dir, make_task())
    with broker_runtime(load_settings(), repo, 1, QuietUI(), worker_env=worker_env) as runtime:
        run = TaskRun.model_validate(sent.send(runtime.app).get(timeout=120))
        assert run.status == "committed", run.error
        (entry,) = log_entries(log)
        # The executor's parent is the guard of its process group (wfqueue.group_runner), whose parent is a pool
        # process of the embedded worker, not this test.
        assert entry["ppid"] != os.getpid()
        (_, guard), (_, pool_process) = entry["ancestors"]
        assert "os.posix_spawnp" in guard and "workers.serve" in pool_process, entry["ancestors"]
        assert run.worker.startswith("wfq-")
        state = SessionState(runtime.client, EXEC_ID, ttl_s=3600)
        stored = state.recall(task_run_key("T1", 1))
        assert stored is not None and TaskRun.model_validate_json(stored) == run
        assert state.agent("T1")["state"] == "done"
        # Delivered again: the same result, and the executor did not run a second time.
        assert TaskRun.model_validate(sent.send(runtime.app).get(timeout=120)) == run
        assert len(log_entries(log)) == 1
    assert run.commit == git(repo, "rev-parse", sent.branch)
    assert sorted(run.files_changed) == ["calc/ops.py", "tests/test_sub.py"]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1  # the task's worktree is gone
    assert snapshot(repo) == before
