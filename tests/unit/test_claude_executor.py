"""The claude executor: a coding tool loop against the local Messages API server (real SDK), in a real git
worktree, with the in-memory session state (its turns and usage where Redis would keep them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.fake_anthropic import At, FakeAnthropic, Fault, Reply, allow_loopback_only, error, text, tool_call
from wfqueue.errors import ConfigError, TransientProviderError
from wfqueue.execute.claude_executor import ClaudeExecutor, CodingCaps, claude_executor
from wfqueue.execute.executors import Executor
from wfqueue.memory_state import MemorySessionState
from wfqueue.metering import budget_meta
from wfqueue.providers.anthropic.calls import RetryPolicy
from wfqueue.settings import Settings
from wfqueue.state import SessionState, redis_client
from wfqueue.turns import SessionJournal, Transcript, journal_key
from wfqueue.usage import Budget, PriceTable

STEP = "T1#1"
PROMPT = "Fix add() in src/calc.py: it must return the sum. Check with the tests."
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from src.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIX = {"path": "src/calc.py", "old_string": "return a - b", "new_string": "return a + b"}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    allow_loopback_only(monkeypatch)



def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A task's worktree of a small repository, on its own branch."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "__init__.py").write_text("")
    (repo / "src" / "calc.py").write_text(BUGGY)
    (repo / "tests" / "test_calc.py").write_text(TEST)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "start")
    target = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "wfqueue/E1/T1", str(target))
    return target


def executor_for(fake: FakeAnthropic, state: MemorySessionState | SessionState, **options: Any) -> ClaudeExecutor:
    client = anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)
    options.setdefault("sleep", lambda seconds: None)
    return ClaudeExecutor(client, model="claude-test", state=state, prices=PriceTable(Settings().price_table),
                          **options)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a request sends back (its last user turn)."""
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def test_a_model_that_reads_edits_and_stops_changes_the_file_and_keeps_its_answer(
        fake: FakeAnthropic, worktree: Path) -> None:
    state = MemorySessionState()
    fake.reply(tool_call("read_file", {"path": "src/calc.py"}), tool_call("edit_file", FIX),
               text("add() now returns the sum."))

    executor: Executor = executor_for(fake, state)
    result = executor.run(PROMPT, worktree, STEP)

    assert result.ok, result.error
    assert result.output == "add() now returns the sum."
    assert (worktree / "src" / "calc.py").read_text() == FIXED
    assert "return a - b" in tool_results(fake.requests[1])[0]["content"]
    assert "edited src/calc.py" in tool_results(fake.requests[2])[0]["content"]
    assert fake.requests[0]["messages"][0]["content"][0]["text"] == PROMPT
    assert {t["name"] for t in fake.requests[0]["tools"]} == {
        "read_file", "list_dir", "glob", "grep", "edit_file", "write_file", "run_command"}
    assert [entry["kind"] for entry in state.usage()] == ["turn-1", "turn-2", "turn-3"]
    assert all(entry["step"] == f"execute {STEP}" for entry in state.usage())


def test_an_edit_whose_old_string_is_missing_is_an_error_result_and_the_model_recovers(
        fake: FakeAnthropic, worktree: Path) -> None:
    fake.reply(tool_call("edit_file", {**FIX, "old_string": "return a-b"}), tool_call("edit_file", FIX),
               text("Fixed."))

    result = executor_for(fake, MemorySessionState()).run(PROMPT, worktree, STEP)

    missing = tool_results(fake.requests[1])[0]
    assert missing["is_error"] and "not found" in missing["content"] and "read_file" in missing["content"]
    assert "is_error" not in tool_results(fake.requests[2])[0]
    assert result.ok and result.output == "Fixed."
    assert (worktree / "src" / "calc.py").read_text() == FIXED


