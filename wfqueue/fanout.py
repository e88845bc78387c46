"""The one chord every workflow uses, and a callback that runs only once every agent of its header has finished.

On Redis a chord counts finished header parts; a part delivered twice (a Redis
restart restores an unacked message that a retry already re-sent, a worker
lost mid-task) counts twice, and the callback fires while another agent still
runs. A callback that went on would call that agent failed ("no result") and
the plan partial, though the agent finishes a moment later. So the callback
first looks at the agent records (wfqueue.keys.AgentState) of its header: while
one is neither done nor failed, it leaves its payload in Redis and returns
``{"waiting_for": [...]}`` instead of its result. Each agent that finishes then
takes the payload, if it is there, and sends the callback again
(``send_waiting_callback``); the run that finds every agent finished stores its
result, or why it failed, for the coordinator, which goes on waiting for it
(``waiting_for``, ``settled_result``).

The order of the writes makes a lost wake-up impossible: the callback stores its
payload before it reads the records again; an agent writes its final record
before it looks for the payload. The payload is taken atomically, so one process
sends it: a callback finding every agent finished at its second look runs only
if it takes its own payload back (else an agent took it and sent another run).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from celery import Celery, chord
from celery.result import AsyncResult

from wfqueue import keys
from wfqueue.errors import InfrastructureError
from wfqueue.keys import TERMINAL_AGENT_STATES
from wfqueue.payloads import PAYLOADS, AgentTask, FanInCallback
from wfqueue.state import SessionStore

__all__ = ["WAITING_FOR", "fail", "fan_out", "hold_back", "late_result", "send_waiting_callback", "settle",
           "settled_result", "unfinished", "waiting_for"]

WAITING_FOR = "waiting_for"  # the key of what a callback that held back returns instead of its result


def fan_out(app: Celery, state: SessionStore, header: Sequence[AgentTask],
            callback: FanInCallback) -> AsyncResult[Any]:
    """Run ``header`` in parallel, then ``callback`` once all of them have finished."""
    for name in (keys.CALLBACK_WAITING, keys.CALLBACK_RESULT, keys.CALLBACK_ERROR):
        state.forget(name)  # a former chord's, as a resumed or re-enqueued plan may leave
    body = callback.model_copy(update={"agents": [p.agent for p in header]})
    return chord([p.signature(app) for p in header])(body.signature(app))


def unfinished(state: SessionStore, agents: Sequence[str]) -> list[str]:
    """The agents whose records say neither done nor failed."""
    records = state.agents(list(agents))
    return [a for a in agents if records.get(a, {}).get("state") not in TERMINAL_AGENT_STATES]


def hold_back(state: SessionStore, callback: FanInCallback) -> list[str] | None:
    """None when ``callback`` may run now; else the agents it holds back for (none: an agent that finished meanwhile
    sent another run), its payload left in Redis for them."""
    if not callback.agents or not unfinished(state, callback.agents):
        return None
    stored = {"task": callback.task_name, "kwargs": callback.model_dump(mode="json")}
    state.store(keys.CALLBACK_WAITING, json.dumps(stored))
    left = unfinished(state, callback.agents)  # again: the last one may have finished before the payload was there
    if left:
        return left
    return None if state.take(keys.CALLBACK_WAITING) is not None else []


def settle(state: SessionStore, result: Any) -> None:
    """A callback ran to its end: its result is kept for a coordinator whose chord returned ``waiting_for``."""
    state.store(keys.CALLBACK_RESULT, json.dumps(result))


def fail(state: SessionStore, reason: str) -> None:
    """A callback failed: the coordinator waiting for its result is told why instead of waiting on."""
    state.store(keys.CALLBACK_ERROR, reason)


def send_waiting_callback(app: Celery, state: SessionStore) -> bool:
    """Called by an agent that has just written its final record: send the callback that held back, if one did
    and no other agent has sent it."""
    raw = state.take(keys.CALLBACK_WAITING)
    if raw is None:
        return False
    stored = json.loads(raw)
    PAYLOADS[stored["task"]].model_validate(stored["kwargs"]).send_alone(app)
    return True


def waiting_for(value: Any) -> list[str] | None:
    """The agents a chord's callback held back for, when ``value`` (the chord's result) says it did."""
    if isinstance(value, dict) and set(value) == {WAITING_FOR}:
        return [str(agent) for agent in value[WAITING_FOR]]
    return None


def late_result(state: SessionStore, settled: Callable[[], Any] | None) -> Callable[[], Any]:
    """What ends a coordinator's wait for a callback that held back: ``settled``'s value (the watchdog's), else
    the result of the run that found every agent finished (``settled_result``)."""

    def check() -> Any:
        value = settled() if settled is not None else None
        return value if value is not None else settled_result(state)

    return check


def settled_result(state: SessionStore) -> Any | None:
    """The result of the callback's run that found every agent finished; None while there is none. Raises
    InfrastructureError with the worker's reason when that run failed."""
    error = state.recall(keys.CALLBACK_ERROR)
    if error is not None:
        raise InfrastructureError(f"the fan-out's callback failed on its worker: {error}",
                                  hint="see the worker log (embedded mode: .workflow/.queue/worker.log), then "
                                       "`wfqueue resume` the session")
    raw = state.recall(keys.CALLBACK_RESULT)
    return None if raw is None else json.loads(raw)
