"""What a workflow declares so that `status`, `resume`, session lookup and the watchdog can
handle its sessions without knowing it: one ``WorkflowKind`` per workflow, listed in ``registry``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from celery import Celery
from celery.result import AsyncResult
from pydantic import BaseModel

from wfqueue.sessions import SessionIds
from wfqueue.settings import Settings
from wfqueue.state import SessionStore
from wfqueue.workflow.contract import PlanOutcome, ResumeRequest


class WatchdogRecovery(Protocol):
    """How the stalled-session watchdog may finish a session whose fan-out never reached its callback."""

    def watched(self, state: SessionStore, session_dir: Path) -> list[str] | None:
        """The session's agents (seeding Redis from disk as needed); None: nothing to recover from."""
        ...

    def reenqueue(self, app: Celery, state: SessionStore, session_dir: Path,
                  provider: str) -> tuple[list[str], AsyncResult[Any]]:
        """Send the missing work again with its callback: what was missing, and the new fan-out."""
        ...

    def finalize(self, app: Celery, state: SessionStore, session_dir: Path) -> None:
        """Run the callback alone, so the session ends (as partial) with what it has."""
        ...


@dataclass(frozen=True)
class WorkflowKind:
    name: str  # the session meta's ``kind`` (wfqueue.keys.SessionKind)
    label: str  # how `wfqueue status` names it
    ids: SessionIds  # how its session ids are made
    root: Callable[[Path], Path]  # the folder holding its sessions, for a repository
    # Reads a session folder for `wfqueue status SESSION` (live state from a shared broker when set).
    read_status: Callable[[Path, Settings], BaseModel]
    # Finishes an interrupted session, re-running only its missing work (`wfqueue resume`); the UI is
    # the workflow's own protocol.
    resume: Callable[[Settings, Any, ResumeRequest], PlanOutcome]
    # What is not done yet, by name (areas, angles, phases), from Redis and the session's files.
    missing_work: Callable[[SessionStore, Path], list[str]]
    # None: the watchdog only reports a stalled session (its coordinator may be waiting on a person).
    recovery: WatchdogRecovery | None = None
    marker: str | None = None  # a file every session folder of this kind holds

    def folder(self, repo: Path, session_id: str) -> Path | None:
        """The folder of ``session_id`` when it is a session of this kind."""
        folder = self.root(repo) / session_id
        if folder.is_dir() and not folder.is_symlink() and (self.marker is None or (folder / self.marker).is_file()):
            return folder
        return None
