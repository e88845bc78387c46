"""Which executor runs a plan's tasks, and refusing when none is configured (``--dry-run`` needs none).

``command`` runs the agent CLI of ``WFQUEUE_EXECUTOR_COMMAND``; ``claude`` needs an Anthropic API key.
Without ``--executor`` the configured command wins, then the API key. Pure: decided from the settings.
"""

from __future__ import annotations

from typing import Literal

from wfqueue.errors import ExecutorNotConfiguredError
from wfqueue.settings import Settings

ExecutorName = Literal["claude", "command"]

COMMAND_HOW = ("set WFQUEUE_EXECUTOR_COMMAND to an agent CLI, e.g. WFQUEUE_EXECUTOR_COMMAND='claude -p' "
               "({prompt_file} in it is replaced by the prompt's path; the prompt is also on its stdin)")
CLAUDE_HOW = "set ANTHROPIC_API_KEY (or WFQUEUE_ANTHROPIC_API_KEY)"
DRY_RUN = "`wfqueue execute ... --dry-run` shows the schedule without an executor"


def choose_executor(settings: Settings, requested: ExecutorName | None) -> ExecutorName:
    has_command = bool(settings.executor_command and settings.executor_command.strip())
    has_key = settings.anthropic_api_key is not None and bool(settings.anthropic_api_key.get_secret_value())
    if requested == "command" and not has_command:
        raise ExecutorNotConfiguredError("--executor command needs an executor command, and none is configured",
                                         hint=f"{COMMAND_HOW}; {DRY_RUN}")
    if requested == "claude" and not has_key:
        raise ExecutorNotConfiguredError("--executor claude needs an Anthropic API key, and none is configured",
                                         hint=f"{CLAUDE_HOW}, or use --executor command: {COMMAND_HOW}; {DRY_RUN}")
    if requested is not None:
        return requested
    if has_command:
        return "command"
    if has_key:
        return "claude"
    raise ExecutorNotConfiguredError("no executor is configured to run the tasks",
                                     hint=f"either {COMMAND_HOW}, or {CLAUDE_HOW} for --executor claude; {DRY_RUN}")
