"""Which kind of session an id names (collab, lite or workflow), for the commands that take any of them."""

from __future__ import annotations

from pathlib import Path

from wfqueue.errors import SessionNotFoundError
from wfqueue.lite.coordinator import LITE_DIR
from wfqueue.sessions import WORKFLOW_DIR, check_session_id, planning_root
from wfqueue.workflow_session.session import SESSION_FILE, active_root


def locate(repo: Path, session_id: str) -> tuple[str, Path]:
    """Which kind of session this id is, and its folder."""
    check_session_id(session_id)
    candidates = [("collab", planning_root(repo) / session_id), ("lite", repo / WORKFLOW_DIR / LITE_DIR / session_id),
                  ("workflow", active_root(repo) / session_id)]
    for kind, folder in candidates:
        if folder.is_dir() and (kind != "workflow" or (folder / SESSION_FILE).is_file()):
            return kind, folder
    known = sorted(p.name for _, folder in candidates if folder.parent.is_dir() for p in folder.parent.iterdir())
    raise SessionNotFoundError(f"no session {session_id} under {repo / WORKFLOW_DIR}",
                               hint=f"existing sessions: {', '.join(known[-12:]) or 'none'}")
