"""The coordinator of `wfqueue plan`: four phases, each recorded in workflow-session.json.

1 session (here), 2 context (assessment, exploration chord, context package),
3 conflicts (only at medium or high risk; -y takes the recommended strategy),
4 task generation. A phase that fails is marked ``failed``; `wfqueue plan
--session WFS-x` starts again at the first phase not done, so finished phases
are never redone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from celery import Celery
from pydantic import BaseModel, Field

from wfqueue import keys
from wfqueue.errors import BadInputError, BudgetExhaustedError, ProviderError
from wfqueue.fanout import fan_out
from wfqueue.keys import AgentState, SessionKind, SessionMeta, SessionStatus
from wfqueue.lite.models import Assessment
from wfqueue.metering import (
    budget_hint,
    budget_meta,
    check_budget_priced,
    says_budget_spent,
    usage_line,
    write_usage_file,
)
from wfqueue.payloads import ExploreAngle, LiteAssess, SessionConflicts, SessionContext, SessionGenerate
from wfqueue.runtime import Runtime, resume_command
from wfqueue.session_check import check_session_files
from wfqueue.session_summary import workflow_status
from wfqueue.sessions import SessionIds
from wfqueue.settings import MAX_EXPLORE_WORKERS, Settings
from wfqueue.state import SessionState, SessionStore
from wfqueue.transport.models import Transport
from wfqueue.usage import Budget
from wfqueue.workflow.base import WorkflowCoordinator, check_credentials, new_session_folder, stop_hint
from wfqueue.workflow.contract import PlanOutcome, ResumeRequest, WorkflowUI
from wfqueue.workflow.kind import WorkflowKind
from wfqueue.workflow_session.failed_angles import AGAIN, plan_again, why_not_planned_again
from wfqueue.workflow_session.models import GATES_READY, PHASES, ConflictResolution, SessionConflict, WorkflowSession
from wfqueue.workflow_session.render import PlanningNotes
from wfqueue.workflow_session.replan.backup import refuse_half_written
from wfqueue.workflow_session.session import (
    PLAN_FILE,
    PROCESS_DIR,
    SESSION_FILE,
    TASK_DIR,
    active_root,
    check_layout,
    find_session,
    load_session,
    now_iso,
    read_session,
    recorded_failed_angles,
    save_session,
    task_files,
)
from wfqueue.workflow_session.session_conflicts import resolve
from wfqueue.workflow_session.steps import (
    RESOLUTION_FILE,
    apply_resolution,
    load_context,
    recall_context,
    save_notes,
)
from wfqueue.workflow_session.structure import as_text, structure_input

WFS_IDS = SessionIds(prefix="WFS-", slug_length=50, dated=False)  # WFS-{slug}
GateChoice = Literal["verify", "status", "stop"]


class PlanRequest(BaseModel):
    requirement: str | None = None
    repo: Path
    provider: str
    yes: bool = False
    session: str | None = None
    workers: int | None = Field(default=None, ge=1, le=MAX_EXPLORE_WORKERS)
    budget: Budget | None = None  # None: a continued session keeps the budget it had
    keep_provider: bool = False  # resume: the provider the session recorded wins over ``provider``


class WfsResult(PlanOutcome):
    JSON_FIELDS = PlanOutcome.JSON_FIELDS | {"failed_angles", "gate"}

    def failure_reasons(self) -> list[str]:
        return [*super().failure_reasons(), *self.failed_angles.values()]

    resumed_from: str | None = None
    failed_angles: dict[str, str] = Field(default_factory=dict)
    kept_partial: str | None = None  # why a resume did not plan it again with its failed angles
    gate: str | None = None

    @property
    def exit_code(self) -> int:
        """As the plan ended, and 1 when its verification asks for fixes first: `plan -y && wfqueue execute`
        must not go on with a plan `wfqueue verify` would exit 1 for."""
        return max(super().exit_code, 0 if self.gate is None or self.gate in GATES_READY else 1)


class WfsUI(WorkflowUI, Protocol):
    def choose_strategy(self, conflict: SessionConflict) -> int: ...
    def gate(self) -> GateChoice: ...


def create_session(repo: Path, requirement: str, taken: set[str] | None = None) -> Path:
    """Phase 1 for a new session: workflow-session.json and the User Intent of planning-notes.md; ``taken``:
    ids in use on the broker besides the folders here."""
    structured = structure_input(requirement)
    folder = new_session_folder(active_root(repo), WFS_IDS, structured.goal, taken)
    (folder / PROCESS_DIR).mkdir()
    now = now_iso()
    session = WorkflowSession(session_id=folder.name, project=repo.name, description=as_text(structured),
                              created_at=now, structured=structured, repo=str(repo))
    session.phases["session"] = "done"
    session.phases_done_at["session"] = now
    save_notes(folder, PlanningNotes(goal=structured.goal, key_constraints=structured.constraints))
    save_session(folder, session)
    return folder


class _Phase(BaseModel):
    """What the session's phase tasks are sent."""

    session_id: str
    session_dir: Path
    repo: Path
    provider: str
    transport: Transport | None

    def fields(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class WfsCoordinator(WorkflowCoordinator[WfsUI]):
    def run(self, request: PlanRequest) -> WfsResult:
        # A continued session keeps the provider it recorded (checked below), whatever the default is now.
        self.check(request.provider, request.budget, request.repo,
                   credentials=not (request.keep_provider and request.session))
        if request.session is None and not request.requirement:
            raise BadInputError("nothing to plan", hint='give a requirement, or --session WFS-x to continue one')
        folder = find_session(request.repo, request.session) if request.session else None
        if folder is not None:
            recorded = read_session(folder)  # a damaged record is refused before Redis and workers start
            check_session_files(folder)
            check_layout(folder)
            if recorded.phases.get("tasks") == "done" and task_files(folder) and not (folder / PLAN_FILE).is_file():
                # Generating the tasks again would replace the task files, and every replan or edit in them.
                raise BadInputError(
                    f"{folder.name} has its task files but no {PLAN_FILE}: planning its tasks again would replace "
                    "them, and the replans and edits in them; nothing was changed",
                    hint=f"put {PLAN_FILE} back (a replan's backup under {PROCESS_DIR}/backup/ holds one: "
                         f"`wfqueue replan --restore BACKUP`), or move {TASK_DIR}/ out of the session to plan its "
                         "tasks again")
            if request.keep_provider:  # the provider that will finish it
                check_credentials(self.settings, recorded.provider or request.provider, request.repo)
            if request.requirement and as_text(structure_input(request.requirement)) != recorded.description:
                raise BadInputError(
                    f"--session {folder.name} continues that session's plan of its own requirement; the text given "
                    "here would be ignored",
                    hint="leave the text out to continue it, leave --session out to plan the text in a new session, "
                         f"or change the session's plan with `wfqueue replan --session {folder.name} \"...\"`")
        with self.runtime(request.repo, request.workers) as runtime:
            fresh = folder is None
            if folder is None:
                folder = self.free_folder(lambda taken: create_session(request.repo, request.requirement or "", taken))
            return self._phases(runtime, folder, request, fresh)

    def resume(self, request: ResumeRequest) -> WfsResult:
        """Continue at the first phase not done, with the recommended choices. A session whose replan or restore
        stopped half-way is refused: its phases are done, its files are neither plan (it said completed)."""
        refuse_half_written(request.session_dir, "resume it", lock_timeout_s=self.settings.lock_timeout_s)
        return self.run(PlanRequest(repo=request.repo, provider=request.provider, yes=True,
                                    session=request.session_dir.name, budget=request.budget,
                                    keep_provider=not request.provider_chosen))

    def _phases(self, runtime: Runtime, folder: Path, request: PlanRequest, fresh: bool) -> WfsResult:
        app, settings = runtime.app, runtime.settings
        session = read_session(folder)
        provider = request.provider
        if request.keep_provider and not fresh:  # a session planned offline is not finished by a paid model
            recorded = (session.provider or
                        SessionState(runtime.client, session.session_id, settings.state_ttl_s).meta().get("provider"))
            provider = str(recorded or provider)
            if request.budget is not None:
                check_budget_priced(request.budget, provider, self.settings)
        session.provider = provider  # saved with the first phase's state, under the session's lease
        meta = SessionMeta(kind=SessionKind.WORKFLOW, repo=str(request.repo), session_dir=str(folder),
                           provider=provider, status=SessionStatus.PLANNING,
                           # workers read it before every LLM step (wfqueue.metering); None keeps the one set
                           **({"budget": budget_meta(request.budget)} if request.budget is not None else {}))
        with self.hold(runtime, session.session_id, fresh=fresh, meta=meta) as state:
            if session.phases.get("tasks") == "done" and not task_files(folder):
                # Its task files were removed since: generated again, not reported as done (task files without
                # plan.json were refused before anything started: generating them again would replace them).
                self.ui.info(f"{session.session_id} has lost its task files: generating its tasks again")
                session.phases["tasks"] = "pending"
            kept_partial = None if fresh else self._failed_angles_again(state, folder, session)
            if (session.phases.get("context") == "done" and session.phases.get("tasks") not in ("done", "skipped")
                    and state.recall(keys.ASSESSMENT) is None):
                # Task generation reads the context from Redis, which keeps it WFQUEUE_STATE_TTL_S: a session
                # finished a week later (or whose Redis data was removed) has it put back from its files, or
                # gathers it again when they do not hold it.
                if recall_context(state, folder):
                    self.ui.info(f"the context {session.session_id} gathered is no longer in Redis: put back "
                                 f"from {PROCESS_DIR}/")
                else:
                    self.ui.info(f"the context {session.session_id} gathered is no longer in Redis: gathering it "
                                 "again")
                    session.phases["context"] = "pending"
            resumed_from = None if fresh else session.next_phase()
            if resumed_from:
                self.ui.info(f"continuing {session.session_id} at phase {resumed_from}")
            else:
                self.ui.info(f"session {session.session_id}")
            common = _Phase(session_id=session.session_id, session_dir=folder, repo=request.repo,
                            provider=provider, transport=self.transport)
            failed: dict[str, str] = {}
            conflicts = 0
            stopped: str | None = None
            hint: str | None = None
            for phase in PHASES:
                if session.phases.get(phase) in ("done", "skipped"):
                    continue
                session.phases[phase] = "running"
                save_session(folder, session)
                try:
                    if phase == "context":
                        failed = self._context(app, settings, state, folder, session, common)
                    elif phase == "conflicts":
                        conflicts = self._conflicts(app, settings, state, folder, session, common, request.yes)
                    elif phase == "tasks":
                        self.wait(SessionGenerate(**common.fields()).send(app), "task generation", settings,
                                  state)
                except ProviderError as exc:
                    # A spent budget, or the model's failure (a refusal, answers that never validate, an API that
                    # kept failing): it stops here with no task generated, so failed (partial would claim some of it
                    # was planned); the phases done so far are kept, and a resume (with a larger --budget) goes on
                    # at this phase. The file says failed too: `status` reads it there, and a session left
                    # "planning" reads as interrupted.
                    session = load_session(folder)
                    session.phases[phase] = "failed"
                    if session.status == "planning":  # a completed or paused session keeps its status
                        session.status = "failed"
                    save_session(folder, session)
                    stopped = f"{phase} phase stopped: {exc.message}"
                    hint = stop_hint(exc, f"{resume_command(session.session_id, request.repo)} goes on at the "
                                          f"{phase} phase")
                    break
                except (KeyboardInterrupt, EOFError):
                    # Stopped (Ctrl-C, SIGTERM, SIGHUP, no answer), not failed: the phase stays running in the file,
                    # which `status` shows as interrupted, and the resume runs it again.
                    raise
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
                                 usage=usage_line(report), stopped=stopped, stop_hint=hint)
            if not failed and session.phases.get("context") == "done":
                failed = recorded_failed_angles(folder)  # explored by an earlier run: the plan is still partial
            if session.status in ("planning", "failed"):  # a completed (executed) or paused one keeps its status
                session.status = "active"
            session.progress.current_tasks = [p.stem for p in task_files(folder)]
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
                             kept_partial=kept_partial if failed else None, usage=self.usage(state))

    def _failed_angles_again(self, state: SessionState, folder: Path, session: WorkflowSession) -> str | None:
        """A session partial for angles that failed is planned again from its context phase, where nobody
        changed its tasks since (wfqueue.workflow_session.failed_angles); else why it is kept as it is."""
        if (any(session.phases.get(phase) not in ("done", "skipped") for phase in AGAIN)
                or not recorded_failed_angles(folder)):
            return None
        why_not = why_not_planned_again(folder, session)
        if why_not is not None:
            return why_not
        angles = plan_again(state, folder, session)
        save_session(folder, session)
        self.ui.info(f"exploring {', '.join(angles)} again (failed when {session.session_id} was planned); its "
                     "context, conflicts and tasks are made again with the findings")
        return None

    def _context(self, app: Celery, settings: Settings, state: SessionState, folder: Path, session: WorkflowSession,
                 common: _Phase) -> dict[str, str]:
        assess = LiteAssess(session_id=common.session_id, session_dir=str(folder), repo=str(common.repo),
                            requirement=session.description, force_explore=True, provider=common.provider,
                            transport=common.transport)
        assessment = Assessment.model_validate(self.wait(assess.send(app), "the assessment", settings, state))
        self.ui.info(f"complexity {assessment.complexity}; exploring {', '.join(assessment.angles)} in parallel")
        for angle in assessment.angles:
            if state.recall(keys.exploration_key(angle)) is None:
                state.set_agent(angle, state=AgentState.QUEUED)
        header = [ExploreAngle(session_id=common.session_id, session_dir=str(folder),
                               output_dir=str(folder / PROCESS_DIR), repo=str(common.repo),
                               requirement=session.description, angle=angle, provider=common.provider,
                               transport=common.transport) for angle in assessment.angles]
        callback = SessionContext(session_id=common.session_id, session_dir=str(folder), repo=str(common.repo),
                                  transport=common.transport)
        outcome = self.wait_with_progress(fan_out(app, state, header, callback), "context gathering", settings, state,
                                          assessment.angles)
        failed = {a: str(state.agent(a).get("error")) for a in assessment.angles
                  if state.recall(keys.exploration_key(a)) is None}
        spent = next((reason for reason in failed.values() if says_budget_spent(reason)), None)
        if spent is not None:
            # The phase stops unfinished, not done without those angles: a resume with a larger budget explores
            # them (the others' explorations are kept and not paid again).
            raise BudgetExhaustedError(spent, hint=budget_hint(common.session_id))
        self.ui.info(f"conflict risk: {outcome['risk_level']}")
        if outcome["risk_level"] not in ("medium", "high"):
            latest = load_session(folder)
            latest.phases["conflicts"] = "skipped"
            save_session(folder, latest)
        return failed

    def _conflicts(self, app: Celery, settings: Settings, state: SessionState, folder: Path,
                   session: WorkflowSession, common: _Phase, yes: bool) -> int:
        found = self.wait(SessionConflicts(**common.fields()).send(app), "conflict detection", settings, state)
        conflicts = [SessionConflict.model_validate(c) for c in found]
        choices = choose_strategies(state, conflicts, None if yes else self.ui.choose_strategy, self.ui.info)
        resolution = resolve(session.session_id, now_iso(), conflicts, choices)
        apply_resolution(folder, conflicts, resolution)
        risk = load_context(folder).conflict_detection.risk_level
        self.ui.info(f"{len(conflicts)} conflict(s) resolved; risk is now {risk}")
        return len(conflicts)


