"""What a coding agent is asked to do for one task: a Markdown prompt built from the task and its plan. Pure.

The task id is on the first line (``Task: ID``) so a log, a transcript or a scripted executor can tell which
task a prompt is for.
"""

from __future__ import annotations

from wfqueue.execute.model import ExecTask, PlanContext
from wfqueue.sandboxed_commands import refusal

FEEDBACK_LIMIT = 6_000  # characters of a failure's output quoted back to the executor (its tail)


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _files(task: ExecTask) -> str:
    lines = [f"- modify `{p}`" for p in task.files.modify]
    lines += [f"- create `{p}`" for p in task.files.create]
    lines += [f"- delete `{p}`" for p in task.files.delete]
    return "\n".join(lines) or "- (the plan names no file: keep the change as small as the task allows)"


def _verification(task: ExecTask) -> str:
    command = task.verification.strip()
    if refusal(command) is None:
        return (f"When you are done, `{command}` is run in the repository root (no shell). It must pass; run it "
                "yourself before you finish.")
    return f"Check by hand: {command}" if command else "The plan gives no verification command."


def _context(context: PlanContext) -> str:
    parts: list[str] = []
    if context.requirement.strip() and context.requirement_length:
        parts.append(f"Requirement (its first {len(context.requirement)} of {context.requirement_length} "
                     f"characters; the task above says what this task needs of it): {context.requirement.strip()} ...")
    elif context.requirement.strip():
        parts.append(f"Requirement: {context.requirement.strip()}")
    if context.summary:
        parts.append("Plan summary:\n" + _bullets(context.summary))
    if context.constraints:
        parts.append("Plan constraints:\n" + _bullets(context.constraints))
    if context.documents:
        parts.append("Planning documents you may read for more detail:\n" + _bullets(context.documents))
    return "\n\n".join(parts)


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= FEEDBACK_LIMIT else "...\n" + text[-FEEDBACK_LIMIT:]


def build_prompt(task: ExecTask, context: PlanContext, *, retry_feedback: str = "",
                 verification_failure: str = "") -> str:
    """The executor's prompt. ``retry_feedback``: why the previous attempt was not merged (a conflict);
    ``verification_failure``: the output of this attempt's failing verification, for the one run that fixes it."""
    sections = [
        f"Task: {task.id}\n\n# {task.title.strip()}",
        task.description.strip(),
        "## Files\n\n" + _files(task),
    ]
    if task.implementation:
        sections.append("## Implementation steps\n\n" + "\n".join(
            f"{n}. {step}" for n, step in enumerate(task.implementation, start=1)))
    done = [*task.criteria]
    if task.definition_of_done.strip():
        done.append(f"Definition of done: {task.definition_of_done.strip()}")
    if done:
        sections.append("## Done when\n\n" + _bullets(done))
    sections.append("## Verification\n\n" + _verification(task))
    plan = _context(context)
    if plan:
        sections.append("## The plan\n\n" + plan)
    sections.append("## Rules\n\n" + _bullets([
        "Edit only the files listed above, plus new test files for this change; delete only what the list says "
        "to delete. A change to any other file is rejected.",
        "Work inside the current directory (a checkout made for this task); do not commit, and do not switch "
        "branches: wfqueue commits your change.",
        "Make the change completely: no placeholders, no TODOs left for later.",
    ]))
    if retry_feedback.strip():
        sections.append("## The previous attempt\n\nIt was not merged:\n\n```\n" + _tail(retry_feedback) + "\n```\n"
                        "Start again from the current code, which has changed since.")
    if verification_failure.strip():
        sections.append("## Verification failed\n\nYour change is in place, but the verification failed with:\n\n```\n"
                        + _tail(verification_failure) + "\n```\nFix the change so that it passes.")
    return "\n\n".join(s for s in sections if s) + "\n"
