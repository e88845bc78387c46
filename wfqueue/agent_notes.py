"""A running agent's note on what it is waiting for, for the command that watches it.

A step whose model call is refused (429, 529, a cut stream) waits and sends again, up to minutes in all; without
a word, the user sees an agent ``running`` and nothing moving. The retry loop knows why it waits but not which
agent it serves; the task running the agent knows the agent and its record. A context variable joins the two,
so no provider takes a callback for it. The task sets the writer (:func:`noting`); the retry loop calls
:func:`note` with a line, and with None once a call has come back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

log = logging.getLogger(__name__)

NoteWriter = Callable[[str | None], None]

_writer: ContextVar[NoteWriter | None] = ContextVar("wfqueue_agent_note", default=None)


@contextmanager
def noting(write: NoteWriter) -> Iterator[None]:
    """Within the block, :func:`note` goes to ``write`` (the agent's record, in a task)."""
    token = _writer.set(write)
    try:
        yield
    finally:
        _writer.reset(token)


def note(text: str | None) -> None:
    """Tell whoever watches this agent what it waits for (None: nothing any more). Outside :func:`noting`, and
    when the write fails, nothing happens: a note is never worth failing a model call for."""
    write = _writer.get()
    if write is None:
        return
    try:
        write(text)
    except Exception:  # the broker hiccuped: the next note, or the agent's end, says more
        log.debug("could not write the agent's note %r", text, exc_info=True)
