"""Read one canned answer through the SDK while a fresh process's first request waits on the model.

The SDK builds its response types' validators the first time it reads an answer (pydantic's deferred
build): 40-60 ms on a 2-core machine, spent when the first answer arrives, so on the critical path of every
plan a fresh worker node serves (the understanding's answer). ``start_once`` moves that work into the wait:
a background thread streams one made-up answer (text, then a tool call) through a client of its own whose
transport answers from memory. Nothing goes over the network, no model is paid, and a failure here only
leaves the builds to the first real answer.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import anthropic
import httpx2

__all__ = ["START_DELAY_S", "start_once", "warm"]

log = logging.getLogger(__name__)

# Counted from just before the first request is built: it is sent by then, before this thread competes with
# it for the interpreter (building and sending took 5-10 ms of CPU, the SDK client already made); still far
# less than any model takes to answer.
START_DELAY_S = 0.05


class _Once:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.done = threading.Event()  # set when the warm-up has ended, however it ended


_once = _Once()


def start_once(delay_s: float = START_DELAY_S) -> None:
    """Start the warm-up thread, the first time this is called in this process; later calls return."""
    with _once.lock:
        if _once.started:
            return
        _once.started = True
    try:
        threading.Thread(target=_run, args=(delay_s,), name="wfqueue-sdk-warm-up", daemon=True).start()
    except RuntimeError:  # no thread to be had (a process at its limit): the real call must still go out
        log.debug("the SDK warm-up could not start a thread", exc_info=True)
        _once.done.set()


def _run(delay_s: float) -> None:
    try:
        time.sleep(delay_s)
        warm()
    except Exception:  # an optimisation: the first real answer does the work instead
        log.debug("the SDK warm-up failed", exc_info=True)
    finally:
        _once.done.set()


WARM_UP_HOST = "warm-up.invalid"  # never resolved: the transport answers from memory


def _not_the_warm_up(record: logging.LogRecord) -> bool:
    return WARM_UP_HOST not in record.getMessage()


def warm() -> None:
    """Stream the canned answer through the SDK, as wfqueue.providers.anthropic.calls reads real ones."""
    # The HTTP library logs each request it answers, this one too: a worker's log showed a POST to a host that
    # does not exist, answered "200 OK". Its line is left out; the real requests' lines stay.
    transport_log = logging.getLogger("httpx2")
    if _not_the_warm_up not in transport_log.filters:
        transport_log.addFilter(_not_the_warm_up)
    body = _event_stream()
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body))
    with httpx2.Client(transport=transport, trust_env=False) as http:  # no proxies, no TLS context to load
        client = anthropic.Anthropic(api_key="warm-up", base_url=f"http://{WARM_UP_HOST}", http_client=http,
                                     max_retries=0)
        with client.messages.stream(model="warm-up", max_tokens=16,
                                    messages=[{"role": "user", "content": "warm-up"}]) as stream:
            for _ in stream:
                pass
            if stream.current_message_snapshot.stop_reason != "tool_use":
                raise RuntimeError("the canned answer was not read to its end")


def _event_stream() -> bytes:
    """A short answer as the Messages API streams it: a text block, a tool_use block, the usage."""
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message: dict[str, Any] = {"id": "msg_warm_up", "type": "message", "role": "assistant", "model": "warm-up",
                               "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    tool = {"type": "tool_use", "id": "toolu_warm_up", "name": "read", "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": '{"a": 1}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": tool},
        *({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}}
          for piece in ('{"pa', 'th": "a"}')),
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 12}},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events).encode()
