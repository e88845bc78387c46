"""A local HTTP server speaking enough of the Anthropic Messages API for the real SDK.

Tests point ``anthropic.Anthropic(base_url=...)`` (or ANTHROPIC_BASE_URL) at it.
It answers ``POST /v1/messages`` with scripted replies and records every request.
A request with ``"stream": true`` is answered as the real API streams
(``text/event-stream``, chunked): ``message_start``, ``ping``, per content block
``content_block_start`` / ``content_block_delta`` (``text_delta`` or
``input_json_delta`` chunks) / ``content_block_stop``, then ``message_delta``
(stop_reason, output_tokens) and ``message_stop``. An error before the stream
starts is a JSON answer with its status, as the real API sends it.

Scripting::

    with FakeAnthropic() as fake:
        fake.fail(429, retry_after="7")                 # next request gets a 429
        fake.reply(tool_call("grep", {"pattern": "x"}))  # then a tool_use turn
        fake.reply(answer({"angle": "security"}))        # then a JSON answer
        # or: FakeAnthropic(responder=lambda body: ...)  # a function (request body) -> reply

Replies are :class:`Reply` objects (helpers ``answer``, ``text``, ``tool_call``,
``error``) or plain dicts (shorthand for ``answer``). An ``answer`` needs the
request to ask for JSON output (``output_config.format``), as the real API only
constrains text when asked. Requests that break rules the real API enforces
(tool_use without a tool_result right after, tool blocks without tools, more
than four cache breakpoints, an assistant last turn) get a 400.

Usage is computed: tokens are ``len(json) // 4`` per block; blocks up to a
``cache_control`` breakpoint form a cacheable prefix, hashed. The first request
with a given prefix reports it as ``cache_creation_input_tokens``; later
requests whose prefix (at any block boundary up to their last breakpoint)
was stored report it as ``cache_read_input_tokens``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["FakeAnthropic", "Reply", "answer", "breakpoint_tokens", "error", "sse_events", "text", "tool_call"]

TEXT_PIECE = 40  # characters per text_delta
JSON_PIECE = 24  # characters per input_json_delta
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}


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


def error(status: int, *, retry_after: str | None = None, retry_after_ms: str | None = None,
          message: str = "injected failure") -> Reply:
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms
    # The real API tells the SDK whether to retry; leave it to the SDK's own rules here.
    return Reply(content=[{"message": message}], status=status, headers=headers)


def _tokens(obj: Any) -> int:
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
            blocks.append(((message["role"], _strip_cache(block)), isinstance(block, dict) and "cache_control" in block))
    return blocks


def breakpoint_tokens(body: dict[str, Any]) -> list[int]:
    """The token count of the prefix ending at each cache breakpoint of a request, in order."""
    counts, total = [], 0
    for block, mark in prompt_blocks(body):
        total += _tokens(block)
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
    opening = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": opening}),
                                                ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            empty = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in _pieces(json.dumps(block["input"]), JSON_PIECE)]
        else:
            empty = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block.get("text", ""), TEXT_PIECE)]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                      for d in deltas)
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


@dataclass
class Outcome:
    """What the handler sends for one request: a JSON body or, for a streamed 200, its events."""

    status: int
    headers: dict[str, str]
    payload: dict[str, Any]
    stream: bool = False


class FakeAnthropic:
    """The server; use as a context manager (binds 127.0.0.1 on a free port)."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply | dict[str, Any]] | None = None,
                 *, min_cache_tokens: int = 0) -> None:
        self.responder = responder
        self.min_cache_tokens = min_cache_tokens
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.replies: deque[Reply | dict[str, Any]] = deque()
        self.failures: deque[Reply] = deque()
        self.cache: set[str] = set()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------

    def reply(self, *replies: Reply | dict[str, Any]) -> FakeAnthropic:
        self.replies.extend(replies)
        return self

    def fail(self, status: int, *, times: int = 1, retry_after: str | None = None,
             retry_after_ms: str | None = None) -> FakeAnthropic:
        for _ in range(times):
            self.failures.append(error(status, retry_after=retry_after, retry_after_ms=retry_after_ms))
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                fake.deliver(self, fake.handle(self.path, dict(self.headers.items()), raw))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- sending -----------------------------------------------------------------------

    def deliver(self, handler: BaseHTTPRequestHandler, outcome: Outcome) -> None:
        """Write one outcome to the client (outside the lock: a stream or a held request blocks no one)."""
        handler.send_response(outcome.status)
        handler.send_header("request-id", f"req_fake_{next(self._ids)}")
        for key, value in outcome.headers.items():
            handler.send_header(key, value)
        if outcome.stream:
            handler.send_header("content-type", "text/event-stream; charset=utf-8")
            handler.send_header("cache-control", "no-cache")
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            for name, data in sse_events(outcome.payload):
                chunk = _sse(name, data)
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
            return
        data = json.dumps(outcome.payload).encode()
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    # -- the API ------------------------------------------------------------------------

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> Outcome:
        with self._lock:
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self._error(400, "request body is not JSON")
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in headers.items()})
            if path.split("?", 1)[0] != "/v1/messages":
                return self._error(404, f"no route {path}")
            if self.failures:
                failure = self.failures.popleft()
                return self._error(failure.status, failure.content[0]["message"], failure.headers)
            problem = check_request(body)
            if problem:
                return self._error(400, problem)
            reply = self._next_reply(body)
            if reply.status >= 400:
                return self._error(reply.status, reply.content[0]["message"], reply.headers)
            if reply.json_answer and not (body.get("output_config") or {}).get("format"):
                return self._error(400, "scripted a JSON answer but the request has no output_config.format")
            if reply.stop_reason == "tool_use" and (body.get("tool_choice") or {}).get("type") == "none":
                return self._error(500, "script error: a tool call scripted for a request with tool_choice none")
            content = [dict(b) for b in reply.content]
            for block in content:
                if block.get("type") == "tool_use" and not block.get("id"):
                    block["id"] = f"toolu_{next(self._ids):04d}"
            message = {
                "id": f"msg_{next(self._ids):06d}", "type": "message", "role": "assistant",
                "model": body["model"], "content": content, "stop_reason": reply.stop_reason,
                "stop_sequence": None, "usage": self._usage(body, content, reply),
            }
            return Outcome(200, {}, message, stream=bool(body.get("stream")))

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.replies:
            reply = self.replies.popleft()
        elif self.responder is not None:
            reply = self.responder(body)
        else:
            return Reply(content=[{"message": "no scripted reply left"}], status=500)
        return answer(reply) if isinstance(reply, dict) else reply

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]], reply: Reply) -> dict[str, Any]:
        blocks = prompt_blocks(body)
        total = sum(_tokens(b) for b, _ in blocks) + _tokens(body.get("output_config") or {})
        digest = hashlib.sha256()
        prefix_tokens = 0
        boundaries: list[tuple[str, int, bool]] = []
        for block, mark in blocks:
            digest.update(json.dumps(block, sort_keys=True).encode())
            prefix_tokens += _tokens(block)
            boundaries.append((digest.copy().hexdigest(), prefix_tokens, mark))
        last_mark = max((i for i, (_, _, mark) in enumerate(boundaries) if mark), default=-1)
        read = created = 0
        if last_mark >= 0:
            hits = [tokens for h, tokens, _ in boundaries[: last_mark + 1] if h in self.cache]
            read = max(hits, default=0)
            cacheable = boundaries[last_mark][1]
            if cacheable >= self.min_cache_tokens:
                created = cacheable - read
                for h, tokens, mark in boundaries[: last_mark + 1]:
                    if mark:
                        self.cache.add(h)
            else:
                read = 0
        return {
            "input_tokens": max(0, total - read - created),
            "output_tokens": reply.output_tokens if reply.output_tokens is not None else _tokens(content),
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }

    @staticmethod
    def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Outcome:
        kind = ERROR_TYPES.get(status, "api_error")
        return Outcome(status, dict(headers or {}), {"type": "error", "error": {"type": kind, "message": message}})


def allow_loopback_only(monkeypatch: Any) -> None:
    """Make a connection to anything but loopback or a unix socket fail: a test that would reach the real
    API fails instead. ``monkeypatch`` is pytest's fixture (passed in: this module is not a test module)."""
    original = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
            raise OSError(f"network access is disabled in tests (tried {host})")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
