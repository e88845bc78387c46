"""Session ids are unique per repository only: on a broker several repositories share, a new session must never
take over another folder's session that has the same id."""

from __future__ import annotations

from pathlib import Path

import pytest

from wfqueue.coordinator_lease import CoordinatorLease
from wfqueue.errors import SessionIdTakenError
from wfqueue.state import SessionState, redis_client

SID = "CPLAN-add-per-user-rate-limiting-to-2026-11-26"


def test_a_new_session_does_not_reset_another_repositorys_session_of_the_same_id(redis_url: str) -> None:
    """ALPHA's coordinator was stopped while its agents still ran; the same requirement planned in BETA took the
    id, reset ALPHA's keys, and ALPHA's agents then wrote their plans into BETA's session."""
    client = redis_client(redis_url, 5)
    alpha = SessionState(client, SID, 600)
    alpha.reset()
    alpha.set_meta(session_dir=f"/src/alpha/.workflow/.planning/{SID}", status="planning")
    alpha.set_agent("gen0", state="running")
    beta = CoordinatorLease(SessionState(client, SID, 600), fresh=True,
                            session_dir=f"/src/beta/.workflow/.planning/{SID}")
    with pytest.raises(SessionIdTakenError, match="belongs on this broker to /src/alpha/"), beta:
        pass
    assert alpha.agent("gen0") == {"state": "running"}, "ALPHA's state was touched"
    # The same folder's own session (its folder removed and planned again) is its to reset.
    with CoordinatorLease(SessionState(client, SID, 600), fresh=True,
                          session_dir=f"/src/alpha/.workflow/.planning/{SID}"):
        assert alpha.agent("gen0") == {}


def test_going_on_with_a_session_another_folder_holds_is_refused_unless_that_folder_is_gone(
        redis_url: str, tmp_path: Path) -> None:
    """`plan --session` (or resume) of the same id in another repository took the session over: it rewrote its
    meta, and wrote into its state."""
    client = redis_client(redis_url, 5)
    alpha, beta = tmp_path / "alpha" / SID, tmp_path / "beta" / SID
    for folder in (alpha, beta):
        folder.mkdir(parents=True)
    state = SessionState(client, SID, 600)
    state.reset()
    state.set_meta(session_dir=str(alpha))
    with pytest.raises(SessionIdTakenError, match=f"belongs on this broker to {alpha}"), \
            CoordinatorLease(SessionState(client, SID, 600), session_dir=str(beta)):
        pass
    with CoordinatorLease(SessionState(client, SID, 600), session_dir=str(alpha)):  # its own folder: goes on
        pass
    alpha.rmdir()  # the repository moved: the session goes on where it is now
    with CoordinatorLease(SessionState(client, SID, 600), session_dir=str(beta)):
        pass
