"""The workflow session's context phase (the exploration chord's callback) run twice leaves the same files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.wfs_factory import make_session, task
from wfqueue import keys
from wfqueue.keys import AgentState
from wfqueue.lite.models import Assessment
from wfqueue.memory_state import MemorySessionState
from wfqueue.workflow_session.session import PROCESS_DIR
from wfqueue.workflow_session.steps import run_context_phase


def test_the_context_phase_run_twice_writes_the_same_notes(sample_repo: Path) -> None:
    """A redelivered (or re-sent) callback appended "re-explore angle ..." to the planning notes a second time."""
    folder = make_session(sample_repo, "Add per-user rate limiting", [task(1, "Limit", ["notes_api/api/handlers.py"])])
    state = MemorySessionState()
    state.store(keys.ASSESSMENT, Assessment(complexity="Medium", scope="s", depth="d", risk="r", dependencies="x",
                                            preset="feature", angles=["security"], needs_exploration=True)
                .model_dump_json())
    state.set_agent("security", state=AgentState.FAILED, error="the API kept failing")
    notes = folder / PROCESS_DIR / "planning-notes.json"
    run_context_phase(state, folder, str(sample_repo))
    first = {p.name: p.read_bytes() for p in sorted((folder / PROCESS_DIR).iterdir())}
    run_context_phase(state, folder, str(sample_repo))
    assert json.loads(notes.read_text())["deferred"] == ["re-explore angle security (failed: the API kept failing)"]
    assert {p.name: p.read_bytes() for p in sorted((folder / PROCESS_DIR).iterdir())} == first


def test_the_context_phase_reads_the_index_the_planners_read(sample_repo: Path) -> None:
    """With WFQUEUE_INDEX_MAX_FILE_BYTES set, `wfqueue plan` built a second index of the repository with the
    default size limit, and built its context from that one."""
    from wfqueue.analysis.files import DEFAULT_MAX_FILE_BYTES
    from wfqueue.analysis.index_cache import cache_file

    folder = make_session(sample_repo, "Add per-user rate limiting", [task(1, "Limit", ["notes_api/api/handlers.py"])])
    state = MemorySessionState()
    state.store(keys.ASSESSMENT, Assessment(complexity="Medium", scope="s", depth="d", risk="r", dependencies="x",
                                            preset="feature", angles=[], needs_exploration=False).model_dump_json())
    run_context_phase(state, folder, str(sample_repo), max_file_bytes=2_000_000)
    assert cache_file(sample_repo, 2_000_000).is_file()
    assert not cache_file(sample_repo, DEFAULT_MAX_FILE_BYTES).exists()
