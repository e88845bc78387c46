"""The wire format of the local Messages API server: scripted replies, the request rules the real
API enforces, token counting and the server-sent events of a streamed answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ERROR_TYPES", "Reply", "answer", "breakpoint_tokens", "check_request", "error", "prompt_blocks",
           "sse_events", "text", "tokens", "tool_call"]

TEXT_PIECE = 40  # characters per text_delta
JSON_PIECE = 24  # characters per input_json_delta
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}


@dataclass
class Reply:
    """One scripted reply: a message (content + stop_reason) or an HTTP error (status >= 400)."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_answer: bool = False
    output_tokens: int | None = None


def answer(obj: Any, *, stop_reason: str = "end_turn") -> Reply:
    """A JSON answer (structured output): ``obj`` serialised as the text of the reply; a str is sent as is."""
    body = obj if isinstance(obj, str) else json.dumps(obj)
    return Reply(content=[{"type": "text", "text": body}], stop_reason=stop_reason, json_answer=True)


def text(body: str, *, stop_reason: str = "end_turn") -> Reply:
    return Reply(content=[{"type": "text", "text": body}], stop_reason=stop_reason)


def tool_call(*calls: tuple[str, dict[str, Any]] | str, **single: Any) -> Reply:
    """``tool_call("grep", {"pattern": "x"})`` or several ``tool_call(("grep", {...}), ("read", {...}))``."""
    if calls and isinstance(calls[0], str):
        pairs = [(calls[0], calls[1] if len(calls) > 1 else single)]
    else:
        pairs = list(calls)  # type: ignore[arg-type]
    blocks = [{"type": "tool_use", "id": "", "name": name, "input": args} for name, args in pairs]
    return Reply(content=blocks, stop_reason="tool_use")


RAW_INPUT = "__raw_json__"  # a tool call's input streamed as this text, as it is: a model's malformed JSON


def malformed_tool_call(name: str, raw_input: str) -> Reply:
    """A tool call whose streamed input is ``raw_input`` verbatim (invalid JSON, a lone surrogate escape): the
    SDK cannot read it."""
    return Reply(content=[{"type": "tool_use", "id": "", "name": name, "input": {RAW_INPUT: raw_input}}],
                 stop_reason="tool_use")


def error(status: int, *, retry_after: str | None = None, retry_after_ms: str | None = None,
          message: str = "injected failure") -> Reply:
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms
    # The real API tells the SDK whether to retry; leave it to the SDK's own rules here.
    return Reply(content=[{"message": message}], status=status, headers=headers)


def tokens(obj: Any) -> int:
    return max(1, len(json.dumps(obj, sort_keys=True)) // 4)


def _strip_cache(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


def prompt_blocks(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """(block without cache_control, is_breakpoint) in cache order: tools, system, messages."""
    blocks: list[tuple[Any, bool]] = []
    for tool in body.get("tools") or []:
        blocks.append((("tool", _strip_cache(tool)), "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        blocks.append((("system", system), False))
    elif system:
        for block in system:
            blocks.append((("system", _strip_cache(block)), "cache_control" in block))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            blocks.append(((message["role"], content), False))
            continue
        for block in content or []:
            blocks.append(((message["role"], _strip_cache(block)),
                           isinstance(block, dict) and "cache_control" in block))
    return blocks


def breakpoint_tokens(body: dict[str, Any]) -> list[int]:
    """The token count of the prefix ending at each cache breakpoint of a request, in order."""
    counts, total = [], 0
    for block, mark in prompt_blocks(body):
        total += tokens(block)
        if mark:
            counts.append(total)
    return counts


def check_request(body: dict[str, Any]) -> str | None:
    """The rules of the real API that the provider must follow; a message when one is broken."""
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    messages = body["messages"]
    if not messages or messages[-1].get("role") != "user":
        return "the last message must be a user message"
    breakpoints = sum(1 for _, mark in prompt_blocks(body) if mark)
    if breakpoints > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
    has_tool_blocks = False
    for index, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                return f"messages.{index}: text content blocks must be non-empty"
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        has_tool_blocks = has_tool_blocks or bool(uses) or any(b.get("type") == "tool_result" for b in blocks)
        if uses:
            following = messages[index + 1]["content"] if index + 1 < len(messages) else []
            following = following if isinstance(following, list) else []
            results = [b.get("tool_use_id") for b in following if b.get("type") == "tool_result"]
            leading = [b.get("type") for b in following[: len(results)]]
            if sorted(results) != sorted(uses) or any(t != "tool_result" for t in leading):
                return (f"messages.{index + 1}: tool_use ids were found without tool_result blocks immediately "
                        f"after: {uses}")
    if has_tool_blocks and not body.get("tools"):
        return "Requests which include tool_use or tool_result blocks must define tools."
    fmt = (body.get("output_config") or {}).get("format")
    if fmt is not None and (fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict)):
        return "output_config.format: expected {type: json_schema, schema: {...}}"
    return None


def sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A complete message as the real API streams it: (event name, data) in order."""
    usage = message["usage"]
    # An answer that reports no usage (FakeAnthropic.usage_reported) streams none either.
    opening = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {**usage, "output_tokens": 1} if usage else {}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": opening}),
                                                ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty = {**block, "input": {}}
            raw = block["input"].get(RAW_INPUT) if isinstance(block["input"], dict) else None
            deltas = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in _pieces(raw if raw is not None else json.dumps(block["input"]), JSON_PIECE)]
        else:
            empty = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block.get("text", ""), TEXT_PIECE)]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                      for d in deltas)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]} if usage else {}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
