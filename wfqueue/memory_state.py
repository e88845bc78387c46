"""A session's shared state in process memory, for fast in-process tests of steps.

``MemorySessionState`` has the public methods of ``wfqueue.state.SessionState``
(both satisfy ``wfqueue.state.SessionStore``) and keeps what Redis would hold in
dicts, under the same key names (wfqueue.keys), encoded the same way: meta and
agent fields as JSON, usage entries as sorted-key JSON. A step run against it
writes the same files and remembers the same values as against Redis. Keys do
not expire, and nothing is shared between processes: real workers always use
``SessionState``.
"""

from __future__ import annotations

import json
import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from wfqueue import keys
from wfqueue.keys import SessionMeta

_Value = str | dict[str, str] | list[str]


class MemorySessionState:
    """Everything one session would hold in Redis, held in dicts (thread-safe)."""

    def __init__(self, session_id: str = "S-memory") -> None:
        self.session_id = session_id
        self._data: dict[str, _Value] = {}
        self._lock = threading.Lock()
        self._step_locks: dict[str, threading.Lock] = {}

    def names(self) -> list[str]:
        """The key names stored (relative to the session, as SessionState takes them), sorted."""
        with self._lock:
            return sorted(self._data)

    def reset(self) -> None:
        with self._lock:
            self._data.clear()

    # -- typed access: a name holds one Redis type, and using it as another fails as Redis does ----

    def _text(self, name: str) -> str | None:
        value = self._data.get(name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} holds a {type(value).__name__}, not a string (Redis: WRONGTYPE)")
        return value

    def _hash(self, name: str) -> dict[str, str]:
        value = self._data.setdefault(name, {})
        if not isinstance(value, dict):
            raise TypeError(f"{name} holds a {type(value).__name__}, not a hash (Redis: WRONGTYPE)")
        return value

    def _list(self, name: str) -> list[str]:
        value = self._data.setdefault(name, [])
        if not isinstance(value, list):
            raise TypeError(f"{name} holds a {type(value).__name__}, not a list (Redis: WRONGTYPE)")
        return value

    def _read_hash(self, name: str) -> dict[str, str]:
        with self._lock:
            value = self._data.get(name)
            if value is None:
                return {}
            if not isinstance(value, dict):
                raise TypeError(f"{name} holds a {type(value).__name__}, not a hash (Redis: WRONGTYPE)")
            return dict(value)

    # -- session metadata -------------------------------------------------------------------------

    def set_meta(self, **fields: Any) -> None:
        with self._lock:
            self._hash(keys.META).update({k: json.dumps(v) for k, v in fields.items()})

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._read_hash(keys.META).items()}

    def session_meta(self) -> SessionMeta:
        return SessionMeta.model_validate(self.meta())

    def remember_once(self, name: str, value: str) -> str:
        """Store ``value`` under ``name`` unless something is there; return what is stored."""
        with self._lock:
            stored = self._text(name)
            if stored is None:
                self._data[name] = value
                return value
            return stored

    def store(self, name: str, value: str) -> None:
        with self._lock:
            self._data[name] = value

    def recall(self, name: str) -> str | None:
        with self._lock:
            return self._text(name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._data.pop(name, None)

    def take(self, name: str) -> str | None:
        with self._lock:
            value = self._text(name)
            self._data.pop(name, None)
            return value

    # -- agents -----------------------------------------------------------------------------------

    def set_agent(self, area: str, **fields: Any) -> None:
        with self._lock:
            self._hash(keys.agent_key(area)).update({k: json.dumps(v) for k, v in fields.items()})

    def agent(self, area: str) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._read_hash(keys.agent_key(area)).items()}

    def agents(self, areas: list[str]) -> dict[str, dict[str, Any]]:
        return {area: self.agent(area) for area in areas}

    def count_attempt(self, area: str) -> int:
        with self._lock:
            name = keys.attempts_key(area)
            count = int(self._text(name) or "0") + 1
            self._data[name] = str(count)
            return count

    # -- sections of plan-note.md -------------------------------------------------------------------

    def put_section(self, heading: str, body: str) -> None:
        with self._lock:
            self._hash(keys.SECTIONS)[heading] = body

    def sections(self) -> dict[str, str]:
        return self._read_hash(keys.SECTIONS)

    # -- LLM usage and durable turns ------------------------------------------------------------------

    def record_usage(self, entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        with self._lock:
            self._list(keys.USAGE).extend(json.dumps(entry, sort_keys=True) for entry in entries)

    def usage(self) -> list[dict[str, Any]]:
        with self._lock:
            value = self._data.get(keys.USAGE)
            if value is not None and not isinstance(value, list):
                raise TypeError(f"{keys.USAGE} holds a {type(value).__name__}, not a list (Redis: WRONGTYPE)")
            return [json.loads(raw) for raw in value or []]

    def usage_count(self) -> int:
        return len(self.usage())

    def save_turn(self, step: str, transcript: str, call: dict[str, Any] | None) -> None:
        """The transcript and the call's usage together, as SessionState's MULTI does."""
        with self._lock:
            if call is not None:
                self._list(keys.USAGE).append(json.dumps(call, sort_keys=True))
            self._data[keys.turn_key(step)] = transcript

    def turn(self, step: str) -> str | None:
        with self._lock:
            return self._text(keys.turn_key(step))

    def running_step(self, step: str, label: str) -> AbstractContextManager[object]:
        """``step`` run by one thread at a time, as SessionState holds it for one worker at a time."""
        with self._lock:
            lock = self._step_locks.setdefault(step, threading.Lock())
        return lock


if TYPE_CHECKING:  # both implementations keep the one contract steps are typed against
    from wfqueue.state import SessionState, SessionStore

    _memory: type[SessionStore] = MemorySessionState
    _redis: type[SessionStore] = SessionState
