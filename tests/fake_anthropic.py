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

Rate limits (tests/fake_anthropic_limits.py): ``FakeAnthropic(limits=RateLimits(
requests_per_min=120))`` enforces token buckets and answers 429 ``rate_limit_error``
with ``retry-after`` over them; every response carries ``anthropic-ratelimit-*``
headers. Faults (tests/fake_anthropic_faults.py): ``FakeAnthropic(faults=Every(5,
"429"))``, deterministic by call number. What happened is kept per call in
``fake.calls`` (see :class:`Call`) with helpers ``statuses()``, ``faulted()``,
``repeated_turns()`` and ``admitted_per_minute()``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.fake_anthropic_faults import Always, At, ByRequest, Every, Fault, Schedule, faults_for, schedules
from tests.fake_anthropic_limits import Limiter, RateLimits
from tests.fake_anthropic_wire import (
    ERROR_TYPES,
    Reply,
    answer,
    breakpoint_tokens,
    check_request,
    error,
    prompt_blocks,
    sse_events,
    text,
    tool_call,
)
from tests.fake_anthropic_wire import (
    tokens as count_tokens,
)

__all__ = ["Always", "At", "ByRequest", "Call", "Every", "FakeAnthropic", "Fault", "RateLimits", "Reply",
           "allow_loopback_only", "answer", "breakpoint_tokens", "error", "fingerprint", "sse_events", "text",
           "tool_call"]

Faults = Schedule | Mapping[int, Fault | str] | Iterable[Schedule] | None
NO_JSON_TEXT = ("I read the repository. The change belongs in the request handler, next to the existing checks; "
                "I would add the limiter there and cover it with a test.")
ERROR_MESSAGES = {429: "Number of requests has exceeded your rate limit", 529: "Overloaded",
                  500: "Internal server error"}


def _without_cache_control(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_without_cache_control(v) for v in obj]
    return obj


def _blocks(content: Any) -> Any:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def fingerprint(body: dict[str, Any]) -> str:
    """The conversation a request sends (system and messages, hashed), the same however it is written:
    cache marks are ignored and a string content counts as one text block."""
    messages = [{**m, "content": _blocks(m.get("content"))} for m in body.get("messages") or []]
    sent = _without_cache_control({"system": _blocks(body.get("system")), "messages": messages})
    return hashlib.sha256(json.dumps(sent, sort_keys=True).encode()).hexdigest()


