"""The coordinator of a lite plan: assess, explore angles in parallel, clarify, plan, confirm.

Exploration is a chord: one task per angle on the ``explore`` queue, the
synthesis as its callback. The user's side (showing the assessment, asking
clarification questions, confirming or editing the plan) goes through a small
UI protocol; ``-y`` answers every question with the safe default.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import redis
from celery import Celery, chord
from pydantic import BaseModel, Field

from wfqueue import keys
from wfqueue.collab.steps import now_iso
from wfqueue.errors import BadInputError, BudgetExhaustedError
from wfqueue.fsio import atomic_write_text
from wfqueue.keys import AgentState, SessionKind, SessionStatus
from wfqueue.lite.models import Assessment, ClarificationAnswer, LitePlanDraft
from wfqueue.lite.render import render_stopped_plan
from wfqueue.lite.steps import PLAN_FILE, TASKS_FILE, write_plan_md
from wfqueue.lite.synthesis import MergedQuestion, rounds
from wfqueue.metering import budget_meta, check_budget_priced, session_report, usage_line, write_usage_file
from wfqueue.payloads import LiteSynthesize
from wfqueue.providers import check_provider_spec
from wfqueue.runtime import broker_runtime, resumable, wait_for
from wfqueue.sessions import WORKFLOW_DIR, session_date, slugify, unique_id
from wfqueue.settings import Settings
from wfqueue.state import CoordinatorLease, SessionState
from wfqueue.task_names import EXPLORE_ANGLE, LITE_ASSESS, LITE_PLAN, QUEUE_EXPLORE
from wfqueue.tasks_file import validate_path
from wfqueue.usage import Budget, PriceTable

LITE_DIR = ".lite-plan"
MODIFY_ROUNDS = 3
PlanDecision = Literal["allow", "modify", "cancel"]


class LiteRequest(BaseModel):
    requirement: str = Field(min_length=1)
    repo: Path
    provider: str
    explore: bool = False
    yes: bool = False
    workers: int | None = Field(default=None, ge=1, le=64)
    budget: Budget | None = None


class LiteResult(BaseModel):
    session_id: str
    session_dir: str
    status: str
    tasks: int
    conflicts: int
    complexity: str
    angles: list[str]
    failed_angles: dict[str, str] = Field(default_factory=dict)
    usage: str | None = None  # wfqueue.metering.usage_line
    stopped: str | None = None  # why planning did not run (a spent budget)

    @property
    def exit_code(self) -> int:
        return 1 if self.status in (SessionStatus.PARTIAL, SessionStatus.FAILED) else 0


class LiteUI(Protocol):
    def info(self, message: str) -> None: ...
    def show_assessment(self, assessment: Assessment) -> None: ...
    def progress(self, agents: dict[str, dict[str, Any]]) -> None: ...
    def done(self) -> None: ...
    def ask(self, batch: list[MergedQuestion], number: int, total: int) -> list[str]:
        """Answers to one round of at most four questions ('' for no answer)."""
        ...
    def confirm_plan(self, tasks_path: Path, draft: LitePlanDraft) -> PlanDecision: ...
    def edit_tasks(self, tasks_path: Path, problems: list[str]) -> None:
        """Let the user edit tasks.jsonl (``problems`` from a previous try); return when done."""
        ...


def new_lite_session_id(requirement: str, now: datetime, existing: set[str]) -> str:
    """``{slug}-{date}`` (slug at most 40 characters), unique among ``existing``."""
    return unique_id(f"{slugify(requirement, 40)}-{session_date(now)}", existing)


def shared_files(draft: LitePlanDraft) -> int:
    """Files that more than one task touches: where parallel execution could collide."""
    owners: dict[str, set[str]] = {}
    for task in draft.tasks:
        for file in task.files:
            owners.setdefault(file.path, set()).add(task.id)
    return sum(1 for ids in owners.values() if len(ids) > 1)


class LiteCoordinator:
    def __init__(self, settings: Settings, ui: LiteUI) -> None:
        self.settings = settings
        self.ui = ui
        self.prices = PriceTable(settings.price_table)

    def run(self, request: LiteRequest) -> LiteResult:
        check_provider_spec(request.provider)
        check_budget_priced(request.budget, request.provider, self.settings)
        if not request.repo.is_dir():
            raise BadInputError(f"--repo {request.repo} is not a directory")
        with broker_runtime(self.settings, request.repo, request.workers or 4, self.ui) as runtime:
            return self._plan(runtime.app, runtime.settings, runtime.client, request)

    def _plan(self, app: Celery, settings: Settings, client: redis.Redis, request: LiteRequest) -> LiteResult:
        root = request.repo / WORKFLOW_DIR / LITE_DIR
        existing = {p.name for p in root.iterdir()} if root.is_dir() else set()
        session_id = new_lite_session_id(request.requirement, datetime.now(UTC), existing)
        session_dir = root / session_id
        session_dir.mkdir(parents=True)
        state = SessionState(client, session_id, settings.state_ttl_s)
        with resumable(settings, session_id), CoordinatorLease(state, fresh=True):
            state.set_meta(kind=SessionKind.LITE, repo=str(request.repo), session_dir=str(session_dir),
                           requirement=request.requirement, provider=request.provider, status=SessionStatus.PLANNING,
                           budget=budget_meta(request.budget))
            self.ui.info(f"session {session_id}")
            common = {"session_id": session_id, "repo": str(request.repo), "requirement": request.requirement,
                      "provider": request.provider}
            assessed = wait_for(app.send_task(LITE_ASSESS, kwargs={**common, "force_explore": request.explore}),
                                "the assessment", settings)
            assessment = Assessment.model_validate(assessed)
            self.ui.show_assessment(assessment)
            questions: list[MergedQuestion] = []
            failed: dict[str, str] = {}
            if assessment.needs_exploration:
                questions, failed = self._explore(app, settings, state, session_dir, assessment, common)
            answers = self._clarify(questions, request.yes)
            planned = app.send_task(LITE_PLAN, kwargs={**common, "session_dir": str(session_dir),
                                                       "answers": [a.model_dump() for a in answers]})
            try:
                wait_for(planned, "planning", settings)
            except BudgetExhaustedError as exc:
                return self._stopped(state, session_dir, request.requirement, assessment, failed, exc)
            draft = LitePlanDraft.model_validate_json(state.recall(keys.LITE_PLAN) or "")
            status: str = SessionStatus.PARTIAL if failed else SessionStatus.COMPLETED
            if not request.yes:
                draft, status = self._confirm(state, session_dir, request.requirement, assessment, draft, failed,
                                              status)
            state.set_meta(status=status)
            return LiteResult(session_id=session_id, session_dir=str(session_dir), status=status,
                              tasks=len(draft.tasks), conflicts=shared_files(draft), complexity=assessment.complexity,
                              angles=assessment.angles if assessment.needs_exploration else [], failed_angles=failed,
                              usage=usage_line(session_report(state, self.prices)))

    def _stopped(self, state: SessionState, session_dir: Path, requirement: str, assessment: Assessment,
                 failed: dict[str, str], exc: BudgetExhaustedError) -> LiteResult:
        """The planning step found the budget spent: no task was planned, so the plan is failed (not
        partial: partial means some of it was planned), saying why."""
        reason = f"planning stopped: {exc.message}"
        self.ui.info(reason)
        report = write_usage_file(state, self.prices, session_dir)
        created = state.remember_once(keys.CREATED_AT, now_iso())
        atomic_write_text(session_dir / PLAN_FILE, render_stopped_plan(state.session_id, requirement, created,
                                                                       assessment, exc.message, failed,
                                                                       usage_line(report)))
        state.set_meta(status=SessionStatus.FAILED)
        return LiteResult(session_id=state.session_id, session_dir=str(session_dir), status=SessionStatus.FAILED,
                          tasks=0, conflicts=0, complexity=assessment.complexity,
                          angles=assessment.angles if assessment.needs_exploration else [], failed_angles=failed,
                          usage=usage_line(report), stopped=reason)

    def resume(self, session_dir: Path, repo: Path, provider: str, budget: Budget | None = None) -> LiteResult:
        """Finish an interrupted lite plan: missing angles, the synthesis, then planning (no questions).
        ``budget`` replaces the session's budget; None keeps the one it was started with."""
        with broker_runtime(self.settings, repo, 4, self.ui) as runtime:
            app, settings = runtime.app, runtime.settings
            state = SessionState(runtime.client, session_dir.name, settings.state_ttl_s)
            with resumable(settings, state.session_id), CoordinatorLease(state):
                meta = state.meta()
                requirement = str(meta.get("requirement") or _recorded_requirement(session_dir))
                provider = str(meta.get("provider") or provider)
                if budget is not None:
                    check_budget_priced(budget, provider, self.settings)
                    state.set_meta(budget=budget_meta(budget))
                common = {"session_id": state.session_id, "repo": str(repo), "requirement": requirement,
                          "provider": provider}
                if state.recall(keys.ASSESSMENT) is None:
                    wait_for(app.send_task(LITE_ASSESS, kwargs={**common, "force_explore": False}), "the assessment",
                             settings)
                assessment = Assessment.model_validate_json(state.recall(keys.ASSESSMENT) or "")
                failed: dict[str, str] = {}
                if assessment.needs_exploration:
                    missing = [a for a in assessment.angles if state.recall(keys.exploration_key(a)) is None]
                    self.ui.info(f"resuming {state.session_id}: re-exploring {', '.join(missing) or 'nothing'}")
                    pending = assessment.model_copy(update={"angles": missing}) if missing else assessment
                    _, failed = self._explore(app, settings, state, session_dir, pending, common,
                                              angles_for_synthesis=assessment.angles)
                if state.recall(keys.LITE_PLAN) is None or not (session_dir / TASKS_FILE).is_file():
                    try:
                        wait_for(app.send_task(LITE_PLAN, kwargs={**common, "session_dir": str(session_dir),
                                                                  "answers": []}), "planning", settings)
                    except BudgetExhaustedError as exc:
                        return self._stopped(state, session_dir, requirement, assessment, failed, exc)
                draft = LitePlanDraft.model_validate_json(state.recall(keys.LITE_PLAN) or "")
                status = SessionStatus.PARTIAL if failed else SessionStatus.COMPLETED
                state.set_meta(status=status)
                usage = usage_line(session_report(state, self.prices))
        return LiteResult(session_id=state.session_id, session_dir=str(session_dir), status=status,
                          tasks=len(draft.tasks), conflicts=shared_files(draft), complexity=assessment.complexity,
                          angles=assessment.angles if assessment.needs_exploration else [], failed_angles=failed,
                          usage=usage)

    def _explore(self, app: Celery, settings: Settings, state: SessionState, session_dir: Path,
                 assessment: Assessment, common: dict[str, Any],
                 angles_for_synthesis: list[str] | None = None) -> tuple[list[MergedQuestion], dict[str, str]]:
        """A chord of ``assessment.angles``; the synthesis reads every angle of the session from Redis."""
        watched = angles_for_synthesis or assessment.angles
        for angle in assessment.angles:
            state.set_agent(angle, state=AgentState.QUEUED)
        header = [app.signature(EXPLORE_ANGLE, queue=QUEUE_EXPLORE,
                                kwargs={**common, "output_dir": str(session_dir), "angle": angle})
                  for angle in assessment.angles]
        body = LiteSynthesize(session_id=state.session_id, session_dir=str(session_dir),
                              requirement=common["requirement"]).signature(app)
        try:
            synthesis = wait_for(chord(header)(body), "exploration", settings,
                                 tick=lambda: self.ui.progress(state.agents(watched)))
        finally:
            self.ui.done()
        for angle, reason in synthesis["failed"].items():
            self.ui.info(f"angle {angle} skipped: {reason}")
        return [MergedQuestion.model_validate(q) for q in synthesis["questions"]], dict(synthesis["failed"])

    def _clarify(self, questions: list[MergedQuestion], yes: bool) -> list[ClarificationAnswer]:
        if not questions:
            return []
        if yes:
            self.ui.info(f"{len(questions)} clarification question(s) skipped (-y)")
            return []
        answers = []
        batches = rounds(questions)
        for number, batch in enumerate(batches, start=1):
            replies = self.ui.ask(batch, number, len(batches))
            answers += [ClarificationAnswer(question=q.question, answer=a)
                        for q, a in zip(batch, replies, strict=False) if a.strip()]
        return answers

    def _confirm(self, state: SessionState, session_dir: Path, requirement: str, assessment: Assessment,
                 draft: LitePlanDraft, failed: dict[str, str], status: str) -> tuple[LitePlanDraft, str]:
        """Allow / Modify (the user edits tasks.jsonl; at most three rounds) / Cancel."""
        tasks_path = session_dir / TASKS_FILE
        for round_number in range(MODIFY_ROUNDS + 1):
            decision = self.ui.confirm_plan(tasks_path, draft)
            if decision == "allow":
                return draft, status
            if decision == "cancel":
                return draft, SessionStatus.CANCELLED
            if round_number == MODIFY_ROUNDS:
                break
            before = tasks_path.read_text(encoding="utf-8")
            self.ui.edit_tasks(tasks_path, [])
            loaded, found = validate_path(tasks_path, Path(str(state.session_meta().repo)))
            if found:
                # An edit that does not validate is not kept: the plan stays whole.
                atomic_write_text(tasks_path, before)
                self.ui.info("edit not applied, tasks.jsonl restored: " + "; ".join(str(p) for p in found[:5]))
                continue
            draft = draft.model_copy(update={"tasks": [item.task for item in loaded]})
            write_plan_md(state, session_dir, requirement, assessment, draft, failed, prices=self.prices)
        self.ui.info(f"the plan still needs changes after {MODIFY_ROUNDS} rounds: for a change this size, "
                     "use `wfqueue plan` (a full workflow session)")
        return draft, SessionStatus.CANCELLED


def _recorded_requirement(session_dir: Path) -> str:
    """The requirement as the session's files recorded it (when Redis lost it)."""
    for name, key in (("requirement-analysis.json", "original_requirement"),
                      ("explorations-manifest.json", "task_description")):
        path = session_dir / name
        if path.is_file():
            return str(json.loads(path.read_text(encoding="utf-8")).get(key, ""))
    raise BadInputError(f"{session_dir.name}: neither Redis nor the session's files record its requirement",
                        hint="start the plan again with `wfqueue lite-plan`")
