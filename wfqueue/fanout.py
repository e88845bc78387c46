"""The one chord every workflow uses, and a callback that runs only once every agent of its header has finished.

On Redis a chord counts finished header parts; a part delivered twice (a Redis
restart restores an unacked message that a retry already re-sent, a worker
lost mid-task) counts twice, and the callback fires while another agent still
runs. A callback that went on would call that agent failed ("no result") and
the plan partial, though the agent finishes a moment later. So the callback
first looks at the agent records (wfqueue.keys.AgentState) of its header: while
one is neither done nor failed, it leaves its payload in Redis and returns
``{"waiting_for": [...]}`` instead of its result; the agent that finishes next
sends it again (``send_waiting_callback``), and the run that finds every agent
finished stores its result for the coordinator, which goes on waiting for it
(``waiting_for``, ``settled_result``).

The order of the writes makes a lost wake-up impossible: the callback stores its
payload before it reads the records; an agent writes its final record before it
looks for a payload. A callback sent twice does its work twice, which every
callback may (they read what finished from Redis and write the same files).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from celery import Celery, chord
from celery.result import AsyncResult

from wfqueue import keys
from wfqueue.keys import TERMINAL_AGENT_STATES
from wfqueue.payloads import PAYLOADS, AgentTask, FanInCallback
from wfqueue.state import SessionStore

__all__ = ["WAITING_FOR", "fan_out", "hold_back", "send_waiting_callback", "settle", "settled_result", "waiting_for"]

WAITING_FOR = "waiting_for"  # the key of what a callback that held back returns instead of its result


def fan_out(app: Celery, state: SessionStore, header: Sequence[AgentTask],
            callback: FanInCallback) -> AsyncResult[Any]:
    """Run ``header`` in parallel, then ``callback`` once all of them have finished."""
    state.forget(keys.CALLBACK_WAITING)  # a former chord's, as a resumed or re-enqueued plan may leave
    state.forget(keys.CALLBACK_RESULT)
    body = callback.model_copy(update={"agents": [p.agent for p in header]})
    return chord([p.signature(app) for p in header])(body.signature(app))


def unfinished(state: SessionStore, agents: Sequence[str]) -> list[str]:
    """The agents whose records say neither done nor failed."""
    records = state.agents(list(agents))
    return [a for a in agents if records.get(a, {}).get("state") not in TERMINAL_AGENT_STATES]


def hold_back(state: SessionStore, callback: FanInCallback) -> list[str]:
    """The agents ``callback`` must wait for; none: it may run now. When some are left, its payload stays in
    Redis for the last of them to send again."""
    if not callback.agents or not unfinished(state, callback.agents):
        return []
    stored = {"task": callback.task_name, "kwargs": callback.model_dump(mode="json")}
    state.store(keys.CALLBACK_WAITING, json.dumps(stored))
    return unfinished(state, callback.agents)  # read again: one may have finished before the payload was there


def settle(state: SessionStore, result: Any) -> None:
    """A callback ran to its end: its result is kept for a coordinator whose chord returned ``waiting_for``."""
    state.store(keys.CALLBACK_RESULT, json.dumps(result))
    state.forget(keys.CALLBACK_WAITING)


def send_waiting_callback(app: Celery, state: SessionStore) -> bool:
    """Called by an agent that has just written its final record: send the callback that held back, if one did."""
    raw = state.recall(keys.CALLBACK_WAITING)
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


def settled_result(state: SessionStore) -> Any | None:
    """The result of the callback's run that found every agent finished; None while there is none."""
    raw = state.recall(keys.CALLBACK_RESULT)
    return None if raw is None else json.loads(raw)
