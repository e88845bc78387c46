"""The Anthropic provider: planning steps answered by Claude through the Messages API.

Structured output: every request carries ``output_config.format`` (a JSON
schema derived from the step's ``output_model``, see ``schema.py``), so the
model's final text is constrained to the schema; the text is then validated
with pydantic. The raw reply is kept rather than parsed by the SDK: a bad
answer's text is needed for the repair round and its usage for cost
accounting, and the SDK's own schema transform leaves the output models above
the API's grammar limits.

Exploration angles and sub-domain planning run a bounded tool-use loop: the
read-only repository tools and the output format are on the same request, so
the model calls tools (``stop_reason == "tool_use"``) until it answers with
the JSON text. When the turn or token budget is spent the last request sets
``tool_choice: none``, which forces the answer. Tools stay defined on that
request, as the history holds tool_use blocks, and the cached prefix still matches.

A bad answer (not JSON, cut at max_tokens, a stream cut off midway, or JSON
that does not validate) gets one repair round with the errors; after that the
step fails with a ProviderError naming them.

Durable turns (wfqueue.turns): after every call that came back, the step's
transcript and the call's usage are saved in one write to the provider's
``journal``. A step that starts again (a task retry, a redelivery, a resume)
continues after its last saved call and sends no completed turn twice.

Each call is streamed and retried around itself (``calls.Caller``): 429, 529,
5xx, timeouts and dropped connections are sent again within the step's retry
budget and its deadline, honouring ``retry-after`` and the rate-limit reset
headers; only then does the step raise TransientProviderError for its task
to retry later. With a ``limiter`` (wfqueue.ratelimit, shared by all workers
through Redis) every call first takes a permit, and every response's
rate-limit headers teach the limiter the account's real limits.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

import anthropic
from pydantic import BaseModel, ValidationError

from wfqueue.errors import ConfigError, ProviderError, ToolError, TransientProviderError
from wfqueue.markdown import printable
from wfqueue.per_process import PerProcess
from wfqueue.providers.anthropic.calls import Caller, RetryPolicy, broken_counts, counts_reported, estimated_counts
from wfqueue.providers.anthropic.prompts import FINAL_TURN_TEXT, build_prompt, repair_text
from wfqueue.providers.anthropic.schema import output_format
from wfqueue.providers.anthropic.tools import TOOL_DEFINITIONS, RepoTools
from wfqueue.providers.base import ExploreAngleStep, PlanAreaStep, Step
from wfqueue.ratelimit import RateLimiter
from wfqueue.turns import MemoryJournal, Transcript, TurnJournal, journal_key

__all__ = ["AnthropicProvider"]

_clients: PerProcess[tuple[int, str], anthropic.Anthropic] = PerProcess()
# The repository listing in the prompt prefix that every agent of a session shares: made once per session
# and process, not walked again by each of 100 agents (and the same for all of them, as the prompt cache needs).
_summaries: PerProcess[tuple[str, str, int], str] = PerProcess(keep=16)


def _shared_client(options: dict[str, Any]) -> anthropic.Anthropic:
    """One SDK client per process and options. A provider is built per task, and a new client costs a TLS
    context (its CA certificates loaded) and new connections; the SDK's client is safe to share between the
    threads of a threads pool. The process id is in the key: a forked pool child makes its own."""
    return _clients.get((os.getpid(), repr(sorted(options.items()))), lambda: anthropic.Anthropic(**options))


TOOL_STEPS = (ExploreAngleStep, PlanAreaStep)
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
MAX_ERRORS_SHOWN = 20


def reported_usage(request: dict[str, Any], response: Any) -> dict[str, Any]:
    """The call's token counts as the API reported them; where it reported no input or output count (a proxy
    that drops ``usage``, a null, a negative number), both are estimated from the request's and the answer's
    size and the entry says so: counted as 0, every such call was free and a budget never stopped anything."""
    if getattr(response, "stop_reason", None) is None:
        # An answer cut off mid-stream, kept for its text (calls.Caller._cut): its counts are message_start's, whose
        # output count (1) stands for the start of the answer, not what arrived of it.
        counts = broken_counts(request, response)
        del counts["broken"]  # an answer, repaired next: not a broken send
        return counts
    usage = getattr(response, "usage", None)
    if counts_reported(usage):
        counts = {name: getattr(usage, name, None) for name in USAGE_FIELDS}
        return {name: value if isinstance(value, int) and value >= 0 else 0 for name, value in counts.items()}
    sent, answered = estimated_counts(request, response)
    return {"input_tokens": sent, "output_tokens": answered, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "estimated": True}


def broken_entries(label: str, kind: str, request: dict[str, Any], caller: Caller) -> list[dict[str, Any]]:
    """Usage entries for the sends of one call that broke off after their answer began (calls.broken_counts):
    billed by the API, recorded beside the call's own entry whether it then came back or failed the step."""
    return [{"step": label, "kind": kind, "model": request["model"], "stop_reason": None, **counts}
            for counts in caller.take_broken()]


