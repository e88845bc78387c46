"""Every workflow kind, and finding which one a session id names.

Adding a workflow: one module that defines its coordinator and its ``WorkflowKind``,
and one entry in ``KINDS``.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from wfqueue.collab.coordinator import COLLAB
from wfqueue.errors import SessionNotFoundError
from wfqueue.execute.coordinator import EXECUTE
from wfqueue.lite.coordinator import LITE
from wfqueue.sessions import WORKFLOW_DIR, check_session_id, linked_folder, record_lost
from wfqueue.workflow.kind import WorkflowKind
from wfqueue.workflow_session.coordinator import WORKFLOW

# In lookup order: an id found under several roots is the first kind's.
KINDS: tuple[WorkflowKind, ...] = (COLLAB, LITE, WORKFLOW, EXECUTE)


def kind_named(name: str | None) -> WorkflowKind | None:
    """The kind a session meta names, None for an unknown (or missing) one."""
    return next((kind for kind in KINDS if kind.name == name), None)


def sessions_by_kind(repo: Path) -> dict[WorkflowKind, list[str]]:
    """The ids of ``repo``'s sessions, by kind, sorted. Only folders that are sessions: a listed id must be one
    the next command accepts."""
    return {kind: sorted(p.name for p in root.iterdir() if kind.folder(repo, p.name) is not None)
            for kind in KINDS if (root := kind.root(repo)).is_dir()}


def locate(repo: Path, session_id: str) -> tuple[WorkflowKind, Path]:
    """Which kind of session ``session_id`` is, and its folder (checked to be an id, not a path)."""
    check_session_id(session_id)
    for kind in KINDS:
        folder = kind.folder(repo, session_id)
        if folder is not None:
            return kind, folder
    for kind in KINDS:
        lacking = kind.root(repo) / session_id
        if (linked := linked_folder(lacking)) is not None:
            raise linked
        if lacking.is_dir() and kind.marker is not None:  # a session folder that lost its record
            raise record_lost(lacking, kind.marker)
    known = sorted(session for ids in sessions_by_kind(repo).values() for session in ids)
    raise SessionNotFoundError(f"no session {session_id} under {repo / WORKFLOW_DIR}",
                               hint=f"existing sessions: {shown_ids(known, session_id)}")


SHOWN_IDS = 12  # a mistyped id's hint names this many sessions at most


def shown_ids(known: list[str], wanted: str) -> str:
    """The sessions a mistyped ``wanted`` may have meant: those closest to it first, then the others, last in
    name order first, at most SHOWN_IDS, saying how many more there are (the hint showed the last twelve in name
    order, silently, and left out the one a typo in its date was meant to be). Pure."""
    if not known:
        return "none"
    close = difflib.get_close_matches(wanted, known, n=SHOWN_IDS, cutoff=0.6)
    rest = [session for session in reversed(known) if session not in close]
    shown = (close + rest)[:SHOWN_IDS]
    more = len(known) - len(shown)
    return ", ".join(shown) + (f" (and {more} more: `wfqueue status` lists them)" if more else "")
