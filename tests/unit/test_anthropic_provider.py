"""The anthropic provider with the real SDK against a local fake of the Messages API."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fake_anthropic import FakeAnthropic, allow_loopback_only, answer, breakpoint_tokens, error, tool_call
from tests.fake_anthropic_faults import Always, Fault
from tests.fake_anthropic_wire import malformed_tool_call
from wfqueue import agent_notes
from wfqueue.collab.models import AreaDraft, RequirementAnalysis
from wfqueue.errors import ConfigError, ProviderError, TransientProviderError
from wfqueue.lite.models import AngleFindings, Assessment
from wfqueue.plan_check import leaves_repository
from wfqueue.providers.anthropic import AnthropicProvider, warmup
from wfqueue.providers.anthropic.calls import RetryPolicy, retry_after_seconds
from wfqueue.providers.anthropic.prompts import FINAL_TURN_TEXT, build_prompt
from wfqueue.providers.anthropic.schema import output_schema
from wfqueue.providers.anthropic.tools import RepoTools
from wfqueue.providers.base import (
    AssessStep,
    DetectConflictsStep,
    ExploreAngleStep,
    GenerateTasksStep,
    LitePlanStep,
    PlanAreaStep,
    Provider,
    UnderstandStep,
)

REQUIREMENT = "Add per-user rate limiting to the API"
ASSESSMENT = {
    "complexity": "Medium", "scope": "two packages", "depth": "new middleware", "risk": "low",
    "dependencies": "none new", "preset": "feature", "angles": ["security", "integration-points"],
    "needs_exploration": True, "exploration_reasons": ["the middleware chain must be understood"],
}
FINDINGS = {
    "angle": "security", "structure": ["auth lives in notes_api/auth"],
    "relevant_files": [{"path": "notes_api/auth/tokens.py", "relevance": "high", "rationale": "issues tokens"}],
    "patterns": [], "integration_points": [
        {"file": "notes_api/auth/tokens.py", "line": 46, "description": "token issuing", "snippet": "def issue_token"}],
    "dependencies": [], "constraints": [], "clarification_needs": [],
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only loopback connections: a test that would reach the real API fails instead."""
    allow_loopback_only(monkeypatch)



def provider_for(fake: FakeAnthropic, **options: Any) -> AnthropicProvider:
    options.setdefault("sleep", lambda seconds: None)  # a re-sent call never waits in a unit test
    return AnthropicProvider(model="claude-test", api_key="test-key", base_url=fake.base_url, **options)


def assess_step(repo: Path) -> AssessStep:
    return AssessStep(session_id="s1", repo=str(repo), requirement=REQUIREMENT)


def explore_step(repo: Path, angle: str = "security") -> ExploreAngleStep:
    return ExploreAngleStep(session_id="s1", repo=str(repo), requirement=REQUIREMENT, angle=angle)


def analysis() -> RequirementAnalysis:
    return RequirementAnalysis.model_validate({
        "session_id": "CPLAN-1", "original_requirement": REQUIREMENT, "complexity": "Medium", "total_agents": 2,
        "understanding": {"objectives": ["limit requests per user"], "split_strategy": "by package"},
        "sub_domains": [
            {"focus_area": "auth", "description": "who the user is", "task_id_range": [1, 100],
             "focus_paths": ["notes_api/auth"]},
            {"focus_area": "storage", "description": "where counters live", "task_id_range": [101, 200],
             "focus_paths": ["notes_api/storage"]},
        ],
    })


def area_draft(first_id: int) -> dict[str, Any]:
    return {
        "summary": "s", "approach": "a", "recommended_execution": "Sequential",
        "design_decisions": [{"decision": "d", "rationale": "r", "tradeoff": "t"}],
        "tasks": [{"id": f"TASK-{first_id:03d}", "title": "t", "description": "d",
                   "convergence": {"criteria": ["c"], "verification": "pytest", "definition_of_done": "done"}}],
        "evidence": {"related_files": [], "patterns": [], "constraints": []},
        "understanding": "u",
    }


