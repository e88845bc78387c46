"""Which executor runs a plan's tasks, and refusing when none is configured (``--dry-run`` needs none).

``command`` runs the agent CLI of ``WFQUEUE_EXECUTOR_COMMAND``; ``claude`` needs an Anthropic API key.
Without ``--executor`` the configured command wins, then the API key. Pure: decided from the settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel

from wfqueue.errors import ExecutorNotConfiguredError
from wfqueue.settings import Settings
from wfqueue.up_cluster import UpCluster

ExecutorName = Literal["claude", "command"]

COMMAND_HOW = ("set WFQUEUE_EXECUTOR_COMMAND to an agent CLI, e.g. WFQUEUE_EXECUTOR_COMMAND='claude -p' "
               "({prompt_file} in it is replaced by the prompt's path; the prompt is also on its stdin)")
CLAUDE_HOW = "set ANTHROPIC_API_KEY (or WFQUEUE_ANTHROPIC_API_KEY)"
DRY_RUN = "`wfqueue execute ... --dry-run` shows the schedule without an executor"


class ExecutorResult(BaseModel):
    """How one executor run ended. Its edits are whatever it left in the worktree; the caller commits."""

    ok: bool
    output: str = ""  # what it printed or said, kept in the execution folder
    error: str | None = None  # why it did not finish (timeout, exit status, a refused tool call...)


class Executor(Protocol):
    """A coding agent: make the change ``prompt`` asks for inside ``worktree`` and nowhere else."""

    name: ExecutorName

    def run(self, prompt: str, worktree: Path, step: str) -> ExecutorResult:
        """``step`` names this run (``{task id}#{attempt}``): a durable executor saves its turns under it,
        so a redelivered task continues the conversation instead of paying for it again."""
        ...


def choose_executor(settings: Settings, requested: ExecutorName | None, up: UpCluster | None = None,
                    requested_by: str | None = None) -> ExecutorName:
    """The executor, from ``requested`` (by ``requested_by``, the option by default) or what is configured.
    Where a `wfqueue up` serves the repository (``up``), its workers run the tasks with the settings they started
    with: those decide. Workers behind a broker URL read their own settings, which this machine cannot see: an
    executor asked for by name is not second-guessed there (a worker without it fails the task saying so)."""
    shared_broker = up is None and not settings.embedded
    if requested is not None and shared_broker:
        return requested
    if up is not None and up.worker_settings is not None:
        command, has_key = up.worker_settings.executor_command, up.worker_settings.anthropic_key
        where = (f"; the tasks run on the workers of {up.named()}, which read their settings when it started: "
                 "set it where up runs and start up again")
    else:
        command, has_key, where = settings.executor_command, settings.has_anthropic_credentials(), ""
    has_command = bool(command and command.strip())
    asked = requested_by or f"--executor {requested}"
    if requested == "command" and not has_command:
        raise ExecutorNotConfiguredError(f"{asked} needs an executor command, and none is configured",
                                         hint=f"{COMMAND_HOW}{where}; {DRY_RUN}")
    if requested == "claude" and not has_key:
        raise ExecutorNotConfiguredError(f"{asked} needs an Anthropic API key, and none is configured",
                                         hint=f"{CLAUDE_HOW}{where}, or use --executor command: {COMMAND_HOW}; "
                                              f"{DRY_RUN}")
    if requested is not None:
        return requested
    if has_command:
        return "command"
    if has_key:
        return "claude"
    if shared_broker:
        where += ("; the workers behind WFQUEUE_BROKER_URL read their own settings: if theirs name one, pass "
                  "--executor command or --executor claude")
    raise ExecutorNotConfiguredError("no executor is configured to run the tasks",
                                     hint=f"either {COMMAND_HOW}, or {CLAUDE_HOW} for --executor claude{where}; "
                                          f"{DRY_RUN}")
