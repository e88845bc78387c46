"""The embedded worker node of a plan command dies mid-plan: it is replaced and the plan completes.

Before wfqueue.node_keeper, a node killed by the out-of-memory killer (here: SIGKILL) left the command waiting
for tasks nobody ran: they stayed unacknowledged until the visibility timeout, an hour by default, and the
command waited as long.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from faults_support import check_collab_session, children, group_members
from support import FOUR_AREAS, wait_until, wfqueue_env, write_script

from wfqueue.sessions import queue_dir

pytestmark = pytest.mark.integration


def test_a_killed_embedded_node_is_replaced_and_the_plan_completes(sample_repo: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"  # the agents are held until the node is killed, however slow the machine
    provider = write_script(tmp_path / "script.json", hold={"plan_area:*": str(release)})
    plan = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", FOUR_AREAS, "--repo",
                             str(sample_repo), "--max-agents", "4", "--workers", "2", "-y", "--provider", provider,
                             "--json"], env=wfqueue_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    log = queue_dir(sample_repo) / "worker.log"
    try:
        # Killed while both its slots run an agent: it then waits on no message. A node killed at the instant
        # Redis hands it one (its BRPOP answered, the delivery not yet recorded as unacknowledged) loses that
        # message, which no requeue can find: kombu's Redis transport, docs/RELIABILITY.md.
        wait_until(lambda: log.is_file() and len(re.findall(r"plan_area\[[0-9a-f-]+\] received",
                                                            log.read_text(errors="replace"))) >= 2,
                   90, "two agents running")
        nodes = [pid for pid in children(plan.pid)
                 if b"workers.serve" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(nodes) == 1, nodes
        pool = children(nodes[0])
        os.kill(nodes[0], signal.SIGKILL)
        release.touch()  # the new node runs them to their end
        out, err = plan.communicate(timeout=180)  # not the visibility timeout (an hour)
    finally:
        if plan.poll() is None:
            plan.kill()
            plan.wait()
    assert plan.returncode == 0, err
    assert "the local worker node exited (killed by SIGKILL); started a new one" in err, err
    queued_again = re.search(r"(\d+) task\(s\) it had taken are queued again", err)
    assert queued_again and int(queued_again.group(1)) >= 1, err  # at once, not after the visibility timeout
    result = json.loads(out)
    assert result["status"] == "completed", result
    check = check_collab_session(Path(result["session_dir"]))
    assert len(check.areas) == 4 and check.sections_lost == [] and check.duplicate_tasks == [], check
    assert group_members(nodes[0]) == [] and not [p for p in pool if Path(f"/proc/{p}").exists()], \
        "the killed node's pool children outlived it"


def test_a_plan_whose_embedded_redis_was_killed_says_so_at_once_and_resume_finishes_it(sample_repo: Path,
                                                                                       tmp_path: Path) -> None:
    """The command's own Redis killed mid-plan (the out-of-memory killer): the command waited out the broker
    grace (40 s by default, here 600 s) for a Redis nothing would start again. It now stops as soon as it loses
    it, names the resume that finishes the plan, and that resume does."""
    release = tmp_path / "release"
    provider = write_script(tmp_path / "script.json", hold={"understand": str(release)})
    env = wfqueue_env(WFQUEUE_BROKER_OUTAGE_GRACE_S="600")
    plan = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", FOUR_AREAS, "--repo",
                             str(sample_repo), "--max-agents", "2", "-y", "--provider", provider], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        wait_until(Path(f"{release}.understand.held").exists, 90, "the understanding under way on the worker")
        redis_dir = str(queue_dir(sample_repo) / "redis")
        (server,) = [pid for pid in children(plan.pid) if os.readlink(f"/proc/{pid}/cwd") == redis_dir]
        os.kill(server, signal.SIGKILL)
        release.touch()
        _, err = plan.communicate(timeout=120)  # not the 600 s grace
    finally:
        if plan.poll() is None:
            plan.kill()
            plan.wait()
    said = " ".join(err.split())
    assert plan.returncode == 3, err
    session = re.search(r"wfqueue resume (CPLAN-[^\s`]+)", said)
    assert session is not None, said
    assert f"this command's embedded Redis exited while {session.group(1)} ran" in said, said
    assert "redis/redis.log" in said and "it starts Redis again" in said and "when Redis is back" not in said

    resumed = subprocess.run([sys.executable, "-m", "wfqueue.cli.main", "resume", session.group(1), "--repo",
                              str(sample_repo), "--json"], env=env, capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "completed", result
    assert (Path(result["session_dir"]) / "plan.md").is_file()
