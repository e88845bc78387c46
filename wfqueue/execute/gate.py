"""The gate: the test command run on the integration branch after each wave.

``execute_test_command`` when it is set; else the plan's own verification commands, each once, in plan
order, keeping only those the sandboxed command runner will run (a known test or build tool, no shell,
nothing outside the repository): a manual check cannot gate anything. Pure.
"""

from __future__ import annotations

from wfqueue.execute.model import ExecTask
from wfqueue.sandboxed_commands import refusal


def verification_refusal(task: ExecTask) -> str | None:
    """Why the task's verification will not run as a command (a manual check, or an unsafe command), or None."""
    refused = refusal(task.verification)
    return refused.message if refused is not None else None


def gate_commands(tasks: list[ExecTask], configured: str | None) -> list[str]:
    if configured is not None and configured.strip():
        return [configured.strip()]
    runnable = [t.verification.strip() for t in tasks if verification_refusal(t) is None]
    return list(dict.fromkeys(runnable))
