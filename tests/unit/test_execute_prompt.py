"""The prompt a coding agent gets for one task, and the commit message its change gets."""

from __future__ import annotations

import json
from pathlib import Path

from tests.execute_support import task
from wfqueue.collab.steps import ANALYSIS_FILE
from wfqueue.execute.commits import commit_message
from wfqueue.execute.model import PlanContext, TaskFiles
from wfqueue.execute.plan_context import REQUIREMENT_SHOWN, for_executor, read_context
from wfqueue.execute.prompt import build_prompt


def test_prompt_names_the_task_its_files_steps_criteria_and_verification() -> None:
    context = PlanContext(requirement="a calculator that subtracts", summary=["one module changes"],
                          constraints=["no new dependency"], documents=[".workflow/x/plan.json"])
    prompt = build_prompt(task(), context)
    assert prompt.startswith("Task: T1\n")
    for expected in ("# Add subtraction", "calc gets a sub function.", "- modify `calc/ops.py`",
                     "- create `tests/test_sub.py`", "1. Write sub(a, b)", "2. Test it", "- sub(5, 3) == 2",
                     "Definition of done: sub exists and is tested", "`python -m pytest -q tests` is run",
                     "Requirement: a calculator that subtracts", "- no new dependency", ".workflow/x/plan.json",
                     "Edit only the files listed above, plus new test files"):
        assert expected in prompt, expected
    assert "Verification failed" not in prompt and "previous attempt" not in prompt


def test_a_long_requirement_is_cut_and_the_prompt_says_so(tmp_path: Path) -> None:
    """A requirements document of a megabyte went whole into every task's message and every turn of its coding
    agent (about 250 000 tokens a turn)."""
    folder = tmp_path / ".workflow" / ".lite-plan" / "long"
    folder.mkdir(parents=True)
    text = "Add rate limiting to notes handlers. " * 2_000  # 74 000 characters
    (folder / ANALYSIS_FILE).write_text(json.dumps({"original_requirement": text}), encoding="utf-8")
    context = read_context("lite", folder, tmp_path)
    assert len(context.requirement) <= REQUIREMENT_SHOWN and text.startswith(context.requirement)
    assert text[len(context.requirement)] == " "  # cut at a word
    assert context.requirement_length == len(text.strip())
    prompt = build_prompt(task(), context)
    assert f"Requirement (its first {len(context.requirement)} of {len(text.strip())} characters; " in prompt
    assert len(prompt) < REQUIREMENT_SHOWN + 2_000
    short = "Add rate limiting to notes handlers."
    (folder / ANALYSIS_FILE).write_text(json.dumps({"original_requirement": short}), encoding="utf-8")
    assert read_context("lite", folder, tmp_path) == PlanContext(requirement=short, documents=[])
    assert f"Requirement: {short}\n" in build_prompt(task(), read_context("lite", folder, tmp_path))


def test_a_manual_verification_is_described_not_promised_to_run() -> None:
    prompt = build_prompt(task(verification="manual: open the page"), PlanContext())
    assert "Check by hand: manual: open the page" in prompt
    assert "is run in the repository root" not in prompt


def test_a_retry_quotes_the_failure_and_the_previous_attempts_feedback() -> None:
    prompt = build_prompt(task(), PlanContext(), retry_feedback="merge conflict in calc/ops.py",
                          verification_failure="`pytest` exited with status 1\nassert 8 == 2")
    assert "merge conflict in calc/ops.py" in prompt
    assert "## Verification failed" in prompt and "assert 8 == 2" in prompt


def test_commit_message_is_conventional_with_trailers() -> None:
    message = commit_message(task(), "EXEC-demo-2026-01-01", 2)
    head, _, rest = message.partition("\n")
    assert head == "feat(calc): Add subtraction"
    assert rest.rstrip().endswith("Task: T1\nExec: EXEC-demo-2026-01-01\nAttempt: 2")
    assert "calc gets a sub function." in rest


def test_commit_type_and_scope_follow_the_task() -> None:
    assert commit_message(task(type="bugfix"), "E", 1).startswith("fix(calc): ")
    assert commit_message(task(type="refactor"), "E", 1).startswith("refactor(calc): ")
    assert commit_message(task(type="test-gen"), "E", 1).startswith("test(calc): ")
    assert commit_message(task(type="docs", files=TaskFiles(modify=["README.md"])), "E", 1).startswith(
        "docs(README): ")
    assert commit_message(task(type=None, files=TaskFiles(create=["src/app.py"])), "E", 1).startswith(
        "chore(app): ")
    assert commit_message(task(type="infrastructure", files=TaskFiles()), "E", 1).startswith("chore: ")


def test_the_claude_executor_is_not_pointed_at_documents_its_tools_cannot_read(tmp_path: Path) -> None:
    """Its read, glob and grep tools work inside the task's worktree only: the session's documents, outside it,
    were listed for it to read all the same."""
    (tmp_path / ".workflow" / "x").mkdir(parents=True)
    (tmp_path / ".workflow" / "x" / "plan.json").write_text("{}", encoding="utf-8")
    context = PlanContext(requirement="subtract", documents=[".workflow/x/plan.json"])
    assert for_executor(context, tmp_path, "claude") == PlanContext(requirement="subtract")
    assert "Planning documents" not in build_prompt(task(), for_executor(context, tmp_path, "claude"))
    shown = for_executor(context, tmp_path, "command").documents
    assert shown == [str(tmp_path / ".workflow" / "x" / "plan.json")]
