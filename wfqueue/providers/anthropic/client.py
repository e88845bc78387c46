"""The Anthropic provider: planning steps answered by Claude through the Messages API.

Structured output: every request carries ``output_config.format`` (a JSON
schema derived from the step's ``output_model``, see ``schema.py``), so the
model's final text is constrained to the schema; the text is then validated
with pydantic. Requests go through ``messages.create`` rather than
``messages.parse``: ``parse`` validates inside the SDK and raises on a bad
answer, dropping the reply text (needed for the repair round) and its usage
(needed for cost accounting); it also only knows the SDK's own schema
transform, which leaves the output models above the API's grammar limits.

Exploration angles and sub-domain planning run a bounded tool-use loop: the
read-only repository tools and the output format are on the same request, so
the model calls tools (``stop_reason == "tool_use"``) until it answers with
the JSON text. When the turn or token budget is spent the last request sets
``tool_choice: none``, which forces the answer. Tools stay defined on that
request, as the history holds tool_use blocks, and the cached prefix still matches.

A bad answer gets one repair round (the validation errors are sent back);
after that the step fails with a ProviderError naming it. Rate limits,
overload, 5xx and connection errors become TransientProviderError carrying the
server's retry-after, for the Celery task to retry with backoff; SDK retries
are kept low (default 0) so no worker sleeps on a retry-after.

With a ``limiter`` (wfqueue.ratelimit, shared by all workers through Redis)
every request first takes a permit, reserving its estimated tokens, and
releases it with the actual usage when the request ends, failed or not.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

import anthropic
from pydantic import BaseModel, ValidationError

from wfqueue.errors import ConfigError, ProviderError, TransientProviderError
from wfqueue.providers.anthropic.prompts import FINAL_TURN_TEXT, build_prompt, repair_text
from wfqueue.providers.anthropic.schema import output_format
from wfqueue.providers.anthropic.tools import TOOL_DEFINITIONS, RepoTools, ToolError
from wfqueue.providers.base import ExploreAngleStep, PlanAreaStep, Step
from wfqueue.ratelimit import RateLimiter, estimate_tokens
from wfqueue.usage import Usage

__all__ = ["AnthropicProvider", "retry_after_seconds"]

TOOL_STEPS = (ExploreAngleStep, PlanAreaStep)
TRANSIENT_STATUS = frozenset({429, 529})
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
MAX_ERRORS_SHOWN = 20


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date); None when absent."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - (time.time() if now is None else now))


def _block_param(block: Any) -> dict[str, Any] | None:
    """A response content block as a request content block (None for an empty text)."""
    if block.type == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return block.model_dump(mode="json", exclude_none=True)


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
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
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
        if client is None:
            options: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "max_retries": max_retries}
            if timeout_s is not None:
                options["timeout"] = timeout_s
            try:
                client = anthropic.Anthropic(**options)
            except anthropic.AnthropicError as exc:
                raise ConfigError(f"the Anthropic client cannot start: {exc}",
                                  hint="set ANTHROPIC_API_KEY, or use --provider offline") from None
            if not any(getattr(client, attr, None) for attr in ("api_key", "auth_token", "credentials")):
                raise ConfigError("no Anthropic credentials: the anthropic provider needs an API key",
                                  hint="set ANTHROPIC_API_KEY, or use --provider offline")
        self._client = client
        self._limiter = limiter

    # -- the protocol -------------------------------------------------------------------

    def run(self, step: Step) -> BaseModel:
        try:
            repo = RepoTools(step.repo, **self.tool_caps)
        except (OSError, ValueError, ToolError) as exc:
            raise ProviderError(f"{step.label}: cannot open the repository {step.repo}: {exc}") from None
        with_tools = isinstance(step, TOOL_STEPS)
        prompt = build_prompt(step, repo.summary(self.summary_max_files), tools=with_tools)
        system, messages = prompt.system, [dict(m) for m in prompt.messages]
        spent = 0
        turn = 0
        while True:
            turn += 1
            last = not with_tools or turn >= self.max_turns or spent >= self.max_step_tokens
            if with_tools and last and turn > 1:
                messages[-1] = {**messages[-1], "content": [*messages[-1]["content"],
                                                             {"type": "text", "text": FINAL_TURN_TEXT}]}
            response = self._call(step, system, messages, with_tools=with_tools, force_answer=with_tools and last,
                                  kind=f"turn-{turn}" if with_tools else "answer")
            spent += sum(int(getattr(response.usage, f, 0) or 0) for f in USAGE_FIELDS)
            if with_tools and not last and response.stop_reason == "tool_use" and _tool_uses(response):
                messages.append(_assistant_turn(response))
                messages.append({"role": "user", "content": self._run_tools(repo, response)})
                continue
            return self._settle(step, system, messages, response, with_tools=with_tools)

    # -- steps of a run --------------------------------------------------------------------

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

    def _validate(self, step: Step, response: Any) -> tuple[BaseModel | None, str]:
        text = "".join(b.text for b in response.content if b.type == "text").strip()
        if not text:
            return None, f"- (root): the reply holds no JSON answer (stop_reason {response.stop_reason})"
        try:
            return step.output_model.model_validate_json(text), ""
        except ValidationError as exc:
            return None, _format_errors(exc)

    def _settle(self, step: Step, system: list[dict[str, Any]], messages: list[dict[str, Any]], response: Any,
                *, with_tools: bool) -> BaseModel:
        """Validate the answer; on failure one repair round with the errors; then fail loudly."""
        label = step.label
        answer, errors = self._validate(step, response)
        if answer is not None:
            return answer
        if response.stop_reason == "refusal":
            raise ProviderError(f"{label}: the model refused to answer", hint="rephrase the requirement")
        content: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": use.id, "is_error": True,
             "content": "not run: no more tool calls in this step"}
            for use in _tool_uses(response)
        ]
        content.append({"type": "text", "text": repair_text(errors, truncated=response.stop_reason == "max_tokens",
                                                            max_tokens=self.max_tokens)})
        messages = [*messages, _assistant_turn(response), {"role": "user", "content": content}]
        repaired = self._call(step, system, messages, with_tools=with_tools, force_answer=with_tools, kind="repair")
        answer, errors = self._validate(step, repaired)
        if answer is not None:
            return answer
        raise ProviderError(
            f"{label}: the answer does not validate against {step.output_model.__name__} "
            f"after one repair round:\n{errors}",
            hint="rerun the step; if it keeps failing, raise the output token limit or use another model",
        )

    def _call(self, step: Step, system: list[dict[str, Any]], messages: list[dict[str, Any]], *,
              with_tools: bool, force_answer: bool, kind: str) -> Any:
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": _with_tail_cache(messages) if with_tools else messages,
            "output_config": output_format(step.output_model),
        }
        if with_tools:
            request["tools"] = TOOL_DEFINITIONS
            if force_answer:
                request["tool_choice"] = {"type": "none"}
        label = step.label
        permit = None
        if self._limiter is not None:
            # Output is reserved at max_tokens, as Anthropic estimates it; the release corrects both.
            estimate = estimate_tokens(request["system"], request["messages"], request.get("tools"))
            try:
                permit = self._limiter.acquire(estimate, self.max_tokens)
            except TransientProviderError as exc:
                raise TransientProviderError(f"{label}: {exc.message}", retry_after=exc.retry_after,
                                             hint=exc.hint) from None
        actual: Usage | None = None
        try:
            response = self._client.messages.create(**request)
            actual = Usage.from_api(response.usage)
        except anthropic.APIStatusError as exc:
            raise self._status_error(label, exc) from exc
        except anthropic.APIConnectionError as exc:
            what = "timed out" if isinstance(exc, anthropic.APITimeoutError) else "could not connect"
            raise TransientProviderError(f"{label}: the Anthropic API {what}: {exc}", retry_after=None,
                                         hint="check the network and ANTHROPIC_BASE_URL") from exc
        except anthropic.AnthropicError as exc:
            raise ProviderError(f"{label}: Anthropic client error: {exc}",
                                hint="check ANTHROPIC_API_KEY and the anthropic settings") from exc
        finally:
            if permit is not None:
                permit.release(actual)
        self._record(step, kind, response)
        return response

    @staticmethod
    def _status_error(label: str, exc: anthropic.APIStatusError) -> ProviderError:
        status = exc.status_code
        detail = str(exc)[:500]
        if status in TRANSIENT_STATUS or status >= 500:
            retry_after = retry_after_seconds(exc.response.headers)
            return TransientProviderError(f"{label}: Anthropic API answered {status}: {detail}",
                                          retry_after=retry_after, hint="the task is retried with backoff")
        hint = ("check ANTHROPIC_API_KEY" if status in (401, 403)
                else "check WFQUEUE_MODEL and the anthropic settings")
        return ProviderError(f"{label}: Anthropic API refused the request ({status}): {detail}", hint=hint)

    def _record(self, step: Step, kind: str, response: Any) -> None:
        usage = response.usage
        entry: dict[str, Any] = {"step": step.label, "kind": kind, "model": response.model,
                                 "stop_reason": response.stop_reason}
        for field_name in USAGE_FIELDS:
            entry[field_name] = int(getattr(usage, field_name, 0) or 0)
        self.usage.append(entry)

    def usage_totals(self) -> dict[str, int]:
        """Token counts summed over every call recorded so far."""
        return {f: sum(int(entry[f]) for entry in self.usage) for f in USAGE_FIELDS} | {"calls": len(self.usage)}