def _block_param(block: Any) -> dict[str, Any] | None:
    """A response content block as a request content block (None for an empty text)."""
    if block.type == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    other: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    return other


def _assistant_turn(response: Any) -> dict[str, Any]:
    content = [p for p in (_block_param(b) for b in response.content) if p is not None]
    return {"role": "assistant", "content": content or [{"type": "text", "text": "(no answer)"}]}


def _tool_uses(response: Any) -> list[Any]:
    return [b for b in response.content if b.type == "tool_use"]


def _with_tail_cache(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy whose last block carries cache_control, so the next turn of the loop reads the
    conversation so far from the cache (one breakpoint besides the system one; the API allows four)."""
    if not messages:
        return messages
    last = dict(messages[-1])
    content = last["content"]
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
    )
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    last["content"] = blocks
    return [*messages[:-1], last]


def _format_errors(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    lines = [f"- {'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in errors[:MAX_ERRORS_SHOWN]]
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"- ... and {len(errors) - MAX_ERRORS_SHOWN} more")
    return "\n".join(lines)


class AnthropicProvider:
    """Answers planning steps with Claude; see the module docstring for the protocol it follows."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 16_000,
        max_turns: int = 12,
        max_step_tokens: int = 500_000,
        max_retries: int = 0,
        timeout_s: float | None = None,
        max_read_bytes: int = 32_000,
        max_grep_matches: int = 100,
        max_list_entries: int = 300,
        max_file_bytes: int = 1_000_000,
        summary_max_files: int = 400,
        client: anthropic.Anthropic | None = None,
        limiter: RateLimiter | None = None,
        journal: TurnJournal | None = None,
        retry_policy: RetryPolicy | None = None,
        step_time_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_turns < 1 or max_tokens < 1:
            raise ValueError("max_turns and max_tokens must be at least 1")
        self.model: str | None = model
        self.max_tokens = max_tokens
        self.max_turns = max_turns
        self.max_step_tokens = max_step_tokens
        self.tool_caps = {"max_read_bytes": max_read_bytes, "max_grep_matches": max_grep_matches,
                          "max_list_entries": max_list_entries, "max_file_bytes": max_file_bytes}
        self.summary_max_files = summary_max_files
        self.usage: list[dict[str, Any]] = []
        # Where turns are saved between attempts at a step; a metered provider gives it the session's.
        self.journal: TurnJournal = journal if journal is not None else MemoryJournal()
        self.retry_policy = retry_policy or RetryPolicy()
        self.step_time_s = step_time_s  # the task's soft time limit: calls are not re-sent past it
        self._sleep = sleep
        if client is None:
            options: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "max_retries": max_retries}
            if timeout_s is not None:
                options["timeout"] = timeout_s
            try:
                client = _shared_client(options)
            except anthropic.AnthropicError as exc:
                raise ConfigError(f"the Anthropic client cannot start: {exc}",
                                  hint="set ANTHROPIC_API_KEY, or use --provider offline") from None
            if not any(getattr(client, attr, None) for attr in ("api_key", "auth_token", "credentials")):
                raise ConfigError("no Anthropic credentials: the anthropic provider needs an API key",
                                  hint="set ANTHROPIC_API_KEY, or use --provider offline")
        self._client = client
        self._limiter = limiter
        # Called before every model call (a metered provider checks the session's budget there): a step of many
        # tool turns must not run past a spent budget because the budget was fine when the step began.
        self.before_call: Callable[[], None] = lambda: None

    # -- the protocol -------------------------------------------------------------------

    def run(self, step: Step) -> BaseModel:
        try:
            repo = RepoTools(step.repo, **self.tool_caps)
        except (OSError, ValueError, ToolError) as exc:
            raise ProviderError(f"{step.label}: cannot open the repository {step.repo}: {exc}") from None
        with_tools = isinstance(step, TOOL_STEPS)
        key = journal_key(step.label, step.model_dump_json())
        # One run of a step at a time (wfqueue.step_runner): a second, sent while this one runs, waits and then
        # reads what this one saved, rather than send the same turn again.
        with self.journal.running(key, step.label):
            return self._run_held(step, repo, with_tools, key)

    def _run_held(self, step: Step, repo: RepoTools, with_tools: bool, key: str) -> BaseModel:
        transcript = self.journal.load(key)
        if transcript is None or transcript.phase == "failed":
            # A failed step is tried afresh when asked again (wfqueue resume); its old transcript was exported.
            summary = _summaries.get((step.session_id, str(repo.root), self.summary_max_files),
                                     lambda: repo.summary(self.summary_max_files))
            prompt = build_prompt(step, summary, tools=with_tools)
            messages = [dict(m) for m in prompt.messages]
            transcript = Transcript(step=key, label=step.label, system=prompt.system, history=messages[:-1],
                                    pending=messages[-1])
        caller = Caller(self._client, self.retry_policy, self._limiter, sleep=self._sleep)
        deadline = time.monotonic() + self.step_time_s if self.step_time_s else None
        last_stop: str | None = None  # why the model's last answer ended
        while not transcript.finished:
            transcript, request, kind, forced = self._next_request(step, transcript, with_tools)
            self.before_call()
            resent_before = caller.resent
            try:
                response = caller.call(step.label, request, deadline)
            finally:
                for broken in broken_entries(step.label, kind, request, caller):
                    self.usage.append(broken)
                    self.journal.save(transcript, broken)
            last_stop = getattr(response, "stop_reason", None)
            call = self._record(step, kind, request, response, resent=caller.resent - resent_before)
            transcript = self._advance(step, transcript, response, repo, with_tools=with_tools, forced=forced,
                                       used=sum(int(call[name]) for name in USAGE_FIELDS))
            transcript.calls.append(call)
            self.journal.save(transcript, call)
        if transcript.phase == "failed":
            if last_stop is None:
                # The repair's stream broke off (a dropped connection, a stall): the network's fault, not the
                # model's, whatever was wrong with the answer repaired. Its task tries the step afresh later (the
                # journal has it failed), as for any call the API did not answer.
                raise TransientProviderError(
                    f"{step.label}: the repair of an unusable answer was cut off mid-stream (the connection dropped "
                    f"or stalled): {transcript.error or 'no usable answer'}",
                    hint="the task tries the step again later; if it keeps happening, check the network to the "
                         "Anthropic API (ANTHROPIC_BASE_URL)")
            # A larger output limit helps only an answer the limit cut; prose or a wrong shape needs another model.
            remedy = ("raise WFQUEUE_ANTHROPIC_MAX_TOKENS: the answer was cut at the output limit"
                      if last_stop == "max_tokens" else "set WFQUEUE_MODEL to another model")
            raise ProviderError(transcript.error or f"{step.label}: failed",
                                hint=f"run the plan again; if this step keeps failing, {remedy}")
        assert transcript.answer is not None
        return step.output_model.model_validate_json(transcript.answer)

    # -- the conversation, one call at a time ----------------------------------------------

    def _next_request(self, step: Step, transcript: Transcript, with_tools: bool
                      ) -> tuple[Transcript, dict[str, Any], str, bool]:
        """The request the transcript calls for next: (transcript, request, kind, answer forced)."""
        if transcript.phase == "repair":
            kind, forced = "repair", with_tools
        else:
            turn = transcript.turns + 1
            last = not with_tools or turn >= self.max_turns or transcript.spent_tokens >= self.max_step_tokens
            forced = with_tools and last
            kind = f"turn-{turn}" if with_tools else "answer"
            pending = transcript.pending
            if forced and turn > 1 and pending is not None and isinstance(pending.get("content"), list):
                # The last turn: say why the tools went away. Derived from the transcript, so a
                # restarted step adds the same text to the same turn.
                final = {"type": "text", "text": FINAL_TURN_TEXT}
                if final not in pending["content"]:
                    pending = {**pending, "content": [*pending["content"], final]}
                    transcript = transcript.model_copy(update={"pending": pending})
        messages = transcript.messages()
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": transcript.system,
            "messages": _with_tail_cache(messages) if with_tools else messages,
            "output_config": output_format(step.output_model),
        }
        if with_tools:
            request["tools"] = TOOL_DEFINITIONS
            if forced:
                request["tool_choice"] = {"type": "none"}
        return transcript, request, kind, forced

    def _advance(self, step: Step, transcript: Transcript, response: Any, repo: RepoTools, *,
                 with_tools: bool, forced: bool, used: int) -> Transcript:
        """The transcript after ``response`` (whose call used ``used`` tokens): the next pending turn, or the
        step's outcome."""
        spent = transcript.spent_tokens + used
        history = [*transcript.messages(), _assistant_turn(response)]
        update: dict[str, Any] = {"history": history, "pending": None, "spent_tokens": spent,
                                  "calls": list(transcript.calls)}
        if transcript.phase == "loop":
            update["turns"] = transcript.turns + 1
            if with_tools and not forced and response.stop_reason == "tool_use" and _tool_uses(response):
                update["pending"] = {"role": "user", "content": self._run_tools(repo, response)}
                return transcript.model_copy(update=update)
        answer, errors = self._validate(step, response)
        if answer is not None:
            return transcript.model_copy(update={**update, "phase": "done", "answer": answer})
        if transcript.phase == "repair":
            error = (f"{step.label}: the answer does not validate against {step.output_model.__name__} "
                     f"after one repair round:\n{errors}")
            return transcript.model_copy(update={**update, "phase": "failed", "error": error})
        if response.stop_reason == "refusal":
            return transcript.model_copy(update={**update, "phase": "failed",
                                                 "error": f"{step.label}: the model refused to answer"})
        content: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": use.id, "is_error": True,
             "content": "not run: no more tool calls in this step"}
            for use in _tool_uses(response)
        ]
        truncated = response.stop_reason in ("max_tokens", None)
        content.append({"type": "text", "text": repair_text(errors, truncated=truncated,
                                                            max_tokens=self.max_tokens)})
        return transcript.model_copy(update={**update, "phase": "repair",
                                             "pending": {"role": "user", "content": content}})

    @staticmethod
    def _run_tools(repo: RepoTools, response: Any) -> list[dict[str, Any]]:
        results = []
        for use in _tool_uses(response):
            text, is_error = repo.run(use.name, use.input)
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": use.id, "content": text}
            if is_error:
                result["is_error"] = True
            results.append(result)
        return results

    @staticmethod
    def _validate(step: Step, response: Any) -> tuple[str | None, str]:
        """(the answer's JSON text, "") when it validates, else (None, the errors for the repair round)."""
        text = "".join(b.text for b in response.content if b.type == "text").strip()
        if not text:
            return None, f"- (root): the reply holds no JSON answer (stop_reason {response.stop_reason})"
        with contextlib.suppress(ValueError, RecursionError):  # not JSON: the validation below says so (repair round)
            # What the model wrote goes into Markdown files and onto the terminal: no escape sequence runs there.
            text = json.dumps(printable(json.loads(text)), ensure_ascii=False)
        try:
            step.output_model.model_validate_json(text)
        except ValidationError as exc:
            return None, _format_errors(exc)
        return text, ""

    def _record(self, step: Step, kind: str, request: dict[str, Any], response: Any, *,
                resent: int) -> dict[str, Any]:
        entry: dict[str, Any] = {"step": step.label, "kind": kind, "model": response.model,
                                 "stop_reason": response.stop_reason, "resent": resent,
                                 **reported_usage(request, response)}
        self.usage.append(entry)
        return entry

    def usage_totals(self) -> dict[str, int]:
        """Token counts summed over every call recorded so far."""
        return {f: sum(int(entry[f]) for entry in self.usage) for f in USAGE_FIELDS} | {"calls": len(self.usage)}
