"""The coordinator of a lite plan: assess, explore angles in parallel, clarify, plan, confirm.

Exploration is a chord: one task per angle on the ``explore`` queue, the
synthesis as its callback. The shared steps (runtime, session folder, lease,
meta, waiting) are ``wfqueue.workflow.base``; the user's side (showing the
assessment, asking clarification questions, confirming or editing the plan) goes
through ``LiteUI``; ``-y`` answers every question with the safe default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Protocol

from celery import Celery
from pydantic import BaseModel, Field

from wfqueue import keys
from wfqueue.collab.steps import now_iso
from wfqueue.errors import BadInputError, ProviderError
from wfqueue.fanout import fan_out
from wfqueue.fsio import atomic_write_text
from wfqueue.keys import AgentState, SessionKind, SessionStatus
from wfqueue.lite.models import Assessment, ClarificationAnswer, LitePlanDraft
from wfqueue.lite.render import AWAITING_NOTE, CANCELLED_NOTE, render_stopped_plan, says_awaiting, says_cancelled
from wfqueue.lite.steps import PLAN_FILE, TASKS_FILE, write_plan_md
from wfqueue.lite.synthesis import MergedQuestion, rounds
from wfqueue.metering import budget_meta, check_budget_priced, usage_line, write_usage_file
from wfqueue.payloads import ExploreAngle, LiteAssess, LitePlan, LiteSynthesize
from wfqueue.plan_check import validate_path
from wfqueue.runtime import resume_command
from wfqueue.session_summary import lite_status
from wfqueue.sessions import LITE_DIR, WORKFLOW_DIR, SessionIds
from wfqueue.settings import MAX_EXPLORE_WORKERS, Settings
from wfqueue.state import SessionState, SessionStore
from wfqueue.tasks_file import dump_jsonl
from wfqueue.transport.models import Transport
from wfqueue.unified_task import UnifiedTask
from wfqueue.usage import Budget
from wfqueue.workflow.base import WorkflowCoordinator, stop_hint
from wfqueue.workflow.contract import PlanOutcome, ResumeRequest, WorkflowUI
from wfqueue.workflow.kind import WorkflowKind

LITE_IDS = SessionIds(slug_length=40, dated=True)  # {slug}-{date}
MODIFY_ROUNDS = 3
PlanDecision = Literal["allow", "modify", "cancel"]


class LiteRequest(BaseModel):
    requirement: str = Field(min_length=1)
    repo: Path
    provider: str
    explore: bool = False
    yes: bool = False
    workers: int | None = Field(default=None, ge=1, le=MAX_EXPLORE_WORKERS)
    budget: Budget | None = None


class LiteResult(PlanOutcome):
    JSON_FIELDS = PlanOutcome.JSON_FIELDS | {"complexity", "angles", "failed_angles"}

    def failure_reasons(self) -> list[str]:
        return [*super().failure_reasons(), *self.failed_angles.values()]

    complexity: str
    angles: list[str]
    failed_angles: dict[str, str] = Field(default_factory=dict)


class LiteUI(WorkflowUI, Protocol):
    def show_assessment(self, assessment: Assessment) -> None: ...
    def ask(self, batch: list[MergedQuestion], number: int, total: int) -> list[str]:
        """Answers to one round of at most four questions ('' for no answer)."""
        ...
    def confirm_plan(self, tasks_path: Path, draft: LitePlanDraft) -> PlanDecision: ...
    def edit_tasks(self, tasks_path: Path, problems: list[str]) -> None:
        """Let the user edit tasks.jsonl (``problems`` from a previous try); return when done."""
        ...


def lite_root(repo: Path) -> Path:
    return repo / WORKFLOW_DIR / LITE_DIR


def shared_files(draft: LitePlanDraft) -> int:
    """Files that more than one task touches: where parallel execution could collide."""
    owners: dict[str, set[str]] = {}
    for task in draft.tasks:
        for file in task.files:
            owners.setdefault(file.path, set()).add(task.id)
    return sum(1 for ids in owners.values() if len(ids) > 1)


class _Plan(BaseModel):
    """What every step of one lite plan is sent."""

    session_id: str
    session_dir: Path
    repo: Path
    requirement: str
    provider: str
    transport: Transport | None

    def assess(self, force_explore: bool) -> LiteAssess:
        return LiteAssess(session_id=self.session_id, session_dir=str(self.session_dir), repo=str(self.repo),
                          requirement=self.requirement, force_explore=force_explore, provider=self.provider,
                          transport=self.transport)

    def plan(self, answers: list[ClarificationAnswer], awaiting: bool) -> LitePlan:
        return LitePlan(session_id=self.session_id, session_dir=str(self.session_dir), repo=str(self.repo),
                        requirement=self.requirement, answers=answers, provider=self.provider,
                        transport=self.transport, awaiting_acceptance=awaiting)

    def explore(self, angle: str) -> ExploreAngle:
        return ExploreAngle(session_id=self.session_id, session_dir=str(self.session_dir),
                            output_dir=str(self.session_dir), repo=str(self.repo), requirement=self.requirement,
                            angle=angle, provider=self.provider, transport=self.transport)


class LiteCoordinator(WorkflowCoordinator[LiteUI]):
    def run(self, request: LiteRequest) -> LiteResult:
        self.check(request.provider, request.budget, request.repo)
        with (self.runtime(request.repo, request.workers) as runtime,
              self.fresh_session(runtime, request, SessionKind.LITE, lite_root(request.repo), LITE_IDS)
              as (state, session_dir)):
            plan = _Plan(session_id=state.session_id, session_dir=session_dir, repo=request.repo,
                         requirement=request.requirement, provider=request.provider, transport=self.transport)
            return self._plan(runtime.app, runtime.settings, state, plan, request)

    def _plan(self, app: Celery, settings: Settings, state: SessionState, plan: _Plan,
              request: LiteRequest) -> LiteResult:
        if not request.yes:  # first: a plan stopped at any step is asked about by its resume, as meant
            state.store(keys.AWAITS_ACCEPTANCE, "1")
        if request.explore:  # a resume whose assessment runs again explores as asked
            state.store(keys.EXPLORE_FORCED, "1")
        try:
            assessed = self.wait(plan.assess(request.explore).send(app), "the assessment", settings, state)
        except ProviderError as exc:
            return self._stopped(state, plan, None, {}, exc)
        assessment = Assessment.model_validate(assessed)
        self.ui.show_assessment(assessment)
        questions: list[MergedQuestion] = []
        failed: dict[str, str] = {}
        if assessment.needs_exploration:
            questions, failed = self._explore(app, settings, state, plan, assessment)
        answers = self._clarify(questions, request.yes)
        # Kept with the session: a plan stopped by its budget or Ctrl-C and resumed is planned with them.
        state.store(keys.CLARIFICATIONS, json.dumps([a.model_dump(mode="json") for a in answers]))
        try:
            self.wait(plan.plan(answers, awaiting=not request.yes).send(app), "planning", settings, state)
        except ProviderError as exc:
            return self._stopped(state, plan, assessment, failed, exc)
        draft = LitePlanDraft.model_validate_json(state.recall(keys.LITE_PLAN) or "")
        status: str = SessionStatus.PARTIAL if failed else SessionStatus.COMPLETED
        if not request.yes:
            draft, status = self._confirm(state, plan, assessment, draft, failed, status)
        state.set_meta(status=status)
        return self._result(state, plan, assessment, draft, failed, status)

    def _result(self, state: SessionState, plan: _Plan, assessment: Assessment, draft: LitePlanDraft,
                failed: dict[str, str], status: str) -> LiteResult:
        return LiteResult(session_id=state.session_id, session_dir=str(plan.session_dir), status=status,
                          tasks=len(draft.tasks), conflicts=shared_files(draft), complexity=assessment.complexity,
                          angles=assessment.angles if assessment.needs_exploration else [], failed_angles=failed,
                          usage=self.usage(state))

    def _stopped(self, state: SessionState, plan: _Plan, assessment: Assessment | None, failed: dict[str, str],
                 exc: ProviderError) -> LiteResult:
        """The assessment (``assessment`` None) or the planning step found the budget spent, or the model failed it
        (a refusal, answers that never validate): no task was planned, so the plan is failed (not partial:
        partial means some of it was planned; not left "planning", which reads as a plan whose command was
        stopped), saying why."""
        reason = f"{'planning' if assessment is not None else 'the assessment'} stopped: {exc.message}"
        self.ui.info(reason)
        hint = stop_hint(exc, f"{resume_command(state.session_id, plan.repo)} plans it again (what was explored is "
                              "kept, not paid again)")
        report = write_usage_file(state, self.prices, plan.session_dir)
        created = state.remember_once(keys.CREATED_AT, now_iso())
        atomic_write_text(plan.session_dir / PLAN_FILE,
                          render_stopped_plan(state.session_id, plan.requirement, created, assessment, exc.message,
                                              failed, usage_line(report)))
        state.set_meta(status=SessionStatus.FAILED)
        return LiteResult(session_id=state.session_id, session_dir=str(plan.session_dir), status=SessionStatus.FAILED,
                          tasks=0, conflicts=0, complexity=assessment.complexity if assessment else "not assessed",
                          angles=assessment.angles if assessment and assessment.needs_exploration else [],
                          failed_angles=failed, usage=usage_line(report), stopped=reason, stop_hint=hint)

    def resume(self, request: ResumeRequest) -> LiteResult:
        """Finish an interrupted lite plan: missing angles, the synthesis, then planning (no questions)."""
        session_dir = request.session_dir
        plan_md = session_dir / PLAN_FILE
        if plan_md.is_file() and says_cancelled(plan_md.read_text(encoding="utf-8", errors="replace")):
            raise BadInputError(f"{session_dir.name} was cancelled when its plan was shown: there is nothing to "
                                "finish", hint="plan the requirement again with `wfqueue lite-plan`")
        with (self.runtime(request.repo) as runtime,
              self.hold(runtime, session_dir.name, fresh=False, meta=request.chosen_meta()) as state):
            app, settings = runtime.app, runtime.settings
            meta = state.meta()
            provider = request.provider_for(str(meta["provider"]) if meta.get("provider") else None)
            if not meta.get("kind"):  # Redis forgot the session: the meta a new plan writes
                state.set_meta(kind=SessionKind.LITE, provider=provider)
            if request.budget is not None:
                check_budget_priced(request.budget, provider, self.settings)
                state.set_meta(budget=budget_meta(request.budget))
            plan = _Plan(session_id=state.session_id, session_dir=session_dir, repo=request.repo,
                         requirement=str(meta.get("requirement") or _recorded_requirement(session_dir)),
                         provider=provider, transport=self.transport)
            if state.recall(keys.ASSESSMENT) is None:
                try:
                    forced = state.recall(keys.EXPLORE_FORCED) == "1"
                    self.wait(plan.assess(forced).send(app), "the assessment", settings, state)
                except ProviderError as exc:
                    return self._stopped(state, plan, None, {}, exc)
            assessment = Assessment.model_validate_json(state.recall(keys.ASSESSMENT) or "")
            failed: dict[str, str] = {}
            explored_now: list[str] = []  # angles the plan (if there is one) was made without
            if assessment.needs_exploration:
                missing = _missing_angles(state, assessment)
                # With every angle explored the chord still runs, to gather their findings again (each angle
                # answers from Redis: no model is asked twice).
                self.ui.info(f"resuming {state.session_id}: " + (f"re-exploring {', '.join(missing)}" if missing else
                                                                 "every angle is explored; gathering their findings"))
                pending = assessment.model_copy(update={"angles": missing}) if missing else assessment
                _, failed = self._explore(app, settings, state, plan, pending, angles_for_synthesis=assessment.angles)
                explored_now = [a for a in missing if a not in failed]
            # Read before planning again: a plan shown and not accepted is asked about whatever happens below, and
            # so is one never planned (stopped before, or by its budget: that plan.md says only why), if it was to
            # be shown.
            shown = plan_md.is_file() and says_awaiting(plan_md.read_text(encoding="utf-8", errors="replace"))
            never_planned = not (session_dir / TASKS_FILE).is_file()
            awaiting = shown or (never_planned and state.recall(keys.AWAITS_ACCEPTANCE) == "1")
            if explored_now and not never_planned and state.recall(keys.LITE_PLAN) is not None:
                # The plan was made without those angles (they had failed): it is planned again with their
                # findings, and asked about again. It said "completed", with tasks made without them.
                if _edited_since_planned(state, session_dir / TASKS_FILE):
                    failed = {a: "explored only after the plan was made, and tasks.jsonl was edited since: not "
                                 "planned again, which would replace those edits" for a in explored_now}
                else:
                    self.ui.info(f"{', '.join(explored_now)} explored now: planning again with the findings")
                    state.forget(keys.LITE_PLAN)
                    awaiting = awaiting or not request.yes
            if state.recall(keys.LITE_PLAN) is None or never_planned:
                given = [ClarificationAnswer.model_validate(a)
                         for a in json.loads(state.recall(keys.CLARIFICATIONS) or "[]")]
                try:
                    self.wait(plan.plan(given, awaiting=awaiting).send(app), "planning", settings, state)
                except ProviderError as exc:
                    return self._stopped(state, plan, assessment, failed, exc)
            draft = LitePlanDraft.model_validate_json(state.recall(keys.LITE_PLAN) or "")
            status: str = SessionStatus.PARTIAL if failed else SessionStatus.COMPLETED
            if awaiting:
                # Stopped at "allow, modify or cancel" (or before it): nobody accepted the plan, so the question
                # comes again, about tasks.jsonl as the user may have edited it.
                draft = _as_edited(draft, session_dir / TASKS_FILE, request.repo)
                if request.yes:
                    write_plan_md(state, session_dir, plan.requirement, assessment, draft, failed, prices=self.prices)
                else:
                    draft, status = self._confirm(state, plan, assessment, draft, failed, status)
            state.set_meta(status=status)
            return self._result(state, plan, assessment, draft, failed, status)

    def _explore(self, app: Celery, settings: Settings, state: SessionState, plan: _Plan, assessment: Assessment,
                 angles_for_synthesis: list[str] | None = None) -> tuple[list[MergedQuestion], dict[str, str]]:
        """A chord of ``assessment.angles``; the synthesis reads every angle of the session from Redis."""
        for angle in assessment.angles:
            state.set_agent(angle, state=AgentState.QUEUED)
        header = [plan.explore(angle) for angle in assessment.angles]
        callback = LiteSynthesize(session_id=plan.session_id, session_dir=str(plan.session_dir),
                                  requirement=plan.requirement, transport=plan.transport)
        synthesis = self.wait_with_progress(fan_out(app, state, header, callback), "exploration", settings, state,
                                            angles_for_synthesis or assessment.angles)
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

    def _confirm(self, state: SessionState, plan: _Plan, assessment: Assessment, draft: LitePlanDraft,
                 failed: dict[str, str], status: str) -> tuple[LitePlanDraft, str]:
        """Allow / Modify (the user edits tasks.jsonl; at most three rounds) / Cancel. plan.md says which, and
        while the question is open, that the plan awaits acceptance (what `status`, `resume` and `execute` read
        if the command stops there)."""
        session_dir, requirement = plan.session_dir, plan.requirement
        tasks_path = session_dir / TASKS_FILE

        def write_plan(draft: LitePlanDraft, note: str | None) -> None:
            write_plan_md(state, session_dir, requirement, assessment, draft, failed, prices=self.prices, status=note)

        write_plan(draft, AWAITING_NOTE)
        for round_number in range(MODIFY_ROUNDS + 1):
            decision = self.ui.confirm_plan(tasks_path, draft)
            if decision == "allow":
                write_plan(draft, None)
                return draft, status
            if decision == "cancel":
                break
            if round_number == MODIFY_ROUNDS:
                self.ui.info(f"the plan still needs changes after {MODIFY_ROUNDS} rounds: for a change this size, "
                             "use `wfqueue plan` (a full workflow session)")
                break
            before = tasks_path.read_text(encoding="utf-8")
            self.ui.edit_tasks(tasks_path, [])
            edited, problems = _read_edit(tasks_path, Path(str(state.session_meta().repo)))
            if problems:
                # An edit that does not validate is not kept: the plan stays whole.
                atomic_write_text(tasks_path, before)
                self.ui.info("edit not applied, tasks.jsonl restored: " + "; ".join(problems[:5]))
                continue
            draft = draft.model_copy(update={"tasks": edited})
            write_plan(draft, AWAITING_NOTE)
        write_plan(draft, CANCELLED_NOTE)
        return draft, SessionStatus.CANCELLED


def _read_edit(tasks_path: Path, repo: Path) -> tuple[list[UnifiedTask], list[str]]:
    """The tasks of ``tasks_path`` as the user left them, or the problems that keep them from counting."""
    try:
        loaded, found = validate_path(tasks_path, repo)
    except BadInputError as exc:  # the editor deleted the file, or saved it in another encoding
        return [], [exc.message]
    return [item.task for item in loaded], [str(p) for p in found]


def _as_edited(draft: LitePlanDraft, tasks_path: Path, repo: Path) -> LitePlanDraft:
    """``draft`` with the tasks of ``tasks_path`` when they validate: a Modify round's edit is kept there (only an
    edit that validates is), not in the draft Redis remembers."""
    edited, problems = _read_edit(tasks_path, repo)
    return draft if problems else draft.model_copy(update={"tasks": edited})


def _recorded_requirement(session_dir: Path) -> str:
    """The requirement as the session's files recorded it (when Redis lost it)."""
    for name, key in (("requirement-analysis.json", "original_requirement"),
                      ("explorations-manifest.json", "task_description")):
        path = session_dir / name
        if path.is_file():
            return str(json.loads(path.read_text(encoding="utf-8")).get(key, ""))
    raise BadInputError(f"{session_dir.name}: neither Redis nor the session's files record its requirement",
                        hint="start the plan again with `wfqueue lite-plan`")


