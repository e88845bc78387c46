"""The coordinator of `wfqueue plan`: four phases, each recorded in workflow-session.json.

1 session (here), 2 context (assessment, exploration chord, context package),
3 conflicts (only at medium or high risk; -y takes the recommended strategy),
4 task generation. A phase that fails is marked ``failed``; `wfqueue plan
--session WFS-x` starts again at the first phase not done, so finished phases
are never redone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol

import redis
from celery import Celery, chord
from pydantic import BaseModel, Field

from wfqueue import keys
from wfqueue.errors import BadInputError, BudgetExhaustedError
from wfqueue.keys import AgentState, SessionKind, SessionStatus
from wfqueue.lite.models import Assessment
from wfqueue.metering import budget_meta, check_budget_priced, session_report, usage_line, write_usage_file
from wfqueue.payloads import SessionContext
from wfqueue.providers import check_provider_spec
from wfqueue.runtime import broker_runtime, resumable, wait_for
from wfqueue.settings import Settings
from wfqueue.state import CoordinatorLease, SessionState
from wfqueue.task_names import EXPLORE_ANGLE, LITE_ASSESS, QUEUE_EXPLORE, SESSION_CONFLICTS, SESSION_GENERATE
from wfqueue.usage import Budget, PriceTable
from wfqueue.workflow_session.models import PHASES, ConflictResolution, SessionConflict, WorkflowSession
from wfqueue.workflow_session.render import PlanningNotes
from wfqueue.workflow_session.session import (
    PROCESS_DIR,
    active_root,
    find_session,
    load_session,
    new_session_id,
    now_iso,
    save_session,
)
from wfqueue.workflow_session.session_conflicts import resolve
from wfqueue.workflow_session.steps import RESOLUTION_FILE, apply_resolution, load_context, save_notes
from wfqueue.workflow_session.structure import as_text, structure_input

GateChoice = Literal["verify", "status", "stop"]


class PlanRequest(BaseModel):
    requirement: str | None = None
    repo: Path
    provider: str
    yes: bool = False
    session: str | None = None
    workers: int | None = Field(default=None, ge=1, le=64)
    budget: Budget | None = None  # None: a continued session keeps the budget it had


class WfsResult(BaseModel):
    session_id: str
    session_dir: str
    status: str
    tasks: int
    conflicts: int
    resumed_from: str | None = None
    failed_angles: dict[str, str] = Field(default_factory=dict)
    gate: str | None = None
    usage: str | None = None  # wfqueue.metering.usage_line
    stopped: str | None = None  # the phase a spent budget stopped, and why

    @property
    def exit_code(self) -> int:
        return 1 if self.status in (SessionStatus.PARTIAL, SessionStatus.FAILED) else 0


class WfsUI(Protocol):
    def info(self, message: str) -> None: ...
    def progress(self, agents: dict[str, dict[str, Any]]) -> None: ...
    def done(self) -> None: ...
    def choose_strategy(self, conflict: SessionConflict) -> int: ...
    def gate(self) -> GateChoice: ...


def create_session(repo: Path, requirement: str) -> Path:
    """Phase 1 for a new session: workflow-session.json and the User Intent of planning-notes.md."""
    structured = structure_input(requirement)
    root = active_root(repo)
    existing = {p.name for p in root.iterdir()} if root.is_dir() else set()
    session_id = new_session_id(structured.goal, existing)
    folder = root / session_id
    (folder / PROCESS_DIR).mkdir(parents=True)
    now = now_iso()
    session = WorkflowSession(session_id=session_id, project=repo.name, description=as_text(structured),
                              created_at=now, structured=structured, repo=str(repo))
    session.phases["session"] = "done"
    session.phases_done_at["session"] = now
    save_notes(folder, PlanningNotes(goal=structured.goal, key_constraints=structured.constraints))
    save_session(folder, session)
    return folder


class WfsCoordinator:
    def __init__(self, settings: Settings, ui: WfsUI) -> None:
        self.settings = settings
        self.ui = ui
        self.prices = PriceTable(settings.price_table)

    def run(self, request: PlanRequest) -> WfsResult:
        check_provider_spec(request.provider)
        check_budget_priced(request.budget, request.provider, self.settings)
        if request.session is None and not request.requirement:
            raise BadInputError("nothing to plan", hint='give a requirement, or --session WFS-x to continue one')
        folder = find_session(request.repo, request.session) if request.session else None
        with broker_runtime(self.settings, request.repo, request.workers or 4, self.ui) as runtime:
            if folder is None:
                folder = create_session(request.repo, request.requirement or "")
                fresh = True
            else:
                fresh = False
            return self._phases(runtime.app, runtime.settings, runtime.client, folder, request, fresh)

    def _phases(self, app: Celery, settings: Settings, client: redis.Redis, folder: Path, request: PlanRequest,
                fresh: bool) -> WfsResult:
        session = load_session(folder)
        state = SessionState(client, session.session_id, settings.state_ttl_s)
        with resumable(settings, session.session_id), CoordinatorLease(state, fresh=fresh):
            state.set_meta(kind=SessionKind.WORKFLOW, repo=str(request.repo), session_dir=str(folder),
                           provider=request.provider, status=SessionStatus.PLANNING)
            if request.budget is not None:  # workers read it before every LLM step (wfqueue.metering)
                state.set_meta(budget=budget_meta(request.budget))
            resumed_from = None if fresh else session.next_phase()
            if resumed_from:
                self.ui.info(f"continuing {session.session_id} at phase {resumed_from}")
            else:
                self.ui.info(f"session {session.session_id}")
            common = {"session_id": session.session_id, "repo": str(request.repo), "provider": request.provider}
            failed: dict[str, str] = {}
            conflicts = 0
            stopped: str | None = None
            for phase in PHASES:
                if session.phases.get(phase) in ("done", "skipped"):
                    continue
                session.phases[phase] = "running"
                save_session(folder, session)
                try:
                    if phase == "context":
                        failed = self._context(app, settings, state, folder, session, common)
                    elif phase == "conflicts":
                        conflicts = self._conflicts(app, settings, folder, session, common, request.yes)
                    elif phase == "tasks":
                        wait_for(app.send_task(SESSION_GENERATE, kwargs={**common, "session_dir": str(folder)}),
                                 "task generation", settings)
                except BudgetExhaustedError as exc:
                    # It stops here with no task generated, so failed (partial would claim some of it was
                    # planned); `plan --session` with a larger --budget continues at this phase.
                    session = load_session(folder)
                    session.phases[phase] = "failed"
                    save_session(folder, session)
                    stopped = f"{phase} phase stopped: {exc.message}"
                    break
                except BaseException:
                    session = load_session(folder)
                    session.phases[phase] = "failed"
                    save_session(folder, session)
                    raise
                session = load_session(folder)
                if session.phases.get(phase) == "running":
                    session.phases[phase] = "done"
                session.phases_done_at[phase] = now_iso()
                save_session(folder, session)
            if stopped is not None:
                self.ui.info(stopped)
                report = write_usage_file(state, self.prices, folder)
                state.set_meta(status=SessionStatus.FAILED)
                return WfsResult(session_id=session.session_id, session_dir=str(folder), status=SessionStatus.FAILED,
                                 tasks=0, conflicts=conflicts, resumed_from=resumed_from, failed_angles=failed,
                                 usage=usage_line(report), stopped=stopped)
            session.status = "active"
            session.progress.current_tasks = sorted((p.stem for p in (folder / ".task").glob("IMPL-*.json")),
                                                    key=lambda i: int(i.split("-")[1].split(".")[0]))
            save_session(folder, session)
            state.set_meta(status=SessionStatus.ACTIVE)
            resolution = folder / PROCESS_DIR / RESOLUTION_FILE
            if resolution.is_file():  # also counts conflicts resolved by an earlier, interrupted run
                conflicts = ConflictResolution.model_validate_json(resolution.read_text(encoding="utf-8")).summary[
                    "total_conflicts"]
            return WfsResult(session_id=session.session_id, session_dir=str(folder),
                             status=SessionStatus.PARTIAL if failed else SessionStatus.COMPLETED,
                             tasks=len(session.progress.current_tasks),
                             conflicts=conflicts, resumed_from=resumed_from, failed_angles=failed,
                             usage=usage_line(session_report(state, self.prices)))

    def _context(self, app: Celery, settings: Settings, state: SessionState, folder: Path, session: WorkflowSession,
                 common: dict[str, Any]) -> dict[str, str]:
        assessed = wait_for(app.send_task(LITE_ASSESS, kwargs={**common, "requirement": session.description,
                                                               "force_explore": True}), "the assessment", settings)
        assessment = Assessment.model_validate(assessed)
        self.ui.info(f"complexity {assessment.complexity}; exploring {', '.join(assessment.angles)} in parallel")
        for angle in assessment.angles:
            if state.recall(keys.exploration_key(angle)) is None:
                state.set_agent(angle, state=AgentState.QUEUED)
        header = [app.signature(EXPLORE_ANGLE, queue=QUEUE_EXPLORE,
                                kwargs={**common, "requirement": session.description,
                                        "output_dir": str(folder / PROCESS_DIR), "angle": angle})
                  for angle in assessment.angles]
        body = SessionContext(session_id=session.session_id, session_dir=str(folder),
                              repo=common["repo"]).signature(app)
        try:
            outcome = wait_for(chord(header)(body), "context gathering", settings,
                               tick=lambda: self.ui.progress(state.agents(assessment.angles)))
        finally:
            self.ui.done()
        failed = {a: str(state.agent(a).get("error")) for a in assessment.angles
                  if state.recall(keys.exploration_key(a)) is None}
        self.ui.info(f"conflict risk: {outcome['risk_level']}")
        if outcome["risk_level"] not in ("medium", "high"):
            latest = load_session(folder)
            latest.phases["conflicts"] = "skipped"
            save_session(folder, latest)
        return failed

    def _conflicts(self, app: Celery, settings: Settings, folder: Path, session: WorkflowSession,
                   common: dict[str, Any], yes: bool) -> int:
        found = wait_for(app.send_task(SESSION_CONFLICTS, kwargs={**common, "session_dir": str(folder)}),
                         "conflict detection", settings)
        conflicts = [SessionConflict.model_validate(c) for c in found]
        choices = {c.id: (c.recommended if yes else self.ui.choose_strategy(c)) for c in conflicts}
        resolution = resolve(session.session_id, now_iso(), conflicts, choices)
        apply_resolution(folder, conflicts, resolution)
        risk = load_context(folder).conflict_detection.risk_level
        self.ui.info(f"{len(conflicts)} conflict(s) resolved; risk is now {risk}")
        return len(conflicts)