def user_texts(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") if b["type"] == "text" else str(b.get("content", "")) for b in content)


# -- structured output ---------------------------------------------------------------------


def test_assess_answers_with_validated_structured_output(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.reply(answer(ASSESSMENT))
    provider = provider_for(fake, max_tokens=1234)
    assert isinstance(provider, Provider)

    result = provider.run(assess_step(sample_repo))

    assert isinstance(result, Assessment)
    assert result.angles == ["security", "integration-points"]
    [request] = fake.requests
    assert request["model"] == "claude-test" and request["max_tokens"] == 1234
    assert fake.headers[0]["authorization"] == "Bearer test-key"  # how SDK 2.x sends api_key
    fmt = request["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert set(fmt["schema"]["required"]) == set(Assessment.model_fields)
    assert fmt["schema"]["additionalProperties"] is False
    assert "tools" not in request
    first, second = request["system"]
    assert first["cache_control"] == {"type": "ephemeral"}
    assert REQUIREMENT in first["text"] and "notes_api/auth/tokens.py" in first["text"]
    assert "cache_control" not in second
    [usage] = provider.usage
    assert (usage["step"], usage["kind"], usage["model"], usage["stop_reason"]) == (
        "assess", "answer", "claude-test", "end_turn")
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["cache_creation_input_tokens"] == breakpoint_tokens(request)[0]
    assert usage["cache_read_input_tokens"] == 0


def test_each_call_asks_for_the_sdk_warm_up(fake: FakeAnthropic, sample_repo: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up (wfqueue.providers.anthropic.warmup) starts with a process's first call, once."""
    asked: list[bool] = []
    monkeypatch.setattr(warmup, "start_once", lambda: asked.append(True))
    fake.reply(answer(ASSESSMENT))
    provider_for(fake).run(assess_step(sample_repo))
    assert asked == [True]
    assert len(fake.requests) == 1


def test_wire_schemas_stay_within_the_grammar_limits() -> None:
    def walk(node: Any, found: dict[str, int]) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, found)
        elif isinstance(node, dict):
            if node.get("type") == "object":
                props = node.get("properties")
                assert props, f"free-form object in the schema: {node}"
                assert node.get("additionalProperties") is False
                found["optional"] += len(set(props) - set(node.get("required", [])))
            found["unions"] += "anyOf" in node
            for key in ("minimum", "maximum", "minLength", "maxLength", "maxItems"):
                assert not isinstance(node.get(key), (int, float)) or key == "minItems", f"{key} in {node}"
            assert node.get("minItems", 0) in (0, 1)
            for value in node.values():
                walk(value, found)

    for step in (UnderstandStep, PlanAreaStep, AssessStep, ExploreAngleStep, LitePlanStep, DetectConflictsStep,
                 GenerateTasksStep):
        found = {"optional": 0, "unions": 0}
        walk(output_schema(step.output_model), found)
        assert found["optional"] == 0, step.name
        assert found["unions"] <= 16, step.name
    decisions = output_schema(AreaDraft)["properties"]["design_decisions"]["items"]
    assert set(decisions["properties"]) == {"decision", "rationale", "tradeoff"}


# -- the tool-use loop ----------------------------------------------------------------------


def test_exploration_runs_tools_then_submits(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.reply(
        tool_call("grep", {"pattern": r"def (issue|verify)_token", "include": "*.py"}),
        tool_call(("read", {"path": "notes_api/auth/tokens.py", "start_line": 40, "max_lines": 20}),
                  ("read", {"path": "../README.md"})),
        answer(FINDINGS),
    )
    provider = provider_for(fake)

    result = provider.run(explore_step(sample_repo))

    assert isinstance(result, AngleFindings) and result.integration_points[0].line == 46
    assert len(fake.requests) == 3
    assert all(r["tools"] and {t["name"] for t in r["tools"]} == {"list", "glob", "grep", "read"}
               for r in fake.requests)
    assert all("tool_choice" not in r for r in fake.requests)
    assert "`security`" in user_texts(fake.requests[0]["messages"][0])
    grep_result = fake.requests[1]["messages"][-1]["content"][0]
    assert grep_result["type"] == "tool_result" and not grep_result.get("is_error")
    assert "notes_api/auth/tokens.py:46: def issue_token" in grep_result["content"]
    assert "notes_api/auth/tokens.py:56: def verify_token" in grep_result["content"]
    read_ok, read_refused = fake.requests[2]["messages"][-1]["content"]
    assert "   46\tdef issue_token" in read_ok["content"] and not read_ok.get("is_error")
    assert "   39\t" not in read_ok["content"] and "   60\t" not in read_ok["content"]
    assert read_ok["content"].endswith("[16 more lines; continue with start_line=60]")
    assert read_refused["is_error"] is True and "'..' is not allowed" in read_refused["content"]
    # The growing conversation carries one cache breakpoint, so turn 2 reads turn 1 from the cache.
    assert [u["kind"] for u in provider.usage] == ["turn-1", "turn-2", "turn-3"]
    assert provider.usage[1]["cache_read_input_tokens"] > provider.usage[0]["cache_read_input_tokens"]


@pytest.mark.parametrize("raw", ['{"pattern": "NAME = \\q"}', '{"pattern": "\\ud800"}'],
                         ids=["invalid-escape", "lone-surrogate"])
def test_a_tool_call_whose_input_is_not_json_is_sent_again_not_a_raw_error(
        raw: str, fake: FakeAnthropic, sample_repo: Path) -> None:
    """The SDK could not read the tool call's input and raised ValueError ("Unable to parse tool parameter JSON
    from model. Please retry your request or adjust your prompt"): the task failed on it, its paid turn was never
    recorded, and `--continue` paid the same turn again. It is sent again within its turn, as a cut stream is."""
    fake.reply(malformed_tool_call("grep", raw), answer(FINDINGS))
    result = provider_for(fake).run(explore_step(sample_repo))
    assert isinstance(result, AngleFindings)
    assert len(fake.requests) == 2 and fake.requests[0]["messages"] == fake.requests[1]["messages"]


def test_tool_loop_is_bounded_by_max_turns(sample_repo: Path) -> None:
    def responder(body: dict[str, Any]) -> Any:
        if (body.get("tool_choice") or {}).get("type") == "none":
            return answer(FINDINGS)
        return tool_call("list", {"path": "."})

    with FakeAnthropic(responder) as fake:
        result = provider_for(fake, max_turns=3).run(explore_step(sample_repo))

    assert result.angle == "security"
    assert len(fake.requests) == 3
    assert [r.get("tool_choice") for r in fake.requests] == [None, None, {"type": "none"}]
    last_user = fake.requests[-1]["messages"][-1]
    assert last_user["content"][0]["type"] == "tool_result" and "notes_api/" in last_user["content"][0]["content"]
    assert FINAL_TURN_TEXT in user_texts(last_user)


def test_token_budget_per_step_forces_the_answer(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.reply(tool_call("glob", {"pattern": "**/*.py"}), answer(FINDINGS))

    provider_for(fake, max_turns=10, max_step_tokens=1).run(explore_step(sample_repo))

    assert len(fake.requests) == 2
    assert fake.requests[1]["tool_choice"] == {"type": "none"}
    assert "notes_api/auth/tokens.py" in fake.requests[1]["messages"][-1]["content"][0]["content"]


# -- repository tools ------------------------------------------------------------------------------


def test_tools_stay_inside_the_repository(sample_repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE\n")
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    (outside_dir / "hidden.py").write_text("TOP-SECRET-VALUE = 1\n")
    (sample_repo / "leak.txt").symlink_to(secret)
    (sample_repo / "linked").symlink_to(outside_dir, target_is_directory=True)
    (sample_repo / "alias.py").symlink_to(sample_repo / "notes_api" / "config.py")
    tools = RepoTools(sample_repo)

    for bad in ("../secret.txt", "notes_api/../../secret.txt", str(secret), "/etc/passwd", "leak.txt",
                "linked/hidden.py", "C:\\Windows\\win.ini"):
        text, is_error = tools.run("read", {"path": bad})
        assert is_error, bad
        assert "refused" in text and "TOP-SECRET" not in text
    assert tools.run("list", {"path": ".."})[1]
    assert tools.run("glob", {"pattern": "../*"})[1]
    assert tools.run("grep", {"pattern": "x", "path": "/tmp"})[1]
    text, is_error = tools.run("grep", {"pattern": "TOP-SECRET"})
    assert not is_error and text.startswith("no matches")
    listing = tools.run("list", {"path": "."})[0].splitlines()
    assert "leak.txt" not in listing and "linked/" not in listing and "notes_api/" in listing
    globbed = tools.run("glob", {"pattern": "*.py"})[0].splitlines()
    assert "notes_api/auth/tokens.py" in globbed and "alias.py" in globbed
    assert not any(p.startswith("linked/") for p in globbed)
    assert "leak.txt" not in tools.summary()


def test_links_that_loop_are_skipped_by_the_tools_and_a_read_through_them_is_a_tool_error(sample_repo: Path) -> None:
    """Path.resolve raises RuntimeError on a loop (Python 3.11): a repository committing `a -> b -> a` failed
    every step of the Claude planner before its first call, and the coding agents' glob, grep and read."""
    (sample_repo / "loop_a.py").symlink_to("loop_b")
    (sample_repo / "loop_b").symlink_to("loop_a.py")
    tools = RepoTools(sample_repo)
    globbed, is_error = tools.run("glob", {"pattern": "*.py"})
    assert not is_error and "notes_api/config.py" in globbed.splitlines() and "loop_a.py" not in globbed
    assert not tools.run("grep", {"pattern": "def "})[1]
    assert "loop_a.py" in tools.run("list", {"path": "."})[0].splitlines()
    text, is_error = tools.run("read", {"path": "loop_a.py"})
    assert is_error and "loop_a.py" in text
    assert "loop_a.py" not in tools.summary()
    assert not leaves_repository(sample_repo)("loop_a.py")


def test_the_tools_list_the_repositorys_own_files_not_those_git_ignores(sample_repo: Path) -> None:
    """glob, grep and the listing in the prompt walked every file: a generated folder git ignores was offered to
    the model, which planned it, and execution refused the plan (git does not track it)."""
    subprocess.run(["git", "init", "-q", str(sample_repo)], check=True)
    (sample_repo / ".gitignore").write_text("generated/\n")
    (sample_repo / "generated").mkdir()
    (sample_repo / "generated" / "tokens_client.py").write_text("def issue_token_remote():\n    pass\n")
    tools = RepoTools(sample_repo)
    assert "generated/" not in tools.run("glob", {"pattern": "*.py"})[0]
    assert "generated/" not in tools.run("grep", {"pattern": "issue_token"})[0]
    assert "generated/" not in tools.summary() and "notes_api/auth/tokens.py" in tools.summary()
    # A file the model writes (the coding executor's tools) is listed at the next call.
    (sample_repo / "notes_api" / "limits.py").write_text("LIMIT = 5\n")
    assert "notes_api/limits.py" in tools.run("glob", {"pattern": "limits.py"})[0]
    assert not tools.run("read", {"path": "generated/tokens_client.py"})[1]  # named, it can still be read
    # A package git tracks under a name the walk skips is listed; an untracked virtual environment is not.
    (sample_repo / "build").mkdir()
    (sample_repo / "build" / "backend.py").write_text("def build_wheel():\n    pass\n")
    subprocess.run(["git", "-C", str(sample_repo), "add", "build/backend.py"], check=True)
    (sample_repo / "venv" / "lib").mkdir(parents=True)
    (sample_repo / "venv" / "lib" / "site.py").write_text("X = 1\n")
    listing = tools.run("list", {"path": "."})[0].splitlines()
    assert "build/" in listing and "venv/" not in listing, listing
    assert "build/backend.py" in tools.run("glob", {"pattern": "*.py"})[0]


def test_a_grep_pattern_that_backtracks_without_end_is_a_tool_error_in_bounded_time(tmp_path: Path) -> None:
    """The model's pattern ran under `re` with no limit: `(\\w+\\s?)*\\(` on one README line held the worker at
    full CPU past every time limit (the threads pool enforces none), the plan "running" for good."""
    (tmp_path / "README.md").write_text("this is an ordinary readme line of text here\n" + "a" * 60 + "b\n")
    tools = RepoTools(tmp_path, grep_time_s=0.5)
    text, is_error = tools.run("grep", {"pattern": r"(\w+\s?)*\("})
    assert not is_error and text.startswith("no matches"), text  # at once: the `regex` engine does not get stuck
    started = time.monotonic()
    text, is_error = tools.run("grep", {"pattern": "(a|aa)+$"})
    assert is_error and "matching the pattern took more than 0.5 s (stopped at README.md:2)" in text, text
    assert time.monotonic() - started < 5
    assert tools.run("grep", {"pattern": r"ordinary\s+readme"}) == ("README.md:1: this is an ordinary readme line "
                                                                    "of text here", False)


def test_terminal_escape_sequences_in_an_answer_are_kept_harmless(fake: FakeAnthropic, sample_repo: Path) -> None:
    """A title holding `\\x1b[31m` or an OSC title change was written as is into TODO_LIST.md and IMPL_PLAN.md:
    `cat` ran it. What the model wrote is kept, with the characters a terminal acts on shown as U+FFFD."""
    fake.reply(answer({**ASSESSMENT, "scope": "two\x1b[31m packages\x1b]0;owned\x07", "depth": "new\r\nline"}))
    result = provider_for(fake).run(assess_step(sample_repo))
    assert isinstance(result, Assessment)
    assert result.scope == "two\ufffd[31m packages\ufffd]0;owned\ufffd" and result.depth == "new\nline"


def test_bidirectional_overrides_in_an_answer_cannot_reverse_what_a_reviewer_reads(fake: FakeAnthropic,
                                                                                   sample_repo: Path) -> None:
    """U+202E shows the text after it reversed (a title, a path in a plan or a commit message reads as something
    else than it holds); control characters were already replaced, these went through."""
    fake.reply(answer({**ASSESSMENT, "scope": "safe \u202etxt.exe\u202c and \u2066isolated\u2069"}))
    result = provider_for(fake).run(assess_step(sample_repo))
    assert isinstance(result, Assessment)
    assert result.scope == "safe \ufffdtxt.exe\ufffd and \ufffdisolated\ufffd"


def test_tools_cap_their_output(sample_repo: Path) -> None:
    tools = RepoTools(sample_repo, max_read_bytes=200, max_grep_matches=3)

    text, is_error = tools.run("read", {"path": "notes_api/auth/tokens.py"})
    assert not is_error and len(text.encode()) < 300
    assert "[cut at 200 bytes; continue with start_line=" in text
    text, _ = tools.run("grep", {"pattern": "import"})
    lines = text.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("[stopped after 3 matches")
    assert tools.run("grep", {"pattern": "("})[1]
    assert tools.run("delete", {"path": "x"})[1]
    text, is_error = tools.run("glob", {"pattern": "notes_api/**/tokens.py"})
    assert (text, is_error) == ("notes_api/auth/tokens.py", False)


# -- validation and the repair round -------------------------------------------------------------


def test_invalid_answer_gets_one_repair_round(fake: FakeAnthropic, sample_repo: Path) -> None:
    broken = {**ASSESSMENT, "complexity": "Huge"}
    del broken["risk"]
    fake.reply(answer(broken), answer(ASSESSMENT))
    provider = provider_for(fake)

    result = provider.run(assess_step(sample_repo))

    assert isinstance(result, Assessment) and result.risk == "low"
    assert len(fake.requests) == 2
    user, assistant, repair = fake.requests[1]["messages"]
    assert user == fake.requests[0]["messages"][0]
    assert json.loads(assistant["content"][0]["text"]) == broken
    assert "- complexity:" in repair["content"][0]["text"] and "- risk: Field required" in repair["content"][0]["text"]
    assert fake.requests[1]["system"] == fake.requests[0]["system"]
    assert [u["kind"] for u in provider.usage] == ["answer", "repair"]


def test_truncated_answer_is_repaired(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.reply(answer('{"complexity": "Med', stop_reason="max_tokens"), answer(ASSESSMENT))

    assert provider_for(fake, max_tokens=50).run(assess_step(sample_repo)).complexity == "Medium"
    assert "cut off at the output limit (50 tokens)" in user_texts(fake.requests[1]["messages"][-1])


def test_invalid_twice_fails_clearly(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.reply(answer({**ASSESSMENT, "complexity": "Vast"}), answer({**ASSESSMENT, "complexity": "Huge"}))

    with pytest.raises(ProviderError) as caught:
        provider_for(fake).run(assess_step(sample_repo))

    assert not isinstance(caught.value, TransientProviderError)
    message = str(caught.value)
    assert "assess" in message and "Assessment" in message and "after one repair round" in message
    assert "complexity" in message
    assert len(fake.requests) == 2
    # A wrong shape twice needs another model; a larger output limit would not help it.
    assert "WFQUEUE_MODEL" in str(caught.value.hint) and "MAX_TOKENS" not in str(caught.value.hint)


def test_an_answer_cut_at_the_output_limit_twice_says_to_raise_the_limit(fake: FakeAnthropic,
                                                                        sample_repo: Path) -> None:
    fake.reply(answer('{"complexity": "Med', stop_reason="max_tokens"),
               answer('{"complexity": "Medium", "sco', stop_reason="max_tokens"))
    with pytest.raises(ProviderError) as caught:
        provider_for(fake, max_tokens=50).run(assess_step(sample_repo))
    assert "WFQUEUE_ANTHROPIC_MAX_TOKENS" in str(caught.value.hint), caught.value.hint


def test_repair_inside_the_tool_loop_forces_the_answer(fake: FakeAnthropic, sample_repo: Path) -> None:
    bad = {**FINDINGS, "relevant_files": [{"path": "x.py", "relevance": "very", "rationale": "r"}]}
    fake.reply(tool_call("list", {}), answer(bad), answer(FINDINGS))

    result = provider_for(fake).run(explore_step(sample_repo))

    assert result == AngleFindings.model_validate(FINDINGS)
    repair = fake.requests[2]
    assert repair["tool_choice"] == {"type": "none"} and repair["tools"]
    assert "relevant_files.0.relevance" in user_texts(repair["messages"][-1])


# -- transient and permanent API errors -------------------------------------------------------------


@pytest.mark.parametrize(("status", "header", "least_wait"), [(429, "7", 7.0), (529, None, 0.0), (500, "2", 2.0),
                                                             (503, None, 0.0)])
def test_overload_and_server_errors_are_sent_again_after_the_wait(
        fake: FakeAnthropic, sample_repo: Path, status: int, header: str | None, least_wait: float) -> None:
    fake.fail(status, retry_after=header)
    fake.reply(answer(ASSESSMENT))
    slept: list[float] = []

    assert provider_for(fake, sleep=slept.append).run(assess_step(sample_repo)).complexity == "Medium"

    assert len(fake.requests) == 2 and len(slept) == 1  # the call was sent again, the step was not re-run
    assert slept[0] >= least_wait  # never sooner than the server asked


def test_a_wait_before_sending_again_is_told_to_the_agents_watcher_then_taken_back(
        fake: FakeAnthropic, sample_repo: Path) -> None:
    """The command shows why an agent stands still: the API refused its call and it sends again later."""
    fake.fail(529, retry_after="7")
    fake.reply(answer(ASSESSMENT))
    notes: list[str | None] = []
    with agent_notes.noting(notes.append):
        assert provider_for(fake, sleep=lambda _: None).run(assess_step(sample_repo)).complexity == "Medium"
    assert len(notes) == 2 and notes[1] is None, notes
    waited = re.search(r"sending again in (\d+)s", str(notes[0]))
    assert "529" in str(notes[0]) and waited and 7 <= int(waited[1]) <= 9, notes  # retry-after, plus its jitter
    # The re-sends left are this try's: the task's next try has its own (it read 0 left, then 7 left).
    assert str(notes[0]).endswith("re-sends left in this try)"), notes


def test_the_wait_note_says_what_the_api_said_whole_or_cut_at_a_word(fake: FakeAnthropic, sample_repo: Path) -> None:
    """The note beside an agent quoted the SDK's "Error code: 429 - {'type': 'error', ...}" cut at 160 characters,
    mid-word and inside a parenthesis it never closed."""
    reason = "Number of requests has exceeded your rate limit " + "for this organization and model " * 6
    fake.failures.append(error(429, retry_after="3", message=reason.strip()))
    fake.reply(answer(ASSESSMENT))
    notes: list[str | None] = []
    with agent_notes.noting(notes.append):
        provider_for(fake, sleep=lambda _: None).run(assess_step(sample_repo))
    said = str(notes[0])
    assert said.startswith("the Anthropic API answered 429: ") and "Number of requests has exceeded" in said, said
    assert "Error code" not in said and "{" not in said, said
    shown = said.split("; sending again in")[0]
    assert shown.endswith("…") and shown[:-1].split()[-1] in reason.split(), said  # a whole word before the cut


def test_a_step_past_its_resend_budget_leaves_the_retry_to_its_task(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.fail(529, times=3, retry_after="4")
    slept: list[float] = []
    provider = provider_for(fake, sleep=slept.append, retry_policy=RetryPolicy(step_retries=2))

    with pytest.raises(TransientProviderError) as caught:
        provider.run(assess_step(sample_repo))

    assert len(fake.requests) == 3 and len(slept) == 2
    assert "529" in str(caught.value) and "assess" in str(caught.value) and "re-sends are spent" in str(caught.value)
    assert caught.value.retry_after is not None and caught.value.retry_after >= 4


def test_no_resend_past_the_step_deadline(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.fail(429, retry_after="120")
    slept: list[float] = []
    provider = provider_for(fake, sleep=slept.append, step_time_s=30)

    with pytest.raises(TransientProviderError, match="time limit"):
        provider.run(assess_step(sample_repo))

    assert slept == [] and len(fake.requests) == 1


@pytest.mark.parametrize("fault", ["timeout", "stall_stream"])
def test_a_silent_api_does_not_hold_a_step_past_its_time_limit(fault: str, sample_repo: Path) -> None:
    """The SDK waits up to 10 minutes for a request's (or a stream's next) bytes; in the threads pool no Celery
    time limit stops the step, so a stalled answer held an agent 10 minutes a try, whatever its time limit."""
    with FakeAnthropic(faults=Always(Fault(fault, hold_s=60))) as server:
        server.reply(answer(ASSESSMENT))
        provider = provider_for(server, step_time_s=2.5, retry_policy=RetryPolicy(deadline_margin_s=0.5))
        started = time.monotonic()
        with pytest.raises(TransientProviderError, match="time limit"):
            provider.run(assess_step(sample_repo))
        took = time.monotonic() - started
        assert server.faulted()[fault] >= 1
    assert took < 10, f"the step was held {took:.1f}s past its 2.5 s time limit"


def test_an_answer_and_its_repair_both_cut_mid_stream_is_tried_again_later(sample_repo: Path) -> None:
    """Two dropped streams in a row failed the step for good, with the advice to raise the output limit: the
    network's fault read as the model's."""
    with FakeAnthropic(faults={1: "cut_stream", 2: "cut_stream"}) as server:
        server.reply(answer(ASSESSMENT))
        provider = provider_for(server)
        with pytest.raises(TransientProviderError, match="cut off mid-stream") as caught:
            provider.run(assess_step(sample_repo))
        assert "MAX_TOKENS" not in caught.value.hint and server.faulted()["cut_stream"] == 2
        # The task's retry runs the step afresh, and the answer comes whole this time.
        assert provider.run(assess_step(sample_repo)).complexity == "Medium"
    assert len(server.requests) == 3


def prompt_tokens(entry: dict[str, Any]) -> int:
    return int(entry["input_tokens"] + entry["cache_creation_input_tokens"] + entry["cache_read_input_tokens"])


def test_a_send_that_broke_off_after_its_answer_began_is_on_the_bill(sample_repo: Path) -> None:
    """A tool call cut off mid-stream was sent again and only the answer that came back was recorded: the API bills
    the prompt and what the model wrote of the first, and a flaky network let a budget be overrun unseen."""
    with FakeAnthropic(faults={1: "cut_stream"}) as server:
        server.reply(tool_call("grep", {"pattern": "def "}), answer(FINDINGS))
        provider = provider_for(server)
        assert isinstance(provider.run(explore_step(sample_repo)), AngleFindings)
        assert server.faulted()["cut_stream"] == 1 and len(server.requests) == 3
    broken, resent, _ = provider.usage
    assert [e["kind"] for e in provider.usage] == ["turn-1", "turn-1", "turn-2"]
    assert broken["broken"] is True and broken["estimated"] is True and "broken" not in resent
    assert prompt_tokens(broken) == prompt_tokens(resent) > 0  # the same prompt, as message_start reported it
    assert broken["output_tokens"] >= 1 and resent["resent"] == 1
    assert provider.usage_totals()["calls"] == 3


def test_a_stream_the_api_broke_off_with_an_error_event_is_sent_again_and_on_the_bill(sample_repo: Path) -> None:
    """An overloaded_error event inside a 200 stream, after the model began: sent again, as a cut stream is, and
    what it began is billed."""
    with FakeAnthropic(faults={1: "error_event"}) as server:
        server.reply(tool_call("grep", {"pattern": "def "}), answer(FINDINGS))
        provider = provider_for(server)
        assert isinstance(provider.run(explore_step(sample_repo)), AngleFindings)
        assert server.faulted()["error_event"] == 1
    assert [(e["kind"], e.get("broken", False)) for e in provider.usage] == [
        ("turn-1", True), ("turn-1", False), ("turn-2", False)]


def test_sends_that_broke_off_are_recorded_when_the_step_then_gives_up(sample_repo: Path) -> None:
    """Past its re-send budget the step raised, and what its broken sends cost was never recorded anywhere: the
    task's retry resumes from the journal, which now holds them."""
    with FakeAnthropic(faults=Always("cut_stream")) as server:
        server.reply(tool_call("grep", {"pattern": "def "}))
        provider = provider_for(server, retry_policy=RetryPolicy(step_retries=1))
        with pytest.raises(TransientProviderError, match="re-sends are spent"):
            provider.run(explore_step(sample_repo))
        assert len(server.requests) == 2
    assert [(e["kind"], e.get("broken")) for e in provider.usage] == [("turn-1", True), ("turn-1", True)]
    assert [e.get("broken") for e in provider.journal.calls] == [True, True]  # type: ignore[attr-defined]


def test_an_answer_cut_mid_stream_counts_the_text_that_arrived(sample_repo: Path) -> None:
    """Kept for its text and repaired, the cut answer was recorded with message_start's output count: 1 token."""
    with FakeAnthropic(faults={1: "cut_stream"}) as server:
        server.reply(answer(ASSESSMENT))
        provider = provider_for(server)
        assert provider.run(assess_step(sample_repo)).complexity == "Medium"
    cut = provider.usage[0]
    assert cut["stop_reason"] is None and cut["estimated"] is True and "broken" not in cut
    assert cut["output_tokens"] > 1


def test_client_errors_are_permanent(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.reply(error(400, message="bad schema"))

    with pytest.raises(ProviderError) as caught:
        provider_for(fake).run(assess_step(sample_repo))

    assert not isinstance(caught.value, TransientProviderError)
    assert "400" in str(caught.value) and "bad schema" in str(caught.value)


def test_a_refused_key_names_both_settings_it_may_come_from(fake: FakeAnthropic, sample_repo: Path) -> None:
    """The hint said "check ANTHROPIC_API_KEY" to a user who had set WFQUEUE_ANTHROPIC_API_KEY."""
    fake.reply(error(401, message="invalid x-api-key"))
    with pytest.raises(ProviderError) as caught:
        provider_for(fake).run(assess_step(sample_repo))
    assert "WFQUEUE_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY" in caught.value.hint


def test_a_prompt_too_long_for_the_model_says_to_shorten_the_requirement(fake: FakeAnthropic,
                                                                         sample_repo: Path) -> None:
    fake.reply(error(400, message="prompt is too long: 310232 tokens > 200000 maximum"))
    with pytest.raises(ProviderError) as caught:
        provider_for(fake).run(assess_step(sample_repo))
    assert "context window: shorten the requirement" in caught.value.hint
    assert "WFQUEUE_MODEL" not in caught.value.hint


def test_sdk_retries_stay_configurable(fake: FakeAnthropic, sample_repo: Path) -> None:
    fake.fail(529, retry_after_ms="5")
    fake.reply(answer(ASSESSMENT))
    slept: list[float] = []

    assert provider_for(fake, max_retries=1, sleep=slept.append).run(assess_step(sample_repo)).complexity == "Medium"
    assert len(fake.requests) == 2 and slept == []  # the SDK re-sent it; wfqueue never had to


def test_connection_errors_are_sent_again_then_left_to_the_task(sample_repo: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    slept: list[float] = []
    provider = AnthropicProvider(model="claude-test", api_key="test-key", base_url=f"http://127.0.0.1:{port}",
                                 retry_policy=RetryPolicy(step_retries=1), sleep=slept.append)

    with pytest.raises(TransientProviderError) as caught:
        provider.run(assess_step(sample_repo))

    assert len(slept) == 1 and "could not be reached" in str(caught.value)
    assert f"the Anthropic API at http://127.0.0.1:{port}" in str(caught.value)  # a mistyped base URL is seen


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412500.0) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_missing_credentials_are_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no SDK profile on disk either
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))

    with pytest.raises(ConfigError, match="no Anthropic credentials"):
        AnthropicProvider(model="claude-test", base_url="http://127.0.0.1:9")


def test_endpoint_comes_from_anthropic_base_url(fake: FakeAnthropic, sample_repo: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    fake.reply(answer(ASSESSMENT))

    AnthropicProvider(model="claude-test", api_key="test-key").run(assess_step(sample_repo))

    assert len(fake.requests) == 1


# -- prompt caching ------------------------------------------------------------------------------------



def test_agents_of_one_session_share_one_repository_listing(fake: FakeAnthropic, sample_repo: Path) -> None:
    """The listing is made once per session and process: a file added while the agents run does not make
    the second agent's prefix differ (which would cost it the prompt cache); the next session lists it."""
    shared = analysis()

    def step(session: str, area: str) -> PlanAreaStep:
        return PlanAreaStep(session_id=session, repo=str(sample_repo), requirement=REQUIREMENT, analysis=shared,
                            focus_area=area)

    fake.reply(answer(area_draft(1)), answer(area_draft(101)), answer(area_draft(1)))
    provider_for(fake).run(step("CPLAN-listing-1", "auth"))
    (sample_repo / "late_module.py").write_text("LATE = True\n")
    provider_for(fake).run(step("CPLAN-listing-1", "storage"))
    provider_for(fake).run(step("CPLAN-listing-2", "auth"))
    first, second, next_session = (request["system"][0]["text"] for request in fake.requests)
    assert first == second and "late_module.py" not in second
    assert "late_module.py" in next_session

def test_agents_share_a_cached_prefix(fake: FakeAnthropic, sample_repo: Path) -> None:
    shared = analysis()
    steps = [PlanAreaStep(session_id="CPLAN-1", repo=str(sample_repo), requirement=REQUIREMENT, analysis=shared,
                          focus_area=area) for area in ("auth", "storage")]
    fake.reply(answer(area_draft(1)), answer(area_draft(101)))
    agents = [provider_for(fake), provider_for(fake)]  # two workers, one server

    drafts = [agent.run(step) for agent, step in zip(agents, steps, strict=True)]

    assert [d.tasks[0].id for d in drafts] == ["TASK-001", "TASK-101"]
    first, second = fake.requests
    assert first["system"] == second["system"]
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "<requirement_analysis>" in first["system"][0]["text"]
    assert first["messages"] != second["messages"]
    assert "`auth`" in user_texts(first["messages"][0]) and "`storage`" in user_texts(second["messages"][0])
    assert "TASK-101 to TASK-200" in user_texts(second["messages"][0])
    one, two = agents[0].usage[0], agents[1].usage[0]
    assert one["cache_creation_input_tokens"] > 0 and one["cache_read_input_tokens"] == 0
    assert two["cache_read_input_tokens"] > 0
    # Agent 2 reads exactly the shared prefix (tools + system block 1) that agent 1 wrote; agent 1 also
    # wrote its own first message (the loop's tail breakpoint), which agent 2 cannot use.
    shared_tokens, first_tail = breakpoint_tokens(first)
    assert two["cache_read_input_tokens"] == shared_tokens
    assert one["cache_creation_input_tokens"] == first_tail
    assert agents[1].usage_totals()["cache_read_input_tokens"] == two["cache_read_input_tokens"]
    prompts = [build_prompt(step, "listing", tools=True) for step in steps]
    assert prompts[0].system == prompts[1].system and prompts[0].messages != prompts[1].messages