def choose_strategies(state: SessionStore, conflicts: list[SessionConflict],
                      ask: Callable[[SessionConflict], int] | None, info: Callable[[str], None]) -> dict[str, int]:
    """The strategy of each conflict: the one chosen for it before (a run stopped at a later conflict), else
    ``ask``'s answer, kept at once, else (no one to ask: -y, a resume) the recommended one."""
    choices: dict[str, int] = {}
    for conflict in conflicts:
        kept = state.recall(keys.strategy_key(conflict.id))
        if kept is not None and kept.isdigit() and int(kept) < len(conflict.strategies):
            info(f"{conflict.id}: {conflict.strategies[int(kept)].name}, as chosen before")
            choices[conflict.id] = int(kept)
            continue
        choices[conflict.id] = conflict.recommended if ask is None else ask(conflict)
        if ask is not None:
            state.store(keys.strategy_key(conflict.id), str(choices[conflict.id]))
    return choices


def missing_work(state: SessionStore, folder: Path) -> list[str]:
    """The phases not done (or skipped), from workflow-session.json."""
    del state  # the session file is the record of its phases
    session = load_session(folder)
    return [phase for phase in PHASES if session.phases.get(phase) not in ("done", "skipped")]


def _resume(settings: Settings, ui: WfsUI, request: ResumeRequest) -> PlanOutcome:
    return WfsCoordinator(settings, ui).resume(request)


# Workflow sessions wait on their coordinator (a person may be choosing a strategy): the watchdog only reports.
WORKFLOW = WorkflowKind(name=SessionKind.WORKFLOW, label="workflow", ids=WFS_IDS, root=active_root,
                        marker=SESSION_FILE, read_status=workflow_status, resume=_resume, missing_work=missing_work)
