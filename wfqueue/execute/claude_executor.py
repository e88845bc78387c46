"""The ``claude`` executor: a coding tool loop on the Anthropic Messages API, inside one worktree.

The model gets the task's prompt and the tools of wfqueue.execute.coding_tools (read, list, glob,
grep, edit, write, run a test command), confined to the worktree. It works until it answers without
calling a tool: that answer is the run's output, and whatever it left in the worktree is committed
by the caller. A run that reaches its turn cap or tool-call cap ends ``ok=False`` and says which.

It is built from the planning provider's parts, not beside them:

- every call goes through ``calls.Caller``: streamed, re-sent on 429/529/5xx, dropped connections
  and cut streams (honouring ``retry-after`` and learned rate limits), paced by the shared limiter;
  a step whose re-sends are spent raises TransientProviderError for its task to retry later;
- the conversation is a ``turns.Transcript`` saved in a ``TurnJournal`` under the run's ``step``
  label (the session's Redis journal when built with a session state), and each call's usage is
  saved in the same write, so usage is recorded once;
- the session's ``--budget`` is checked before every call (metering.check_session_budget).

Durability: a run that starts again (a redelivered or retried task) loads its transcript and goes
on from there; no answered request is sent again. A turn is saved right after its call (the reply
and its usage), then after each of its tool calls (the result so far; before an edit, the digests of
the file it changes, as it is and as the edit leaves it). A restart runs only the tool calls
without a saved result, with the same inputs, instead of paying for the call again: reads and test
runs simply repeat, ``write_file`` writes the same bytes, and an ``edit_file`` whose file holds
what the edit makes is answered as applied. A finished run (done or capped) answers its saved outcome.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
import redis

from wfqueue.errors import (
    BudgetExhaustedError,
    ConfigError,
    ProviderError,
    ToolError,
    TransientProviderError,
    WfqueueError,
)
from wfqueue.execute.coding_tools import CODING_TOOL_DEFINITIONS, CodingTools
from wfqueue.execute.executors import ExecutorName, ExecutorResult
from wfqueue.fsio import atomic_write_text
from wfqueue.markdown import printable
from wfqueue.metering import check_session_budget
from wfqueue.providers.anthropic.calls import Caller, RetryPolicy
from wfqueue.providers.anthropic.client import (
    USAGE_FIELDS,
    _assistant_turn,
    _tool_uses,
    _with_tail_cache,
    broken_entries,
    reported_usage,
)
from wfqueue.ratelimit import RateLimiter
from wfqueue.turns import MemoryJournal, SessionJournal, Transcript, TurnJournal, journal_key, transcript_jsonl
from wfqueue.usage import PriceTable

if TYPE_CHECKING:
    from wfqueue.settings import Settings
    from wfqueue.state import SessionStore

__all__ = ["SYSTEM_PROMPT", "ClaudeExecutor", "CodingCaps", "claude_executor"]

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You make one change to a software repository, working in a git worktree of it. Use the tools to read the "
    "code, make the change with edit_file and write_file, and check it with run_command (tests, builds). All "
    "paths are relative to the worktree root. Do not run git and do not commit: the worktree is committed for "
    "you when you are done. Change only what the task asks for. When the change is complete, stop calling "
    "tools and answer with a short summary of what you changed and how you checked it."
)
CUT_TEXT = ("Your reply was cut off before it ended ({why}), so its tool calls were not run. Continue, in "
            "smaller steps: a short old_string for edit_file, one file per write_file.")
TRANSCRIPT_DIR = "transcripts"
STOPS_FAILING = {
    "refusal": "the model refused the task",
    "model_context_window_exceeded": "the conversation outgrew the model's context window; split the task",
}


@dataclass(frozen=True)
class CodingCaps:
    """The limits of one coding run."""

    max_tokens: int = 16_000  # output tokens per request
    max_turns: int = 40  # model calls
    max_tool_calls: int = 150  # tool calls over the whole run
    command_timeout_s: float = 300.0  # one run_command
    max_read_bytes: int = 32_000
    max_grep_matches: int = 100
    max_list_entries: int = 300
    max_file_bytes: int = 1_000_000


def tool_calls_made(transcript: Transcript) -> int:
    """Tool calls the model asked for so far (every tool_use block of its replies). Pure."""
    return sum(1 for message in transcript.history if message.get("role") == "assistant"
               for block in message.get("content") or [] if isinstance(block, dict) and block.get("type") == "tool_use")


def awaiting_tools(transcript: Transcript) -> bool:
    """The last reply asked for tools whose results are not saved yet. Pure."""
    last = transcript.history[-1] if transcript.history else None
    return (transcript.phase == "loop" and transcript.pending is None and last is not None
            and last.get("role") == "assistant"
            and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in last.get("content") or []))


class ClaudeExecutor:
    """Implements wfqueue.execute.executors.Executor; see the module docstring."""

    name: ExecutorName = "claude"

    def __init__(self, client: anthropic.Anthropic, *, model: str, state: SessionStore | None = None,
                 prices: PriceTable | None = None, journal: TurnJournal | None = None,
                 limiter: RateLimiter | None = None, retry_policy: RetryPolicy | None = None,
                 caps: CodingCaps | None = None, step_time_s: float | None = None,
                 transcript_dir: Path | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.model = model
        self.state = state
        self.prices = prices
        # The session's journal when there is a session: turns and their usage in its Redis state.
        self.journal: TurnJournal = journal or (SessionJournal(state) if state is not None else MemoryJournal())
        self.limiter = limiter
        self.retry_policy = retry_policy or RetryPolicy()
        self.caps = caps or CodingCaps()
        self.step_time_s = step_time_s  # calls are not re-sent past it; the task retries and resumes instead
        self.transcript_dir = transcript_dir
        self._sleep = sleep

    # -- the protocol ----------------------------------------------------------------------------

    def run(self, prompt: str, worktree: Path, step: str) -> ExecutorResult:
        label = f"execute {step}"
        caps = self.caps
        try:
            tools = CodingTools(worktree, command_timeout_s=caps.command_timeout_s, max_read_bytes=caps.max_read_bytes,
                                max_grep_matches=caps.max_grep_matches, max_list_entries=caps.max_list_entries,
                                max_file_bytes=caps.max_file_bytes)
        except (OSError, ToolError) as exc:
            return ExecutorResult(ok=False, error=f"{label}: cannot open the worktree {worktree}: {exc}")
        key = journal_key(label, prompt)
        with self.journal.running(key, label):  # a second run of the step waits, then reads what this one saved
            return self._run_held(key, label, prompt, tools)

    def _run_held(self, key: str, label: str, prompt: str, tools: CodingTools) -> ExecutorResult:
        system = [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
        first = {"role": "user", "content": [{"type": "text", "text": prompt}]}
        transcript = self.journal.load(key) or Transcript(step=key, label=label, system=system, pending=first)
        try:
            transcript = self._loop(label, transcript, tools)
        except BudgetExhaustedError as exc:
            saved = self.journal.load(key) or transcript
            return ExecutorResult(ok=False, error=f"{label}: {exc.message}", output=printable(self._last_text(saved)))
        except TransientProviderError:
            raise  # the task retries later and resumes at the last saved turn
        except ProviderError as exc:
            return ExecutorResult(ok=False, error=str(exc))
        finally:
            self._keep_transcript(key, label)
        if transcript.phase == "done":
            return ExecutorResult(ok=True, output=printable(transcript.answer or ""))
        return ExecutorResult(ok=False, output=printable(self._last_text(transcript)), error=transcript.error)

    # -- the loop ---------------------------------------------------------------------------------

    def _loop(self, label: str, transcript: Transcript, tools: CodingTools) -> Transcript:
        caller = Caller(self.client, self.retry_policy, self.limiter, sleep=self._sleep)
        deadline = time.monotonic() + self.step_time_s if self.step_time_s else None
        while not transcript.finished:
            if awaiting_tools(transcript):
                transcript = self._answer_tools(tools, transcript)
                self.journal.save(transcript, None)
                continue
            if self.state is not None and self.prices is not None:
                check_session_budget(self.state, self.prices)
            request = {
                "model": self.model,
                "max_tokens": self.caps.max_tokens,
                "system": transcript.system,
                "messages": _with_tail_cache(transcript.messages()),
                "tools": CODING_TOOL_DEFINITIONS,
            }
            resent_before = caller.resent
            kind = f"turn-{transcript.turns + 1}"
            try:
                response = caller.call(label, request, deadline)
            finally:
                for broken in broken_entries(label, kind, request, caller):
                    self.journal.save(transcript, broken)
            call: dict[str, Any] = {"step": label, "kind": kind, "model": response.model,
                                    "stop_reason": response.stop_reason, "resent": caller.resent - resent_before,
                                    **reported_usage(request, response)}
            transcript = advance(transcript, response, self.caps, used=sum(int(call[f]) for f in USAGE_FIELDS))
            transcript.calls.append(call)
            self.journal.save(transcript, call)
        return transcript

    def _answer_tools(self, tools: CodingTools, transcript: Transcript) -> Transcript:
        """``transcript`` with the user turn answering the last reply's tool calls, in order.

        Each result is saved as it comes (``tool_results``), and before an edit runs, the digests of its file as it
        is and as the edit leaves it: a restarted turn (the worker died during a long test run after an edit) runs
        only the calls that had not finished, and an edit that finished without its result saved is recognised by
        its file holding what the edit made. Running such an edit again inserted its text twice when it kept its
        anchor."""
        saved = {entry.get("tool_use_id"): entry for entry in transcript.tool_results}
        results: list[dict[str, Any]] = []

        def save(entry: dict[str, Any]) -> None:
            nonlocal transcript
            transcript = transcript.model_copy(update={"tool_results": [*results, entry]})
            self.journal.save(transcript, None)

        for block in _tool_use_blocks(transcript.history[-1]):
            name, arguments, entry = str(block.get("name")), block.get("input"), saved.get(block["id"])
            if entry is not None and "before_edit" not in entry:
                results.append(entry)  # finished before the restart
                continue
            if name == "edit_file":
                now, after = tools.edit_digests(arguments)
                if entry is not None and entry.get("after_edit") is not None and now == entry["after_edit"]:
                    path = arguments.get("path") if isinstance(arguments, dict) else None
                    results.append(_tool_result(block["id"], f"edited {path}: the edit was applied before the "
                                                             "worker restarted", False))
                    save(results[-1])
                    continue
                save({"tool_use_id": block["id"], "before_edit": now, "after_edit": after})
            text, is_error = tools.run(name, arguments)
            results.append(_tool_result(block["id"], text, is_error))
            save(results[-1])
        return transcript.model_copy(update={"pending": {"role": "user", "content": results}, "tool_results": []})

    @staticmethod
    def _last_text(transcript: Transcript) -> str:
        for message in reversed(transcript.history):
            if message.get("role") == "assistant":
                texts = [b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text"]
                if any(texts):
                    return "\n".join(t for t in texts if t)
        return ""

    def _keep_transcript(self, key: str, label: str) -> None:
        if self.transcript_dir is None:
            return
        try:
            transcript = self.journal.load(key)
            if transcript is not None:
                name = re.sub(r"[^A-Za-z0-9_.-]+", "-", label) + ".jsonl"
                atomic_write_text(self.transcript_dir / name, transcript_jsonl(transcript))
        except (OSError, redis.RedisError, WfqueueError, ValueError) as exc:
            # An audit copy that cannot be written never hides the run's own outcome.
            log.warning("could not keep the transcript of %s in %s: %s", label, self.transcript_dir, exc)


def advance(transcript: Transcript, response: Any, caps: CodingCaps, *, used: int) -> Transcript:
    """The transcript after the model's ``response`` (whose call used ``used`` tokens): tools to run, the final
    answer, or a cap. Pure."""
    turns = transcript.turns + 1
    spent = transcript.spent_tokens + used
    update: dict[str, Any] = {"turns": turns, "spent_tokens": spent, "pending": None,
                              "calls": list(transcript.calls)}
    if response.stop_reason in (None, "max_tokens"):
        # Cut off: tool inputs may be incomplete, so only its text is kept and the model is asked to go on.
        why = "the output limit" if response.stop_reason == "max_tokens" else "the stream ended early"
        texts = [{"type": "text", "text": b.text} for b in response.content if b.type == "text" and b.text]
        history = [*transcript.messages(), {"role": "assistant", "content": texts or [{"type": "text", "text": "…"}]}]
        update |= {"history": history, "pending": {"role": "user", "content": [
            {"type": "text", "text": CUT_TEXT.format(why=why)}]}}
        return _capped(transcript.model_copy(update=update), caps)
    update["history"] = [*transcript.messages(), _assistant_turn(response)]
    if response.stop_reason in STOPS_FAILING:
        return transcript.model_copy(update={**update, "phase": "failed", "error": STOPS_FAILING[response.stop_reason]})
    if response.stop_reason == "tool_use" and _tool_uses(response):
        return _capped(transcript.model_copy(update=update), caps)
    answer = "".join(b.text for b in response.content if b.type == "text").strip()
    return transcript.model_copy(update={**update, "phase": "done", "answer": answer})


def _capped(transcript: Transcript, caps: CodingCaps) -> Transcript:
    """``transcript`` failed when its next step would pass a cap, else as it is. Pure."""
    made = tool_calls_made(transcript)
    if made > caps.max_tool_calls:
        error = (f"stopped at the tool-call cap: the model asked for {made} tool calls, the cap is "
                 f"{caps.max_tool_calls}; split the task or raise the cap")
    elif transcript.turns >= caps.max_turns:
        error = (f"stopped at the turn cap: {transcript.turns} model calls without a final answer; split the task "
                 "or raise the cap")
    else:
        return transcript
    return transcript.model_copy(update={"phase": "failed", "error": error, "pending": None})


def _tool_use_blocks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in reply.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"]


def _tool_result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text or "(no output)"}
    if is_error:
        result["is_error"] = True
    return result


def claude_executor(settings: Settings, state: SessionStore | None, exec_dir: Path) -> ClaudeExecutor:
    """The claude executor as the settings describe it: the session's journal and budget, the shared
    limiter, transcripts kept in ``exec_dir/transcripts``."""
    from wfqueue.ratelimit import limiter_from_settings, model_family

    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value():
        raise ConfigError("the claude executor needs an Anthropic API key, and none is configured",
                          hint="set ANTHROPIC_API_KEY, or use --executor command")
    options: dict[str, Any] = {"api_key": key.get_secret_value(), "max_retries": settings.anthropic_max_retries}
    if settings.anthropic_timeout_s is not None:
        options["timeout"] = settings.anthropic_timeout_s
    # No base_url here: the SDK reads ANTHROPIC_BASE_URL itself.
    client = anthropic.Anthropic(**options)
    return ClaudeExecutor(
        client, model=settings.model, state=state, prices=PriceTable(settings.price_table),
        limiter=limiter_from_settings(settings, scope=f"anthropic:{model_family(settings.model)}"),
        retry_policy=RetryPolicy(step_retries=settings.anthropic_step_retries, backoff_s=settings.retry_backoff_s,
                                 backoff_max_s=settings.retry_backoff_max_s),
        caps=CodingCaps(
            max_tokens=settings.anthropic_max_tokens, max_turns=settings.executor_max_turns,
            max_tool_calls=settings.executor_max_tool_calls,
            command_timeout_s=min(settings.executor_timeout_s, settings.executor_command_timeout_s),
            max_read_bytes=settings.repo_tool_max_read_bytes, max_grep_matches=settings.repo_tool_max_grep_matches,
            max_list_entries=settings.repo_tool_max_list_entries, max_file_bytes=settings.index_max_file_bytes),
        step_time_s=settings.executor_timeout_s,
        transcript_dir=exec_dir / TRANSCRIPT_DIR,
    )
