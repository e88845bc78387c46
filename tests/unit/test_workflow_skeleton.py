"""The workflow skeleton and registry: session ids per kind, finding a session of any kind, the one
outcome model, what each kind reports as missing, which kinds the watchdog may recover, and the
wait that always closes the progress view."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.wfs_factory import make_session
from wfqueue import keys
from wfqueue.collab.coordinator import COLLAB, COLLAB_IDS, PlanResult
from wfqueue.errors import InfrastructureError, InvalidSessionIdError, ProviderError, SessionNotFoundError
from wfqueue.keys import SessionKind
from wfqueue.lite.coordinator import LITE, LITE_IDS, LiteResult
from wfqueue.lite.models import Assessment
from wfqueue.memory_state import MemorySessionState
from wfqueue.settings import load_settings
from wfqueue.workflow.base import WorkflowCoordinator
from wfqueue.workflow.registry import KINDS, kind_named, locate
from wfqueue.workflow_session.coordinator import WFS_IDS, WORKFLOW, WfsResult
from wfqueue.workflow_session.session import find_session

LATE_UTC = datetime(2026, 11, 22, 20, 30, tzinfo=UTC)  # already the 23rd in UTC+8


def test_each_kind_keeps_its_session_id_format() -> None:
    assert COLLAB_IDS.new("Add OAuth login", LATE_UTC, set()) == "CPLAN-add-oauth-login-2026-11-23"
    assert LITE_IDS.new("Add OAuth login", LATE_UTC, set()) == "add-oauth-login-2026-11-23"
    assert WFS_IDS.new("Add OAuth login", LATE_UTC, set()) == "WFS-add-oauth-login"
    assert WFS_IDS.new("Add OAuth login", LATE_UTC, {"WFS-add-oauth-login"}) == "WFS-add-oauth-login-2"
    assert len(LITE_IDS.new("a" * 100, LATE_UTC, set())) == 40 + len("-2026-11-23")
    assert len(WFS_IDS.new("b" * 100, LATE_UTC, set())) == len("WFS-") + 50


def test_a_session_id_is_found_under_its_kinds_folder(tmp_path: Path) -> None:
    collab = COLLAB.root(tmp_path) / "CPLAN-x-2026-11-23"
    lite = LITE.root(tmp_path) / "x-2026-11-23"
    for folder in (collab, lite):
        folder.mkdir(parents=True)
    make_session(tmp_path, "Add OAuth login", [], session_id="WFS-x")
    assert locate(tmp_path, collab.name) == (COLLAB, collab)
    assert locate(tmp_path, lite.name) == (LITE, lite)
    assert locate(tmp_path, "WFS-x") == (WORKFLOW, WORKFLOW.root(tmp_path) / "WFS-x")
    with pytest.raises(SessionNotFoundError) as info:
        locate(tmp_path, "WFS-nope")
    assert "CPLAN-x-2026-11-23" in info.value.hint and "WFS-x" in info.value.hint
    with pytest.raises(InvalidSessionIdError):
        locate(tmp_path, "../CPLAN-x-2026-11-23")


def test_the_registry_names_every_kind_once() -> None:
    assert [k.name for k in KINDS] == [SessionKind.COLLAB, SessionKind.LITE, SessionKind.WORKFLOW,
                                       SessionKind.EXECUTE]
    assert kind_named("lite") is LITE and kind_named("nonsense") is None and kind_named(None) is None


def test_only_collab_plans_are_recovered_by_the_watchdog() -> None:
    # Lite and workflow coordinators may be waiting on a person; the watchdog only reports them.
    assert COLLAB.recovery is not None
    assert LITE.recovery is None and WORKFLOW.recovery is None


def test_every_outcome_shares_exit_codes_and_the_json_fields() -> None:
    common: dict[str, Any] = {"session_id": "s", "session_dir": "/s", "tasks": 3, "conflicts": 1}
    outcomes = [PlanResult(status="partial", failures={"api": "timed out"}, **common),
                LiteResult(status="completed", complexity="Low", angles=[], **common),
                WfsResult(status="failed", **common)]
    assert [o.exit_code for o in outcomes] == [1, 0, 1]
    assert list(json.loads(outcomes[0].json_line())) == [
        "session_id", "session_dir", "status", "tasks", "conflicts", "failures"]
    # Each kind's own fields, whichever command prints its outcome (`plan`, `lite-plan` or `resume`): `plan --json`
    # left out the verification's gate, and every lite or workflow outcome its skipped angles.
    assert json.loads(outcomes[1].json_line()) == {**common, "status": "completed", "complexity": "Low",
                                                   "angles": [], "failed_angles": {}}
    assert json.loads(outcomes[2].json_line()) == {**common, "status": "failed", "failed_angles": {}, "gate": None}


def test_lite_missing_work_follows_what_redis_holds(tmp_path: Path) -> None:
    state = MemorySessionState("add-oauth-2026-11-23")
    assert LITE.missing_work(state, tmp_path) == ["assessment", "planning"]
    assessment = Assessment(complexity="Medium", scope="s", depth="d", risk="r", dependencies="d", preset="p",
                            angles=["architecture", "security"], needs_exploration=True)
    state.store(keys.ASSESSMENT, assessment.model_dump_json())
    state.store(keys.exploration_key("architecture"), "{}")
    assert LITE.missing_work(state, tmp_path) == ["security", "planning"]


def test_workflow_missing_work_is_the_phases_not_done(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Add OAuth login", [])
    assert WORKFLOW.missing_work(MemorySessionState(), folder) == []
    session = json.loads((folder / "workflow-session.json").read_text())
    session["phases"]["tasks"] = "failed"
    (folder / "workflow-session.json").write_text(json.dumps(session))
    assert WORKFLOW.missing_work(MemorySessionState(), folder) == ["tasks"]


def test_collab_missing_work_without_a_split_is_the_understanding(tmp_path: Path) -> None:
    assert COLLAB.missing_work(MemorySessionState(), tmp_path) == ["understanding"]


class _Result:
    def __init__(self, polls: int, error: BaseException | None = None) -> None:
        self.polls, self.error = polls, error

    def ready(self) -> bool:
        self.polls -= 1
        return self.polls <= 0

    def failed(self) -> bool:
        return self.error is not None

    @property
    def result(self) -> Any:
        return self.error or {"status": "completed"}


class _UI:
    def __init__(self) -> None:
        self.seen: list[dict[str, dict[str, Any]]] = []
        self.closed = 0
        self.notes: list[tuple[str, str]] = []

    def info(self, message: str) -> None:
        pass

    def progress(self, agents: dict[str, dict[str, Any]]) -> None:
        self.seen.append(agents)

    def note(self, what: str, text: str) -> None:
        self.notes.append((what, text))

    def done(self) -> None:
        self.closed += 1


def test_the_wait_draws_agent_progress_and_always_closes_the_view() -> None:
    settings = load_settings(poll_interval_s=0.001)
    state = MemorySessionState()
    state.set_meta(status="planning")  # as a held session's is
    state.set_agent("api", state="running")
    ui = _UI()
    coordinator = WorkflowCoordinator(settings, ui)
    assert coordinator.wait_with_progress(_Result(3), "the plan", settings, state,  # type: ignore[arg-type]
                                          ["api"]) == {"status": "completed"}
    assert ui.seen and ui.seen[-1]["api"]["state"] == "running" and ui.closed == 1
    with pytest.raises(ProviderError, match="the plan failed"):
        coordinator.wait_with_progress(_Result(1, RuntimeError("boom")), "the plan", settings, state,  # type: ignore[arg-type]
                                       ["api"])
    assert ui.closed == 2


class _NotedResult(_Result):
    """A step whose worker says, while it runs, that it waits to send a call again; then it is done."""

    def __init__(self, state: MemorySessionState) -> None:
        super().__init__(6)
        self.state = state

    def ready(self) -> bool:
        if self.polls == 5:
            self.state.store(keys.STEP_NOTE, "the Anthropic API answered 529: overloaded; sending again in 4s")
        if self.polls == 2:
            self.state.forget(keys.STEP_NOTE)
        return super().ready()


def test_the_wait_for_one_step_shows_what_its_worker_says_it_waits_for_once() -> None:
    settings = load_settings(poll_interval_s=0.001)
    state = MemorySessionState()
    state.set_meta(status="planning")
    ui = _UI()
    coordinator = WorkflowCoordinator(settings, ui)
    assert coordinator.wait(_NotedResult(state), "the assessment", settings, state) == {  # type: ignore[arg-type]
        "status": "completed"}
    assert ui.notes == [("the assessment", "the Anthropic API answered 529: overloaded; sending again in 4s")]


class _Forgotten(_Result):
    """A step during which the broker lost the session (a Redis back without its data): never ready."""

    def __init__(self, state: MemorySessionState) -> None:
        super().__init__(10**9)
        self.state, self.asked = state, 0

    def ready(self) -> bool:
        self.asked += 1
        if self.asked == 3:
            self.state.reset()
        return super().ready()


def test_a_wait_ends_at_once_when_the_broker_lost_the_session() -> None:
    """The results went with it: the wait lasted WFQUEUE_PLAN_TIMEOUT_S (an hour), saying nothing."""
    settings = load_settings(poll_interval_s=0.001)
    coordinator = WorkflowCoordinator(settings, _UI())
    for wait in (lambda state: coordinator.wait(_Forgotten(state), "the assessment", settings, state),
                 lambda state: coordinator.wait_with_progress(_Forgotten(state), "the plan", settings, state, ["a"])):
        state = MemorySessionState()
        state.set_meta(status="planning")
        with pytest.raises(InfrastructureError, match=f"the broker lost {state.session_id}'s state while") as lost:
            wait(state)
        assert f"wfqueue resume {state.session_id}" in lost.value.hint


def test_a_folder_that_lost_its_session_record_is_named_as_such_and_never_listed_as_a_session(tmp_path: Path) -> None:
    """`status WFS-x` of a folder whose workflow-session.json was gone answered "no session WFS-x ... existing
    sessions: WFS-x"."""
    make_session(tmp_path, "Add rate limiting", [], session_id="WFS-kept")
    (make_session(tmp_path, "Add caching", [], session_id="WFS-lost") / "workflow-session.json").unlink()
    with pytest.raises(SessionNotFoundError) as lost:
        locate(tmp_path, "WFS-lost")
    assert "holds no workflow-session.json" in lost.value.message, lost.value
    with pytest.raises(SessionNotFoundError) as unknown:
        locate(tmp_path, "WFS-nope")
    assert "WFS-kept" in str(unknown.value.hint) and "WFS-lost" not in str(unknown.value.hint)
    # verify and replan find workflow sessions their own way: they said "not found ... available: WFS-kept".
    with pytest.raises(SessionNotFoundError) as by_verify:
        find_session(tmp_path, "WFS-lost")
    assert by_verify.value.message == lost.value.message