def test_an_ambiguous_old_string_asks_for_more_context(fake: FakeAnthropic, worktree: Path) -> None:
    (worktree / "src" / "calc.py").write_text(BUGGY + "\n\n" + BUGGY.replace("add", "sub"))
    fake.reply(tool_call("edit_file", FIX), text("Gave up."))

    executor_for(fake, MemorySessionState()).run(PROMPT, worktree, STEP)

    ambiguous = tool_results(fake.requests[1])[0]
    assert ambiguous["is_error"] and "occurs 2 times" in ambiguous["content"]
    assert (worktree / "src" / "calc.py").read_text().count("return a - b") == 2


def test_paths_leaving_the_worktree_are_refused_and_nothing_is_written_outside(
        fake: FakeAnthropic, worktree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("keep me\n")
    (worktree / "out").symlink_to(outside, target_is_directory=True)
    (worktree / "link.txt").symlink_to(secret)
    git_file = (worktree / ".git").read_text()
    attempts = [
        ("write_file", {"path": "../x.txt", "content": "x"}),
        ("write_file", {"path": str(outside / "abs.txt"), "content": "x"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("write_file", {"path": "out/new.txt", "content": "x"}),
        ("edit_file", {"path": "link.txt", "old_string": "keep", "new_string": "lost"}),
        ("write_file", {"path": ".git", "content": "x"}),
        ("read_file", {"path": "out/secret.txt"}),
    ]
    fake.reply(tool_call(*attempts), text("Nothing to do."))

    result = executor_for(fake, MemorySessionState()).run(PROMPT, worktree, STEP)

    assert result.ok
    results = tool_results(fake.requests[1])
    assert len(results) == len(attempts)
    assert all(r.get("is_error") and r["content"].startswith("refused") for r in results), results
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert secret.read_text() == "keep me\n"
    assert not (tmp_path / "x.txt").exists()
    assert (worktree / ".git").read_text() == git_file


def test_run_command_runs_a_test_through_the_sandbox_and_refuses_anything_else(
        fake: FakeAnthropic, worktree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    command = "python -m pytest -q -p no:cacheprovider tests/test_calc.py"
    fake.reply(tool_call("run_command", {"command": command}), tool_call("edit_file", FIX),
               tool_call(("run_command", {"command": command}), ("run_command", {"command": "rm -rf src"}),
                         ("run_command", {"command": "pytest tests; rm -rf src"})),
               text("Fixed; the test passes."))

    result = executor_for(fake, MemorySessionState()).run(PROMPT, worktree, STEP)

    assert result.ok
    red = tool_results(fake.requests[1])[0]
    assert red["is_error"] and "exit status 1" in red["content"] and "1 failed" in red["content"]
    green, rm, chained = tool_results(fake.requests[3])
    assert "exit status 0" in green["content"] and "1 passed" in green["content"] and "is_error" not in green
    assert rm["is_error"] and rm["content"].startswith("refused") and "known test or build tool" in rm["content"]
    assert chained["is_error"] and "needs a shell" in chained["content"]
    assert (worktree / "src" / "calc.py").exists()


def test_a_model_that_never_stops_calling_tools_is_capped(worktree: Path) -> None:
    with FakeAnthropic(responder=lambda body: tool_call("list_dir", {"path": "."})) as fake:
        result = executor_for(fake, MemorySessionState(), caps=CodingCaps(max_turns=4)).run(PROMPT, worktree, STEP)
        assert len(fake.calls) == 4
    assert not result.ok
    assert result.error is not None and "turn cap" in result.error


def test_a_model_asking_for_too_many_tool_calls_is_capped_before_they_run(worktree: Path) -> None:
    many = tool_call(*[("write_file", {"path": f"f{i}.txt", "content": "x"}) for i in range(3)])
    with FakeAnthropic(responder=lambda body: many) as fake:
        result = executor_for(fake, MemorySessionState(), caps=CodingCaps(max_tool_calls=5)).run(
            PROMPT, worktree, STEP)
        assert len(fake.calls) == 2
    assert not result.ok and result.error is not None and "tool-call cap" in result.error


def test_rate_limits_overload_and_a_cut_stream_are_retried_and_usage_is_counted_once(worktree: Path) -> None:
    slept: list[float] = []
    faults = At({1: Fault("429", retry_after=7), 2: "529", 4: "cut_stream", 6: "500"})
    with FakeAnthropic(faults=faults) as fake:
        fake.reply(tool_call("read_file", {"path": "src/calc.py"}), tool_call("edit_file", FIX), text("Fixed."))
        state = MemorySessionState()
        result = executor_for(fake, state, sleep=slept.append).run(PROMPT, worktree, STEP)
        assert fake.faulted() == {"429": 1, "529": 1, "cut_stream": 1, "500": 1}
        assert fake.repeated_turns() == 0
    assert result.ok and result.output == "Fixed."
    assert (worktree / "src" / "calc.py").read_text() == FIXED
    assert slept[0] >= 7  # retry-after honoured
    usage = state.usage()
    # The cut send of turn 2 had begun its answer (a tool call, no text): billed, so on the bill, marked broken.
    assert [(entry["kind"], entry.get("broken", False)) for entry in usage] == [
        ("turn-1", False), ("turn-2", True), ("turn-2", False), ("turn-3", False)]
    assert sum(entry.get("resent", 0) for entry in usage) == 4 and usage[1]["input_tokens"] > 0


def test_a_stream_cut_after_some_text_drops_its_tool_calls_and_the_model_goes_on(worktree: Path) -> None:
    says = "The subtraction in add() is the bug; I will replace it with an addition and then stop."
    reply = Reply(content=[{"type": "text", "text": says}, {"type": "tool_use", "id": "", "name": "edit_file",
                                                            "input": FIX}], stop_reason="tool_use")
    with FakeAnthropic(faults=At({1: "cut_stream"})) as fake:
        fake.reply(reply, text("Fixed."))
        state = MemorySessionState()
        result = executor_for(fake, state).run(PROMPT, worktree, STEP)
        assert fake.faulted() == {"cut_stream": 1}
    assert result.ok and (worktree / "src" / "calc.py").read_text() == FIXED
    cut_turn, asked_again = fake.requests[1]["messages"][-2:]
    assert [b["type"] for b in cut_turn["content"]] == ["text"]
    assert "cut off" in asked_again["content"][0]["text"]
    assert [entry["stop_reason"] for entry in state.usage()] == [None, "tool_use", "end_turn"]


def test_a_redelivered_run_continues_without_resending_answered_turns(fake: FakeAnthropic, worktree: Path) -> None:
    state = MemorySessionState()
    fake.reply(tool_call("read_file", {"path": "src/calc.py"}), tool_call("edit_file", FIX), error(529), error(529))
    with pytest.raises(TransientProviderError):
        executor_for(fake, state, retry_policy=RetryPolicy(step_retries=1)).run(PROMPT, worktree, STEP)
    assert (worktree / "src" / "calc.py").read_text() == FIXED
    before = len(fake.requests)

    fake.reply(text("Fixed."))
    result = executor_for(fake, state).run(PROMPT, worktree, STEP)

    assert result.ok and result.output == "Fixed."
    assert len(fake.requests) == before + 1  # only the unanswered turn is sent
    assert fake.repeated_turns() == 0
    assert "edited src/calc.py" in tool_results(fake.requests[-1])[0]["content"]
    assert [entry["kind"] for entry in state.usage()] == ["turn-1", "turn-2", "turn-3"]

    again = executor_for(fake, state).run(PROMPT, worktree, STEP)  # a finished run answers its saved outcome
    assert again == result and len(fake.requests) == before + 1


def test_a_redelivered_run_continues_from_the_sessions_redis_state(fake: FakeAnthropic, worktree: Path,
                                                                    redis_url: str) -> None:
    state = SessionState(redis_client(redis_url, 2.0), "S-exec-redelivery", ttl_s=600)
    fake.reply(tool_call("edit_file", FIX), error(529))
    with pytest.raises(TransientProviderError):
        executor_for(fake, state, retry_policy=RetryPolicy(step_retries=0)).run(PROMPT, worktree, STEP)

    fake.reply(text("Fixed."))
    other_worker = SessionState(redis_client(redis_url, 2.0), "S-exec-redelivery", ttl_s=600)
    result = executor_for(fake, other_worker).run(PROMPT, worktree, STEP)

    assert result.ok and fake.repeated_turns() == 0 and len(fake.requests) == 3
    assert (worktree / "src" / "calc.py").read_text() == FIXED
    assert [entry["kind"] for entry in other_worker.usage()] == ["turn-1", "turn-2"]


# An edit that inserts after an anchor keeps the anchor: run a second time, it would insert its text again.
INSERT = {"path": "src/calc.py", "old_string": BUGGY, "new_string": BUGGY + "\n\ndef mul(a, b):\n    return a * b\n"}


class DiesSaving(SessionJournal):
    """A journal whose process dies at the first save ``when`` matches: the worker was killed right then, before
    that save, or right after it (``after``)."""

    def __init__(self, state: MemorySessionState, when: Any, *, after: bool = False) -> None:
        super().__init__(state)
        self.when, self.after = when, after

    def save(self, transcript: Transcript, call: dict[str, Any] | None) -> None:
        dies = call is None and self.when(transcript)
        if not dies or self.after:
            super().save(transcript, call)
        if dies:
            raise KeyboardInterrupt("worker killed")


def answered(transcript: Transcript, tool: str) -> bool:
    """Whether the tool call named ``tool`` of the last reply has its result in ``transcript`` (while the turn's
    calls run, or all of them at once)."""
    ids = {b["id"] for b in transcript.history[-1]["content"] if b.get("name") == tool}
    results = transcript.tool_results + (transcript.pending or {}).get("content", [])
    return any(r.get("tool_use_id") in ids and "content" in r for r in results)


def test_a_worker_killed_during_a_later_tool_call_does_not_apply_the_turns_edit_twice(
        fake: FakeAnthropic, worktree: Path) -> None:
    """The edit ran, then the worker died during the turn's next call (a long test run): the restarted turn runs
    that call again, not the edit."""
    state = MemorySessionState()
    fake.reply(tool_call(("edit_file", INSERT), ("read_file", {"path": "src/calc.py"})))
    with pytest.raises(KeyboardInterrupt):
        executor_for(fake, state, journal=DiesSaving(state, lambda t: answered(t, "read_file"))).run(
            PROMPT, worktree, STEP)
    calls_before = len(fake.requests)

    fake.reply(text("Added mul."))
    result = executor_for(fake, state).run(PROMPT, worktree, STEP)

    assert result.ok and len(fake.requests) == calls_before + 1
    assert (worktree / "src" / "calc.py").read_text().count("def mul") == 1
    edited, read = tool_results(fake.requests[-1])
    assert edited["content"].startswith("edited src/calc.py: replaced 1 occurrence")
    assert "def mul" in read["content"]


def test_an_edit_that_ran_before_the_worker_died_unsaved_is_answered_as_applied(
        fake: FakeAnthropic, worktree: Path) -> None:
    """The worker died between the edit's write and the save of its result: its file changed since the digest
    taken before it ran, so the restarted turn does not run it again."""
    state = MemorySessionState()
    fake.reply(tool_call("edit_file", INSERT))
    with pytest.raises(KeyboardInterrupt):
        executor_for(fake, state, journal=DiesSaving(state, lambda t: answered(t, "edit_file"))).run(
            PROMPT, worktree, STEP)
    assert (worktree / "src" / "calc.py").read_text().count("def mul") == 1
    calls_before = len(fake.requests)

    fake.reply(text("Added mul."))
    result = executor_for(fake, state).run(PROMPT, worktree, STEP)

    assert result.ok and len(fake.requests) == calls_before + 1
    assert (worktree / "src" / "calc.py").read_text().count("def mul") == 1
    (applied,) = tool_results(fake.requests[-1])
    assert "applied before the worker restarted" in applied["content"] and "is_error" not in applied


def test_an_edit_that_had_not_run_when_the_worker_died_runs_on_the_restart(
        fake: FakeAnthropic, worktree: Path) -> None:
    """The worker died after the digest was saved, before the edit wrote anything: the file is as the digest says,
    so the edit runs."""
    state = MemorySessionState()
    fake.reply(tool_call("edit_file", INSERT))
    died = DiesSaving(state, lambda t: any("before_edit" in r for r in t.tool_results), after=True)
    with pytest.raises(KeyboardInterrupt):
        executor_for(fake, state, journal=died).run(PROMPT, worktree, STEP)
    assert (worktree / "src" / "calc.py").read_text() == BUGGY

    fake.reply(text("Added mul."))
    assert executor_for(fake, state).run(PROMPT, worktree, STEP).ok
    assert (worktree / "src" / "calc.py").read_text().count("def mul") == 1
    assert tool_results(fake.requests[-1])[0]["content"].startswith("edited src/calc.py: replaced 1 occurrence")


def test_a_spent_budget_stops_the_run_before_its_next_call(fake: FakeAnthropic, worktree: Path) -> None:
    state = MemorySessionState()
    state.set_meta(budget=budget_meta(Budget.parse("100")))  # tokens: the first turn spends more
    fake.reply(tool_call("read_file", {"path": "src/calc.py"}), text("never sent"))

    result = executor_for(fake, state).run(PROMPT, worktree, STEP)

    assert not result.ok and result.error is not None and "budget exhausted" in result.error
    assert len(fake.requests) == 1


def test_transcripts_are_kept_for_audit(fake: FakeAnthropic, worktree: Path, tmp_path: Path) -> None:
    fake.reply(tool_call("read_file", {"path": "src/calc.py"}), text("Looked."))
    executor_for(fake, MemorySessionState(), transcript_dir=tmp_path / "transcripts").run(PROMPT, worktree, STEP)
    lines = (tmp_path / "transcripts" / "execute-T1-1.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["answer"] == "Looked."


def test_the_factory_builds_from_settings_and_needs_an_api_key(tmp_path: Path) -> None:
    settings = Settings(anthropic_api_key="test-key", executor_timeout_s=60, executor_max_turns=7,
                        executor_max_tool_calls=9)
    built = claude_executor(settings, MemorySessionState(), tmp_path)
    assert built.name == "claude" and built.transcript_dir == tmp_path / "transcripts"
    assert built.caps.command_timeout_s == 60 and built.step_time_s == 60  # a command fits in the task's time
    assert (built.caps.max_turns, built.caps.max_tool_calls) == (7, 9)
    with pytest.raises(ConfigError, match="API key"):
        claude_executor(Settings(), MemorySessionState(), tmp_path)


def test_an_edit_marked_on_another_workers_worktree_runs_on_a_fresh_one(fake: FakeAnthropic, worktree: Path) -> None:
    """Without a shared disk the redelivery gets a worktree made afresh: its file is neither as the edit found it
    nor as it left it, and the edit was answered "applied" there without running."""
    state = MemorySessionState()
    fake.reply(tool_call("edit_file", INSERT))
    died = DiesSaving(state, lambda t: any("before_edit" in r for r in t.tool_results), after=True)
    with pytest.raises(KeyboardInterrupt):
        executor_for(fake, state, journal=died).run(PROMPT, worktree, STEP)
    marker = next(r for r in SessionJournal(state).load(journal_key(f"execute {STEP}", PROMPT)).tool_results)
    assert marker["after_edit"] is not None  # what the edit would leave, recorded before it ran
    (worktree / "src" / "calc.py").write_text(BUGGY + "# another worker's checkout\n")  # neither digest

    fake.reply(text("Added mul."))
    assert executor_for(fake, state).run(PROMPT, worktree, STEP).ok
    assert (worktree / "src" / "calc.py").read_text().count("def mul") == 1
    assert tool_results(fake.requests[-1])[0]["content"].startswith("edited src/calc.py: replaced 1 occurrence")
