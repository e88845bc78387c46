"""A plan's workers are stopped warm: an agent running when its command is stopped gets the grace period to
finish, instead of dying at once.

The stop sent SIGTERM to the worker node's whole process group, so the prefork pool's processes got it too and
every running agent died mid-step (`WorkerLostError`, "exited with 'signal 15'"), its work thrown away, though
the code meant Celery's warm shutdown. The same stop ends `wfqueue up` (Ctrl-C) and an embedded plan command.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from support import FOUR_AREAS, cli_process, run_cli, wait_until, wfqueue_env, write_script

from wfqueue.sessions import queue_dir

pytestmark = pytest.mark.integration


def test_agents_running_when_the_plan_is_stopped_finish_within_the_grace_period(sample_repo: Path,
                                                                                tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", latency_s=1.0)
    log = queue_dir(sample_repo) / "worker.log"
    with cli_process("collab-plan", FOUR_AREAS, "--repo", str(sample_repo), "--max-agents", "2", "--workers", "2",
                     "-y", "--provider", provider, "--json") as plan:
        # Both agents (two slots, --max-agents 2) handed to the pool: an agent still queued at the stop is not
        # one this test is about (it is left for the resume).
        wait_until(lambda: log.is_file() and len(re.findall(r"plan_area\[[0-9a-f-]+\] received",
                                                            log.read_text(errors="replace"))) >= 2,
                   90, "both agents running")
        plan.send_signal(signal.SIGINT)
        _, err = plan.communicate(timeout=120)
    assert plan.returncode == 130, err
    worker_log = log.read_text(errors="replace")
    assert "signal 15" not in worker_log and "WorkerLostError" not in worker_log, worker_log[-2000:]
    (session,) = (sample_repo / ".workflow" / ".planning").iterdir()
    shown = run_cli("status", session.name, "--repo", str(sample_repo), "--json", env=wfqueue_env())
    agents = shown.json()["agents"]
    assert agents and all(a["state"] == "done" and a["tasks"] > 0 for a in agents), agents