def test_a_stop_before_the_session_is_held_leaves_no_folder_that_could_never_be_resumed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM a second into a plan left an empty session folder that Redis knew nothing of: `status` called it
    interrupted and named a resume, which refused it ("Redis does not know its requirement")."""
    from types import SimpleNamespace

    class StoppedWhileClaiming:
        def __enter__(self) -> None:
            raise KeyboardInterrupt

        def __exit__(self, *_: object) -> None: ...

    coordinator = WorkflowCoordinator(load_settings(), object())  # type: ignore[type-var]
    monkeypatch.setattr(coordinator, "hold", lambda *_, **__: StoppedWhileClaiming())
    request = SimpleNamespace(requirement="Add OAuth login", repo=tmp_path, provider="offline", budget=None)
    root = COLLAB.root(tmp_path)
    with pytest.raises(KeyboardInterrupt), coordinator.fresh_session(object(), request, SessionKind.COLLAB,  # type: ignore[arg-type]
                                                                    root, COLLAB_IDS):
        pass
    assert root.is_dir() and list(root.iterdir()) == []


def test_an_outcome_whose_budget_stopped_any_part_says_so() -> None:
    """No plan command said how to go on once its budget was spent: a resume without a larger --budget stopped at
    the same cap. The command now prints the resume with --budget LARGER when this holds."""
    common: dict[str, Any] = {"session_id": "s", "session_dir": "/s", "tasks": 0, "conflicts": 0}
    spent = "budget exhausted: 4,271 tokens of 4,000 tokens"
    assert PlanResult(status="failed", failures={"api": f"plan_area:api: {spent}"}, **common).budget_spent()
    assert LiteResult(status="failed", complexity="Low", angles=[], stopped=f"planning stopped: {spent}",
                      **common).budget_spent()
    assert WfsResult(status="partial", failed_angles={"security": spent}, **common).budget_spent()
    assert not WfsResult(status="partial", failed_angles={"security": "the API answered 529"}, **common).budget_spent()
    assert not PlanResult(status="completed", **common).budget_spent()


def test_a_wait_whose_meta_expired_but_whose_claim_lives_goes_on() -> None:
    """The meta's TTL ran from its last write: a long execution outlived it, and was taken for lost."""
    settings = load_settings(poll_interval_s=0.001)
    state = MemorySessionState()
    state.store(keys.COORDINATOR, "this-host:1:abc")  # the command's own claim, refreshed while it runs
    assert WorkflowCoordinator(settings, _UI()).wait(_Result(3), "the gate", settings, state) == {
        "status": "completed"}
