"""A stop signal that a finalizer swallowed, raised again where the command next waits.

Python runs a signal handler between two bytecodes of the main thread, wherever it is. One that lands inside an
object's ``__del__`` (Celery's ``AsyncResult`` unsubscribes from its result channel there, over the network) has
its exception printed as "Exception ignored in ..." and dropped: the plan command went on waiting for its agents,
and a SIGTERM (a service manager, a container stop) never stopped it. The handler records the stop here before it
raises; the waits of ``wfqueue.runtime`` raise it again at their next poll.
"""

from __future__ import annotations

from dataclasses import dataclass

_asked: list[KeyboardInterrupt] = []


@dataclass(frozen=True)
class LeftBehind:
    """The session a stop interrupted, and how to finish it (None: its command's report says it)."""

    session_id: str
    hint: str | None


_left: list[LeftBehind] = []


def ask(stop: KeyboardInterrupt) -> None:
    """Called by a signal handler just before it raises ``stop``."""
    _asked[:] = [stop]


def asked() -> KeyboardInterrupt | None:
    """The stop a signal asked for that has not reached the command's handler (None: none): an error raised
    after it may be the stop, hidden (pydantic-core reports a KeyboardInterrupt as its own SchemaError)."""
    return _asked[0] if _asked else None


def raise_if_asked() -> None:
    """Raise the stop a signal asked for (once): it did not end the command, so something swallowed it."""
    if _asked:
        raise _asked.pop()


def leave(session_id: str, hint: str | None) -> None:
    """A stop interrupted ``session_id``: the command's handler tells a script which, and how to finish it."""
    _left[:] = [LeftBehind(session_id, hint)]


def left_behind() -> LeftBehind | None:
    """The session the last stop interrupted, if one was."""
    return _left[0] if _left else None


def clear() -> None:
    """The stop reached the command's handler (or a new command begins): nothing is pending."""
    _asked.clear()
    _left.clear()