def truncated(genuine: Reply) -> Reply:
    """The answer cut midway at the output limit: half its text (or of its first tool input as JSON)."""
    if genuine.status >= 400:
        return genuine
    texts = [b["text"] for b in genuine.content if b.get("type") == "text" and b.get("text")]
    inputs = [json.dumps(b["input"]) for b in genuine.content if b.get("type") == "tool_use"]
    whole = (texts or inputs or ['{"answer": "cut"}'])[0]
    return Reply(content=[{"type": "text", "text": whole[: max(1, len(whole) // 2)]}], stop_reason="max_tokens")


def busy_tool_call(body: dict[str, Any]) -> Reply:
    """A harmless tool call with one of the request's tools (``list`` of the root when offered)."""
    names = [t.get("name") for t in body.get("tools") or []]
    return tool_call("list", {"path": "."}) if "list" in names else tool_call(names[0], {})


@dataclass
class Call:
    """One request to /v1/messages as the server saw and answered it."""

    number: int  # 1 for the first request; faults are scheduled by it
    at: float  # the server's clock when it arrived
    fingerprint: str  # see fingerprint()
    stream: bool
    status: int | None = None  # None: no HTTP answer (timeout, reset)
    fault: str | None = None  # the fault applied, "rate_limit" for a 429 of the limits
    complete: bool = False  # the whole answer reached the client
    requests_remaining: int | None = None  # what its anthropic-ratelimit-requests-remaining header said


@dataclass
class Outcome:
    """What the handler sends for one request: a JSON body or, for a streamed 200, its events."""

    status: int
    headers: dict[str, str]
    payload: dict[str, Any]
    stream: bool = False
    action: str | None = None  # "timeout", "reset", "cut" or "error": how the answer breaks
    hold_s: float = 0.0
    call: Call | None = None


class FakeAnthropic:
    """The server; use as a context manager (binds 127.0.0.1 on a free port)."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply | dict[str, Any]] | None = None,
                 *, min_cache_tokens: int = 0, limits: RateLimits | None = None, faults: Faults = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.responder = responder
        self.min_cache_tokens = min_cache_tokens
        self.clock = clock
        self.limiter = Limiter(limits or RateLimits())
        self.schedules = schedules(faults)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.calls: list[Call] = []
        self.admitted: list[float] = []  # clock times of the requests the rate limits let through
        self.rate_limited = 0  # 429s sent because a rate limit was reached
        self.replies: deque[Reply | dict[str, Any]] = deque()
        self.failures: deque[Reply] = deque()
        self.cache: set[str] = set()
        # What the answers say of their usage: "all" counts; "none" (a proxy that drops the block), "null"
        # (every count null), "negative" (a count below zero): an API on a bad day that bills all the same.
        self.usage_reported: str = "all"
        self._lock = threading.Lock()
        self._closing = threading.Event()
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

    def reconfigure(self, responder: Callable[[dict[str, Any]], Reply | dict[str, Any]] | None = None,
                    *, limits: RateLimits | None = None, faults: Faults = None) -> FakeAnthropic:
        """Start over with a new behaviour on the same address (for workers started once per module):
        the records, scripted replies, cache and rate limits are reset, call numbers count from 1 again."""
        with self._lock:
            self.responder = responder
            self.limiter = Limiter(limits or RateLimits())
            self.schedules = schedules(faults)
            for kept in (self.requests, self.headers, self.calls, self.admitted, self.replies, self.failures):
                kept.clear()
            self.cache.clear()
            self.rate_limited = 0
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- what happened ---------------------------------------------------------------

    def statuses(self) -> Counter[int | None]:
        """How many calls got each status (None: no answer at all)."""
        return Counter(c.status for c in self.calls)

    def faulted(self) -> Counter[str]:
        """How many calls each fault hit (``rate_limit``: refused by the rate limits)."""
        return Counter(c.fault for c in self.calls if c.fault)

    def repeated_turns(self) -> int:
        """Requests that sent again a conversation an earlier request sent and got complete with a 200:
        a turn the client had, asked for a second time."""
        answered: set[str] = set()
        repeated = 0
        for call in sorted(self.calls, key=lambda c: c.number):
            repeated += call.fingerprint in answered
            if call.status == 200 and call.complete:
                answered.add(call.fingerprint)
        return repeated

    def admitted_per_minute(self) -> float:
        """The rate of admitted requests between the first and the last, per minute (0 below two)."""
        if len(self.admitted) < 2 or self.admitted[-1] <= self.admitted[0]:
            return 0.0
        return (len(self.admitted) - 1) * 60.0 / (self.admitted[-1] - self.admitted[0])

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # As API front ends do. Without it, a streamed answer on a reused connection stalls ~40 ms on each
                # event written after the first (Nagle waiting for the client's delayed ACK): 44 ms an answer
                # against 2-3 ms, an artifact no real API adds.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

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
        self._closing.set()  # held requests (timeouts) end now
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- sending -----------------------------------------------------------------------

    def deliver(self, handler: BaseHTTPRequestHandler, outcome: Outcome) -> None:
        """Write one outcome to the client (outside the lock: a stream or a held request blocks no one)."""
        try:
            if outcome.action == "reset":
                # SO_LINGER 0: closing sends a RST instead of a FIN, as a dropped connection does.
                handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                handler.rfile.close()
                handler.connection.close()
                return
            if outcome.action == "timeout":
                self._closing.wait(outcome.hold_s)
                return
            self._write(handler, outcome, cut=outcome.action in ("cut", "error"), error=outcome.action == "error")
            if outcome.call is not None and outcome.action is None:
                outcome.call.complete = True
        except OSError:
            pass  # the client went away first
        finally:
            if outcome.action is not None:
                handler.close_connection = True

    def _write(self, handler: BaseHTTPRequestHandler, outcome: Outcome, *, cut: bool, error: bool = False) -> None:
        handler.send_response(outcome.status)
        handler.send_header("request-id", f"req_fake_{next(self._ids)}")
        for key, value in outcome.headers.items():
            handler.send_header(key, value)
        if outcome.stream:
            handler.send_header("content-type", "text/event-stream; charset=utf-8")
            handler.send_header("cache-control", "no-cache")
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            events = sse_events(outcome.payload)
            for name, data in events[: max(3, len(events) // 2)] if cut else events:
                chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            if cut and outcome.hold_s:  # a stalled stream: open, silent, then dropped
                self._closing.wait(outcome.hold_s)
            if error:  # broken off by the API itself, in the stream's own words
                data = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                chunk = f"event: error\ndata: {json.dumps(data)}\n\n".encode()
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            if not cut or error:
                handler.wfile.write(b"0\r\n\r\n")
            return
        data = json.dumps(outcome.payload).encode()
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data[: len(data) // 2] if cut else data)

    # -- the API ------------------------------------------------------------------------

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> Outcome:
        with self._lock:
            now = self.clock()
            try:
                outcome = self._respond(path, headers, raw, now)
            except Exception as exc:  # noqa: BLE001 - a broken responder: say so instead of dropping the connection
                outcome = self._error(500, f"the fake server failed: {exc!r}")
            outcome.headers = {**self.limiter.headers(now), **outcome.headers}
            if outcome.call is not None:
                outcome.call.status = None if outcome.action in ("timeout", "reset") else outcome.status
                outcome.call.requests_remaining = int(outcome.headers["anthropic-ratelimit-requests-remaining"])
            return outcome

    def _respond(self, path: str, headers: dict[str, str], raw: bytes, now: float) -> Outcome:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._error(400, "request body is not JSON")
        self.requests.append(body)
        self.headers.append({k.lower(): v for k, v in headers.items()})
        if path.split("?", 1)[0] != "/v1/messages":
            return self._error(404, f"no route {path}")
        call = Call(len(self.calls) + 1, now, fingerprint(body), bool(body.get("stream")))
        self.calls.append(call)
        outcome = self._answer(body, call, now)
        outcome.call = call
        return outcome

    def _answer(self, body: dict[str, Any], call: Call, now: float) -> Outcome:
        refused = self.limiter.admit(now)
        if refused is not None:
            wait, which = refused
            self.rate_limited += 1
            call.fault = "rate_limit"
            return self._error(429, f"This request would exceed your organization's rate limit of {which}.",
                               {"retry-after": str(max(1, math.ceil(wait)))})
        self.admitted.append(now)
        if self.failures:
            failure = self.failures.popleft()
            return self._error(failure.status, failure.content[0]["message"], failure.headers)
        http, model = faults_for(self.schedules, call.number, body)
        if http is not None and http.kind in ("429", "529", "500"):
            call.fault = http.kind
            status = int(http.kind)
            retry = {"retry-after": str(math.ceil(http.retry_after))} if status == 429 else {}
            return self._error(status, ERROR_MESSAGES[status], retry)
        if http is not None and http.kind in ("timeout", "reset"):
            call.fault = http.kind
            return Outcome(0, {}, {}, action=http.kind, hold_s=http.hold_s)
        problem = check_request(body)
        if problem:
            return self._error(400, problem)
        cut = http is not None and http.kind in ("cut_stream", "stall_stream", "error_event")
        reply = self._model_fault(body, call, {f.kind for f in model})
        if reply is None:
            reply = self._peek_reply(body) if cut else self._next_reply(body)
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
        usage = self._usage(body, content, reply)
        self.limiter.spend(usage["input_tokens"] + usage["cache_creation_input_tokens"], usage["output_tokens"])
        message = {
            "id": f"msg_{next(self._ids):06d}", "type": "message", "role": "assistant",
            "model": body["model"], "content": content, "stop_reason": reply.stop_reason,
            "stop_sequence": None, "usage": {
                "all": usage, "none": {}, "null": dict.fromkeys(usage), "negative": {**usage, "input_tokens": -5000},
            }[self.usage_reported],
        }
        if cut:
            call.fault = http.kind if http is not None else "cut_stream"
        stalled = http is not None and http.kind == "stall_stream"
        errored = http is not None and http.kind == "error_event"
        return Outcome(200, {}, message, stream=call.stream, action="error" if errored else "cut" if cut else None,
                       hold_s=http.hold_s if stalled and http is not None else 0.0)

    def _model_fault(self, body: dict[str, Any], call: Call, kinds: set[str]) -> Reply | None:
        """The answer a misbehaving model gives instead of the scripted one (which stays for the next request)."""
        tools_allowed = bool(body.get("tools")) and (body.get("tool_choice") or {}).get("type") != "none"
        for kind, reply in (("tools_every_turn", busy_tool_call(body) if tools_allowed else None),
                            ("text_no_json", text(NO_JSON_TEXT)),
                            ("truncated_json", None)):
            if kind not in kinds or (kind == "tools_every_turn" and reply is None):
                continue
            call.fault = kind
            return reply if reply is not None else truncated(self._peek_reply(body))
        return None

    def _peek_reply(self, body: dict[str, Any]) -> Reply:
        """The reply the next request would get, left in place (a responder is simply asked)."""
        if self.replies:
            reply = self.replies[0]
            return answer(reply) if isinstance(reply, dict) else reply
        return self._next_reply(body)

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
        total = sum(count_tokens(b) for b, _ in blocks) + count_tokens(body.get("output_config") or {})
        digest = hashlib.sha256()
        prefix_tokens = 0
        boundaries: list[tuple[str, int, bool]] = []
        for block, mark in blocks:
            digest.update(json.dumps(block, sort_keys=True).encode())
            prefix_tokens += count_tokens(block)
            boundaries.append((digest.copy().hexdigest(), prefix_tokens, mark))
        last_mark = max((i for i, (_, _, mark) in enumerate(boundaries) if mark), default=-1)
        read = created = 0
        if last_mark >= 0:
            hits = [tokens for h, tokens, _ in boundaries[: last_mark + 1] if h in self.cache]
            read = max(hits, default=0)
            cacheable = boundaries[last_mark][1]
            if cacheable >= self.min_cache_tokens:
                created = cacheable - read
                for h, _tokens, mark in boundaries[: last_mark + 1]:
                    if mark:
                        self.cache.add(h)
            else:
                read = 0
        return {
            "input_tokens": max(0, total - read - created),
            "output_tokens": reply.output_tokens if reply.output_tokens is not None else count_tokens(content),
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