def _edited_since_planned(state: SessionStore, tasks_file: Path) -> bool:
    """Whether ``tasks_file`` holds other tasks than the plan Redis remembers (a person's edits)."""
    try:
        written = [json.loads(line) for line in tasks_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return True
    planned = LitePlanDraft.model_validate_json(state.recall(keys.LITE_PLAN) or "").tasks
    return written != [json.loads(line) for line in dump_jsonl(planned).splitlines()]


def _missing_angles(state: SessionStore, assessment: Assessment) -> list[str]:
    return [a for a in assessment.angles if state.recall(keys.exploration_key(a)) is None]


def missing_work(state: SessionStore, session_dir: Path) -> list[str]:
    """The assessment, angles without an exploration, then planning, as far as they are not done."""
    stored = state.recall(keys.ASSESSMENT)
    if stored is None:
        return ["assessment", "planning"]
    assessment = Assessment.model_validate_json(stored)
    missing = _missing_angles(state, assessment) if assessment.needs_exploration else []
    if state.recall(keys.LITE_PLAN) is None or not (session_dir / TASKS_FILE).is_file():
        missing.append("planning")
    return missing


def _resume(settings: Settings, ui: LiteUI, request: ResumeRequest) -> PlanOutcome:
    return LiteCoordinator(settings, ui).resume(request)


# Lite plans wait on their coordinator (often on a person answering questions): the watchdog only reports.
LITE = WorkflowKind(name=SessionKind.LITE, label="lite-plan", ids=LITE_IDS, root=lite_root, read_status=lite_status,
                    resume=_resume, missing_work=missing_work)
