"""Deterministic faults of the local Messages API server: what a bad day looks like to the SDK.

A fault hits one request, chosen by its call number (1 for the first request the server
receives, counting every request, failed or not). Schedules say which::

    FakeAnthropic(faults=Every(5, "429"))                     # calls 5, 10, 15, ... get a 429
    FakeAnthropic(faults=Every(5, "529", "429", "500"))       # ... in turn: 5 -> 529, 10 -> 429, 15 -> 500
    FakeAnthropic(faults={3: "reset", 4: Fault("timeout", hold_s=5)})   # call number -> fault
    FakeAnthropic(faults=[Every(4, "cut_stream"), Always("tools_every_turn")])  # composed
    FakeAnthropic(faults=ByRequest(lambda call, body: "429" if ... else None))  # chosen from the request

``ByRequest`` picks a request by what it asks (whose conversation it is, how far it went), for
tests where several clients call at once and call numbers do not say which one is which.

HTTP faults never consume the scripted reply: the retry gets it.

- ``429``: rate_limit_error with ``retry-after`` (``Fault.retry_after``, 1 s unless set);
- ``529``: overloaded_error; ``500``: api_error;
- ``timeout``: the request is held ``hold_s`` seconds (longer than the client waits), then the
  connection is closed with no answer;
- ``reset``: the connection is reset (RST) with no answer;
- ``cut_stream``: the answer starts (200, headers, ``message_start`` and part of the content;
  half of the body for a request that does not stream), then the connection is closed;
- ``stall_stream``: as ``cut_stream``, but the connection stays open and silent ``hold_s`` seconds first;
- ``error_event``: as ``cut_stream``, but the stream then ends with an ``error`` event (overloaded_error), as
  the real API breaks off a 200 stream.

Model faults replace the answer of the request they hit, which is still a 200 (the scripted
reply stays for the next request):

- ``truncated_json``: the real answer's text cut midway, ``stop_reason: max_tokens``;
- ``text_no_json``: prose without any JSON;
- ``tools_every_turn``: a ``list`` tool call for every request that allows tools; a request
  without tools or with ``tool_choice: none`` gets the real answer. Meant for ``Always``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["HTTP_FAULTS", "MODEL_FAULTS", "Always", "At", "ByRequest", "Every", "Fault", "Schedule", "faults_for",
           "schedules"]

Body = Mapping[str, Any]

HTTP_FAULTS = frozenset({"429", "529", "500", "timeout", "reset", "cut_stream", "stall_stream", "error_event"})
MODEL_FAULTS = frozenset({"truncated_json", "text_no_json", "tools_every_turn"})


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: float = 1.0  # 429: the retry-after header, in whole seconds rounded up
    hold_s: float = 30.0  # timeout, stall_stream: how long the request (the begun stream) is held, silent, before
    # its connection is dropped

    def __post_init__(self) -> None:
        if self.kind not in HTTP_FAULTS | MODEL_FAULTS:
            raise ValueError(f"unknown fault {self.kind!r}; one of {sorted(HTTP_FAULTS | MODEL_FAULTS)}")

    @property
    def http(self) -> bool:
        return self.kind in HTTP_FAULTS


def as_fault(fault: Fault | str) -> Fault:
    return fault if isinstance(fault, Fault) else Fault(fault)


class Schedule(Protocol):
    def faults(self, call: int, body: Body | None = None) -> list[Fault]: ...


class Every:
    """Calls ``n``, ``2n``, ... (from ``start``) get the given faults in turn."""

    def __init__(self, n: int, *faults: Fault | str, start: int | None = None) -> None:
        if n < 1 or not faults:
            raise ValueError("Every(n, fault, ...) needs n >= 1 and at least one fault")
        self.n, self.start = n, n if start is None else start
        self.cycle = [as_fault(f) for f in faults]

    def faults(self, call: int, body: Body | None = None) -> list[Fault]:
        if call < self.start or (call - self.start) % self.n:
            return []
        return [self.cycle[(call - self.start) // self.n % len(self.cycle)]]


class At:
    """Given call numbers get given faults: ``At({3: "reset", 7: Fault("429", retry_after=2)})``."""

    def __init__(self, plan: Mapping[int, Fault | str | Iterable[Fault | str]]) -> None:
        self.plan = {call: [as_fault(f)] if isinstance(f, (Fault, str)) else [as_fault(x) for x in f]
                     for call, f in plan.items()}

    def faults(self, call: int, body: Body | None = None) -> list[Fault]:
        return self.plan.get(call, [])


class Always:
    """Every call gets the faults (model behaviour such as ``tools_every_turn``)."""

    def __init__(self, *faults: Fault | str) -> None:
        self.all = [as_fault(f) for f in faults]

    def faults(self, call: int, body: Body | None = None) -> list[Fault]:
        return list(self.all)


class ByRequest:
    """A function of the call number and the request body chooses the fault (or None). It is asked once per
    request, under the server's lock, so it may keep state (e.g. hit each conversation once)."""

    def __init__(self, choose: Callable[[int, Body], Fault | str | None]) -> None:
        self.choose = choose

    def faults(self, call: int, body: Body | None = None) -> list[Fault]:
        chosen = self.choose(call, body or {})
        return [] if chosen is None else [as_fault(chosen)]


def schedules(faults: Schedule | Mapping[int, Fault | str] | Iterable[Schedule] | None) -> list[Schedule]:
    """What ``FakeAnthropic(faults=...)`` accepts, as a list of schedules."""
    if faults is None:
        return []
    if isinstance(faults, Mapping):
        return [At(faults)]
    if hasattr(faults, "faults"):
        return [faults]  # type: ignore[list-item]
    return list(itertools.chain.from_iterable(schedules(f) for f in faults))  # type: ignore[union-attr]


def faults_for(plans: list[Schedule], call: int, body: Body | None = None) -> tuple[Fault | None, list[Fault]]:
    """(the HTTP fault of a call, its model faults): the first HTTP fault wins, the others are dropped."""
    found = [f for plan in plans for f in plan.faults(call, body)]
    http = next((f for f in found if f.http), None)
    return http, [f for f in found if not f.http]
