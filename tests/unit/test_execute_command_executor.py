"""The command executor: the prompt as a file and on stdin, output kept, no agent outliving its worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.support import wait_until
from wfqueue.execute.command_executor import CommandExecutor

ECHO = ("import sys, pathlib; print('file:', pathlib.Path(sys.argv[1]).read_text().strip()); "
        "print('stdin:', sys.stdin.read().strip()); print('cwd:', pathlib.Path.cwd().name)")


def test_prompt_file_and_stdin_reach_the_command_run_inside_the_worktree(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    executor = CommandExecutor(f"{sys.executable} -c \"{ECHO}\" {{prompt_file}}", 30, tmp_path / "exec")
    result = executor.run("do T1", worktree, "T1#1")
    assert result.ok, result.error
    assert result.output.splitlines() == ["file: do T1", "stdin: do T1", "cwd: wt"]
    assert executor.log_path("T1#1").read_text(encoding="utf-8") == result.output
    assert list(worktree.iterdir()) == []  # prompt and log live in the execution folder


def process_gone(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.parametrize("agent", ["echo $$ > {pid}; exec sleep 120", "sleep 120 & echo $! > {pid}; wait"],
                         ids=["the-agent", "a-process-the-agent-started"])
def test_an_agent_dies_with_the_worker_process_that_ran_it(tmp_path: Path, agent: str) -> None:
    """The kernel tells the worker's direct child of its death, not that child's own children: an agent CLI's
    subprocess went on editing the worktree after a SIGKILL of its worker, and the task's next run merged its
    edits with its own."""
    pid_file = tmp_path / "agent.pid"
    script = agent.format(pid=pid_file)
    worker = ("import sys, pathlib; from wfqueue.execute.command_executor import CommandExecutor; "
              f"CommandExecutor(\"sh -c '{script}'\", 300, "
              f"pathlib.Path({str(tmp_path / 'exec')!r})).run('x', pathlib.Path({str(tmp_path)!r}), 'T1#1')")
    middle = subprocess.Popen([sys.executable, "-c", worker])
    running = 0
    try:
        running = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the agent started"))
        middle.send_signal(signal.SIGKILL)  # a worker process killed mid-task
        middle.wait()
        wait_until(lambda: process_gone(running), 30, "the orphaned agent was killed")
    finally:
        if middle.poll() is None:
            middle.kill()
        if running and not process_gone(running):
            os.kill(running, signal.SIGKILL)  # this test's own orphan, should it have survived
    assert (tmp_path / "exec" / "T1-1.log").exists()


def test_what_an_agent_left_running_when_it_exited_is_stopped_with_it(tmp_path: Path) -> None:
    """An agent that started a background job and exited: the task was committed while the job still wrote into
    the worktree (only a stop after a time limit reached the agent's group)."""
    pid_file = tmp_path / "job.pid"
    executor = CommandExecutor(f"sh -c 'sleep 120 & echo $! > {pid_file}'", 30, tmp_path / "exec")
    try:
        assert executor.run("x", tmp_path, "T1#1").ok
        left = int(pid_file.read_text().strip())
        assert process_gone(left) or wait_until(lambda: process_gone(left), 5, "the job was stopped")
    finally:
        if pid_file.exists() and not process_gone(int(pid_file.read_text().strip())):
            os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
