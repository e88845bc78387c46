"""The ``command`` executor: a user-configured agent CLI (``WFQUEUE_EXECUTOR_COMMAND``) run on one task.

The command is split like a shell would (``shlex``) but run without one; ``{prompt_file}`` in it becomes the path
of a file holding the prompt, and the prompt is also written to its stdin (``claude -p`` reads it there,
``aider --message-file {prompt_file}`` from the file). It runs inside the task's worktree, in its own process
group, killed with every child it started at ``executor_timeout_s``. Its output goes to a log file next to the
prompt file, in the execution folder (never the worktree: whatever lands there is committed).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
from pathlib import Path

from wfqueue.errors import ExecutorNotConfiguredError
from wfqueue.execute.executors import COMMAND_HOW, ExecutorName, ExecutorResult, choose_executor
from wfqueue.group_runner import find_program, output_tail, run_to_end
from wfqueue.settings import Settings
from wfqueue.up_cluster import UpCluster, serving_up

PROMPT_PLACEHOLDER = "{prompt_file}"
OUTPUT_LIMIT = 20_000  # characters of output handed back (the log file keeps all of it)
_KILL_GRACE_S = 5.0


def split_command(command: str | None) -> list[str]:
    """The executor command as an argument list, or ExecutorNotConfiguredError saying how to set it. Pure."""
    try:
        argv = shlex.split(command or "")
    except ValueError as exc:
        raise ExecutorNotConfiguredError(f"the executor command {command!r} cannot be split into arguments: {exc}",
                                         hint=COMMAND_HOW) from None
    if not argv:
        raise ExecutorNotConfiguredError("no executor command is configured", hint=COMMAND_HOW)
    return argv


def check_command_here(command: str | None) -> None:
    """Refuse an executor command whose program this machine does not have (for the embedded workers, which run
    here with this environment), before any branch or folder is made: every task failed with "could not
    start". A path relative to a folder is left alone (it is run from each task's worktree)."""
    program = split_command(command)[0]
    if "/" in program and not os.path.isabs(program):
        return
    if not find_program(program, Path.cwd()):
        raise ExecutorNotConfiguredError(
            f"the executor command's program {program!r} is not found or not executable",
            hint="install it on this machine (its workers run the tasks), or set WFQUEUE_EXECUTOR_COMMAND to an "
                 "agent CLI that is installed, e.g. 'claude -p'")


def usable_executor(settings: Settings, requested: ExecutorName | None, repo: Path,
                    requested_by: str | None = None) -> ExecutorName:
    """The executor that runs the tasks of an execution of ``repo`` (``choose_executor``), refused before anything
    is written when it is not configured where they run, or when the embedded workers, which run here, lack its
    program. A new execution and a continued one alike: every task failing on the workers is no way to say it."""
    up = serving_up(settings, repo)
    chosen = choose_executor(settings, requested, up, requested_by)
    check_where_it_runs(settings, chosen, up)
    return chosen


def check_where_it_runs(settings: Settings, chosen: ExecutorName, up: UpCluster | None) -> None:
    """Refuse the command executor whose program the embedded workers, which run here, lack."""
    if chosen == "command" and up is None and settings.embedded:  # its workers run here, with this environment
        check_command_here(settings.executor_command)


def _file_name(step: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", step).strip(".-") or "step"


class CommandExecutor:
    name: ExecutorName = "command"

    def __init__(self, command: str | None, timeout_s: float, work_dir: Path) -> None:
        """``work_dir``: where prompt and log files go (the execution folder's ``executor/``)."""
        self.argv = split_command(command)
        self.timeout_s = timeout_s
        self.work_dir = work_dir

    def log_path(self, step: str) -> Path:
        return self.work_dir / f"{_file_name(step)}.log"

    def run(self, prompt: str, worktree: Path, step: str) -> ExecutorResult:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        prompt_file = self.work_dir / f"{_file_name(step)}.prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        argv = [arg.replace(PROMPT_PLACEHOLDER, str(prompt_file)) for arg in self.argv]
        log = self.log_path(step)
        # The prompt is its stdin too, read from the file: a pipe written here held the worker while an agent that
        # never reads it ran, and its end could not be watched the way run_to_end watches it.
        with log.open("w+b") as output, prompt_file.open("rb") as stdin:
            try:
                code = run_to_end(argv, worktree, timeout_s=self.timeout_s, output=output, grace_s=_KILL_GRACE_S,
                                  stdin=stdin, stop_first=signal.SIGTERM)
            except OSError as exc:  # not found, not executable
                return ExecutorResult(ok=False, error=f"the executor command {argv[0]!r} could not start: {exc}")
            text = output_tail(output, OUTPUT_LIMIT)
        if code is None:  # its time limit passed
            return ExecutorResult(ok=False, output=text,
                                  error=f"the executor did not finish within {self.timeout_s:g}s and was stopped")
        if code != 0:
            last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
            return ExecutorResult(ok=False, output=text,
                                  error=f"the executor exited with status {code}"
                                        + (f": {last.strip()[:300]}" if last else ""))
        return ExecutorResult(ok=True, output=text)
