"""The in-memory session state: real steps run in process against it, and it answers as Redis does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from wfqueue import keys
from wfqueue.collab.finalize import finalize_session
from wfqueue.collab.steps import ANALYSIS_FILE, NOTE_FILE, run_area, run_understanding
from wfqueue.keys import AgentState, SessionKind, SessionMeta, SessionStatus
from wfqueue.lite.render import says_awaiting
from wfqueue.lite.steps import TASKS_FILE, run_assessment, run_exploration, run_planning, run_synthesis
from wfqueue.memory_state import MemorySessionState
from wfqueue.providers import make_provider
from wfqueue.providers.base import Provider, Step
from wfqueue.settings import Settings
from wfqueue.state import SessionState, SessionStore, redis_client

REQUIREMENT = "Add per-user rate limiting to the API"


class Counting:
    """A provider that records the steps it was asked, and answers with ``inner`` (or refuses)."""

    def __init__(self, inner: Provider | None) -> None:
        self.inner = inner
        self.name = inner.name if inner is not None else "offline"
        self.model = inner.model if inner is not None else None
        self.asked: list[str] = []

    def run(self, step: Step) -> BaseModel:
        self.asked.append(step.label)
        if self.inner is None:
            raise AssertionError(f"{step.label} was asked again: its remembered answer should have been reused")
        return self.inner.run(step)


def offline() -> Counting:
    return Counting(make_provider("offline", Settings()))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def plan_collab(state: SessionStore, provider: Counting, repo: Path, session_dir: Path) -> None:
    """The understanding step, every area, then the callback: what the collab workers run."""
    analysis = run_understanding(state, provider, session_dir, str(repo), REQUIREMENT, 3)
    for sub in analysis.sub_domains:
        run_area(state, provider, Settings(), session_dir, str(repo), sub.focus_area, "worker-1")
        state.set_agent(sub.focus_area, state=AgentState.DONE)
    finalize_session(state, Settings(), session_dir)


def test_a_collab_plan_runs_in_process_and_a_second_run_writes_the_same_bytes(sample_repo: Path,
                                                                               tmp_path: Path) -> None:
    state = MemorySessionState("S-collab")
    session_dir = tmp_path / "S-collab"
    state.set_meta(kind=SessionKind.COLLAB, repo=str(sample_repo), session_dir=str(session_dir),
                   status=SessionStatus.PLANNING)
    first = offline()
    plan_collab(state, first, sample_repo, session_dir)

    analysis = json.loads((session_dir / ANALYSIS_FILE).read_text(encoding="utf-8"))
    areas = [sub["focus_area"] for sub in analysis["sub_domains"]]
    assert len(areas) >= 2 and first.asked[0] == "understand"
    for area in areas:
        assert (session_dir / "agents" / area / "plan.json").is_file()
        assert state.recall(keys.result_key(area)) is not None
    note = (session_dir / NOTE_FILE).read_text(encoding="utf-8")
    assert all(heading in note for heading in state.sections())
    assert state.session_meta().status in {SessionStatus.COMPLETED, SessionStatus.CONFLICTS_DETECTED}

    # A redelivered task of every step: no provider call, the same files byte for byte.
    written = snapshot(session_dir)
    again = Counting(None)
    plan_collab(state, again, sample_repo, session_dir)
    assert again.asked == []
    assert snapshot(session_dir) == written


def plan_lite(state: SessionStore, provider: Counting, repo: Path, session_dir: Path) -> list[str]:
    assessment = run_assessment(state, provider, str(repo), REQUIREMENT, force_explore=True)
    for angle in assessment.angles:
        run_exploration(state, provider, session_dir, str(repo), REQUIREMENT, angle, "worker-1")
    run_synthesis(state, session_dir, REQUIREMENT)
    run_planning(state, provider, session_dir, str(repo), REQUIREMENT, [])
    return assessment.angles


def test_a_lite_plan_runs_in_process_and_a_second_run_reuses_every_answer(sample_repo: Path, tmp_path: Path) -> None:
    state = MemorySessionState("S-lite")
    session_dir = tmp_path / "S-lite"
    session_dir.mkdir()
    first = offline()
    angles = plan_lite(state, first, sample_repo, session_dir)

    assert angles and first.asked[0] == "assess"
    stored = state.recall(keys.ASSESSMENT)
    assert stored is not None and json.loads(stored)["angles"] == angles
    assert all((session_dir / f"exploration-{angle}.md").is_file() for angle in angles)
    assert (session_dir / TASKS_FILE).read_text(encoding="utf-8").strip()

    written = snapshot(session_dir)
    again = Counting(None)
    assert plan_lite(state, again, sample_repo, session_dir) == angles
    assert again.asked == []
    assert state.recall(keys.ASSESSMENT) == stored
    assert snapshot(session_dir) == written
    # A plan the user is to be shown says so from the planning step on: a command stopped before its question
    # (or while a worker still planned) leaves a plan that reads as not accepted, never as completed.
    assert not says_awaiting((session_dir / "plan.md").read_text(encoding="utf-8"))
    run_planning(state, again, session_dir, str(sample_repo), REQUIREMENT, [], awaiting=True)
    assert says_awaiting((session_dir / "plan.md").read_text(encoding="utf-8")) and again.asked == []


# -- the same answers as Redis -------------------------------------------------------------------------


def exercise(state: SessionStore) -> dict[str, Any]:
    """Every public method once, in the order a session uses them; what each answered."""
    seen: dict[str, Any] = {}
    state.set_meta(kind=SessionKind.LITE, status=SessionStatus.PLANNING, budget=None, chord_id="c-1")
    state.set_meta(status=SessionStatus.PARTIAL)
    seen["meta"] = state.meta()
    seen["session_meta"] = state.session_meta()
    seen["first"] = state.remember_once("answer", "one")
    seen["second"] = state.remember_once("answer", "two")
    state.store("analysis", "a1")
    state.store("analysis", "a2")
    seen["stored"] = state.recall("analysis")
    state.forget("analysis")
    seen["forgotten"] = state.recall("analysis")
    state.set_agent("api", state=AgentState.RUNNING, worker="w", error=None)
    state.set_agent("api", state=AgentState.DONE)
    seen["agents"] = state.agents(["api", "never"])
    seen["attempts"] = [state.count_attempt("api"), state.count_attempt("api"), state.count_attempt("db")]
    state.put_section("Tasks - api", "body")
    seen["sections"] = state.sections()
    state.record_usage([{"model": "m", "input": 1}, {"model": "m", "input": 2}])
    state.record_usage([])
    state.save_turn("plan:api", '{"turn": 1}', {"model": "m", "input": 3})
    state.save_turn("plan:db", '{"turn": 2}', None)
    seen["usage"] = state.usage()
    seen["turns"] = [state.turn("plan:api"), state.turn("plan:db"), state.turn("plan:none")]
    state.reset()
    seen["after_reset"] = [state.meta(), state.recall("answer"), state.usage(), state.agent("api")]
    return seen


def test_the_memory_state_answers_every_method_as_the_redis_state_does(redis_url: str) -> None:
    redis_state = SessionState(redis_client(redis_url, 2.0), "S-parity", ttl_s=600)
    redis_state.reset()
    memory = exercise(MemorySessionState("S-parity"))
    assert memory == exercise(redis_state)
    assert memory["meta"] == {"kind": "lite", "status": "partial", "budget": None, "chord_id": "c-1"}
    assert memory["session_meta"] == SessionMeta(kind="lite", status="partial", chord_id="c-1")
    assert memory["first"] == memory["second"] == "one"
    assert memory["agents"] == {"api": {"state": "done", "worker": "w", "error": None}, "never": {}}
    assert memory["attempts"] == [1, 2, 1]


def test_enum_values_are_stored_as_the_plain_strings_they_replace(redis_url: str) -> None:
    client = redis_client(redis_url, 2.0)
    state = SessionState(client, "S-enums", ttl_s=600)
    state.reset()
    state.set_meta(kind=SessionKind.COLLAB, status=SessionStatus.PLANNING)
    state.set_agent("api", state=AgentState.QUEUED)
    assert client.hgetall("wfq:S-enums:meta") == {"kind": '"collab"', "status": '"planning"'}
    assert client.hgetall("wfq:S-enums:agent:api") == {"state": '"queued"'}


def test_a_name_used_as_another_redis_type_fails_as_redis_does() -> None:
    state = MemorySessionState()
    state.put_section("h", "b")
    with pytest.raises(TypeError, match="WRONGTYPE"):
        state.recall(keys.SECTIONS)


def test_no_module_spells_a_redis_key_or_an_agent_state_outside_wfqueue_keys() -> None:
    """Key names and agent states are written once (wfqueue/keys.py): a literal elsewhere drifts."""
    import re

    project = Path(__file__).resolve().parents[2]
    literal = re.compile(r"""\.(recall|remember_once|store|forget|count_attempt|turn)\(f?["']|"wfq:|"""
                         r"""set_agent\([^)]*state=["']""")
    found = [f"{path.relative_to(project)}:{number}: {line.strip()}"
             for folder in ("wfqueue", "beat", "workers") for path in sorted((project / folder).rglob("*.py"))
             if path.name != "keys.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if literal.search(line)]
    assert found == []
