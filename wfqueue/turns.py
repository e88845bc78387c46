"""Durable turns: an agent step's conversation, saved after every completed model call.

A tool-using step talks to the model for up to a dozen turns. Without a record
of them, anything that restarts the step (a Celery retry after a transient
error, a redelivery after a worker was SIGKILLed, ``wfqueue resume``) would
start at turn 1 again and pay for every earlier turn a second time. So the
provider keeps a :class:`Transcript` and hands it to a :class:`TurnJournal`
after each call that came back whole; a restarted step loads it and sends the
next request, never one that already has a reply.

The transcript holds what the next request needs, not a replay log: the
conversation with its replies (``history``), the user turn waiting to be sent
(``pending``: the prompt, tool results, or a repair request), counters for the
turn and token caps, and where the step stands (``phase``). Tool results are
saved with the turn, so tools are not run again either.

The journal also records each call's usage in the same write as the turn
(:class:`wfqueue.state.SessionState.save_turn`): a turn and its bill are
saved together or not at all, so a restart neither loses nor double-counts
usage. The finished transcript is exported as JSON lines beside the session's
other files for audit; the Redis copy expires with the session state.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from wfqueue.state import SessionStore

__all__ = ["MemoryJournal", "SessionJournal", "Transcript", "TurnJournal", "journal_key", "transcript_jsonl"]

Phase = Literal["loop", "repair", "done", "failed"]


def journal_key(label: str, inputs_json: str) -> str:
    """The key a step's transcript is saved under: its label and a digest of its inputs.

    The same step redelivered finds its turns; a step asked again with other inputs (a split the
    user adjusted, a repair round with feedback, a replan) starts a conversation of its own."""
    return f"{label}#{hashlib.sha256(inputs_json.encode('utf-8')).hexdigest()[:12]}"


class Transcript(BaseModel):
    """Where one step's conversation with the model stands; see the module docstring."""

    step: str  # the journal key (journal_key)
    label: str = ""  # the step's label, for people and file names
    system: list[dict[str, Any]] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    pending: dict[str, Any] | None = None
    # The results of the last reply's tool calls that ran so far, while they run (a coding run saves each one:
    # a restarted turn does not run a finished edit again); empty once ``pending`` holds them all.
    tool_results: list[dict[str, Any]] = Field(default_factory=list)
    phase: Phase = "loop"
    turns: int = 0  # calls completed in the tool loop (the repair call is not a turn)
    spent_tokens: int = 0
    calls: list[dict[str, Any]] = Field(default_factory=list)  # usage entry of every completed call
    answer: str | None = None  # the validated answer text, once done
    error: str | None = None  # why the step failed, once failed

    @property
    def finished(self) -> bool:
        return self.phase in ("done", "failed")

    def messages(self) -> list[dict[str, Any]]:
        """The messages of the next request: the conversation so far and the pending user turn."""
        return [*self.history, self.pending] if self.pending is not None else list(self.history)


class TurnJournal(Protocol):
    """Where a provider keeps its transcripts between attempts at a step."""

    def load(self, step: str) -> Transcript | None:
        """The saved transcript of ``step`` (its label), or None when it never completed a call."""
        ...

    def save(self, transcript: Transcript, call: dict[str, Any] | None) -> None:
        """Save ``transcript``; ``call`` is the usage entry of the call just completed (None: no call)."""
        ...

    def running(self, step: str, label: str) -> AbstractContextManager[object]:
        """Hold ``step`` while this run loads and advances it: a second run of the same step (sent again while
        this one still runs) waits, then loads what this one saved, rather than pay for the same turn again."""
        ...


class MemoryJournal:
    """A journal in a dict: the default for a provider used in one process (tests, scripts)."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}
        self.calls: list[dict[str, Any]] = []
        self._steps: dict[str, threading.Lock] = {}

    def load(self, step: str) -> Transcript | None:
        raw = self.saved.get(step)
        return Transcript.model_validate_json(raw) if raw is not None else None

    def save(self, transcript: Transcript, call: dict[str, Any] | None) -> None:
        # Stored as JSON, as Redis would: a caller mutating its copy cannot change what was saved.
        self.saved[transcript.step] = transcript.model_dump_json()
        if call is not None:
            self.calls.append(dict(call))

    def running(self, step: str, label: str) -> AbstractContextManager[object]:
        return self._steps.setdefault(step, threading.Lock())


class SessionJournal:
    """The journal of a session's workers: transcripts and usage in the session's Redis state."""

    def __init__(self, state: SessionStore) -> None:
        self.state = state

    def load(self, step: str) -> Transcript | None:
        raw = self.state.turn(step)
        return Transcript.model_validate_json(raw) if raw is not None else None

    def save(self, transcript: Transcript, call: dict[str, Any] | None) -> None:
        entry = {**call, "recorded_at": time.time()} if call is not None else None
        self.state.save_turn(transcript.step, transcript.model_dump_json(), entry)

    def running(self, step: str, label: str) -> AbstractContextManager[object]:
        return self.state.running_step(step, label)


def transcript_jsonl(transcript: Transcript) -> str:
    """The transcript for audit, one JSON object a line: a header, every message, then the outcome.

    Messages come in conversation order (the prompt, each reply, each tool result), so
    ``jq`` or a diff reads the step as it happened."""
    lines: list[dict[str, Any]] = [{"step": transcript.label, "key": transcript.step, "system": transcript.system}]
    lines += [{"message": message} for message in transcript.messages()]
    lines.append({"phase": transcript.phase, "turns": transcript.turns, "spent_tokens": transcript.spent_tokens,
                  "calls": transcript.calls, "answer": transcript.answer, "error": transcript.error})
    return "".join(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n" for line in lines)
