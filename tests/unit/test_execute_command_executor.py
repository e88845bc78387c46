"""The command executor: the prompt as a file and on stdin, output kept, no agent outliving its worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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


def test_an_agent_dies_with_the_worker_process_that_ran_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    worker = ("import sys, pathlib; from wfqueue.execute.command_executor import CommandExecutor; "
              f"CommandExecutor(\"sh -c 'echo $$ > {pid_file}; exec sleep 120'\", 300, "
              f"pathlib.Path({str(tmp_path / 'exec')!r})).run('x', pathlib.Path({str(tmp_path)!r}), 'T1#1')")
    middle = subprocess.Popen([sys.executable, "-c", worker])
    agent = 0
    try:
        agent = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the agent started"))
        middle.send_signal(signal.SIGKILL)  # a worker process killed mid-task
        middle.wait()

        def gone() -> bool:
            try:
                state = (Path("/proc") / str(agent) / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                return True
            return state == "Z"

        wait_until(gone, 30, "the orphaned agent was killed")
    finally:
        if middle.poll() is None:
            middle.kill()
        if agent and not gone():
            os.kill(agent, signal.SIGKILL)  # this test's own orphan, should it have survived
    assert (tmp_path / "exec" / "T1-1.log").exists()
