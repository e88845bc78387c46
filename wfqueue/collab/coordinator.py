"""The coordinator of a collaborative plan: understand, confirm the split, plan areas in parallel.

It imports no worker code. The shared steps (runtime, session folder, lease,
meta, waiting) are ``wfqueue.workflow.base``; this module adds the split
confirmation and the area chord, and declares the collab ``WorkflowKind``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Literal, Protocol

from celery import Celery
from pydantic import BaseModel, Field

from wfqueue import keys
from wfqueue.collab.inspect import read_status
from wfqueue.collab.models import RequirementAnalysis
from wfqueue.collab.recovery import (
    CollabRecovery,
    enqueue_missing,
    load_or_seed_analysis,
    missing_areas,
    missing_work,
    reseed_from_disk,
)
from wfqueue.collab.steps import SUMMARY_FILE, agent_dir, failure_reason, is_cancelled, mark_cancelled
from wfqueue.collab.summary import NO_TASK, render_failed_understanding
from wfqueue.errors import BadInputError, InfrastructureError, ProviderError
from wfqueue.fsio import atomic_write_text
from wfqueue.keys import SessionKind, SessionStatus
from wfqueue.metering import budget_meta, check_budget_priced
from wfqueue.payloads import CollabUnderstand
from wfqueue.runtime import resume_command
from wfqueue.sessions import SessionIds, planning_root
from wfqueue.settings import MAX_AGENTS_LIMIT, MAX_COLLAB_WORKERS, Settings
from wfqueue.state import SessionState
from wfqueue.usage import Budget
from wfqueue.workflow.base import WorkflowCoordinator, stop_hint
from wfqueue.workflow.contract import PlanOutcome, ResumeRequest, WorkflowUI
from wfqueue.workflow.kind import WorkflowKind

SplitDecision = Literal["start", "cancel"] | int
COLLAB_IDS = SessionIds(prefix="CPLAN-", slug_length=30, dated=True)  # CPLAN-{slug}-{date}


class CollabRequest(BaseModel):
    requirement: str = Field(min_length=1)
    repo: Path
    max_agents: int = Field(ge=2, le=MAX_AGENTS_LIMIT)
    provider: str
    yes: bool = False
    workers: int | None = Field(default=None, ge=1, le=MAX_COLLAB_WORKERS)
    budget: Budget | None = None


class PlanResult(PlanOutcome):
    JSON_FIELDS = PlanOutcome.JSON_FIELDS | {"failures"}

    def failure_reasons(self) -> list[str]:
        return [*super().failure_reasons(), *self.failures.values()]

    failed_areas: list[str] = Field(default_factory=list)
    failures: dict[str, str] = Field(default_factory=dict)  # area -> why (plan.md says the same)


class CoordinatorUI(WorkflowUI, Protocol):
    def confirm_split(self, analysis: RequirementAnalysis, most: int) -> SplitDecision:
        """start, cancel, or a new number of sub-domains to split into, at most ``most`` (--max-agents)."""
        ...


class CollabCoordinator(WorkflowCoordinator[CoordinatorUI]):
    def run(self, request: CollabRequest) -> PlanResult:
        self.check(request.provider, request.budget, request.repo)
        with (self.runtime(request.repo, request.workers or request.max_agents) as runtime,
              self.fresh_session(runtime, request, SessionKind.COLLAB, planning_root(request.repo), COLLAB_IDS)
              as (state, session_dir)):
            try:
                analysis = self._confirmed_split(runtime.app, runtime.settings, state, session_dir, request)
            except ProviderError as exc:
                return self._understanding_failed(state, session_dir, request, exc)
            if analysis is None:
                state.set_meta(status=SessionStatus.CANCELLED)
                mark_cancelled(session_dir, runtime.settings.lock_timeout_s)
                self._bill(state)  # the understanding (and each adjusted split) was paid for
                return PlanResult(session_id=state.session_id, session_dir=str(session_dir),
                                  status=SessionStatus.CANCELLED, tasks=0, conflicts=0, usage=self.usage(state))
            final = self._run_agents(runtime.app, runtime.settings, state, session_dir, analysis, request.provider)
            return self._result(state, session_dir, final)

    def _confirmed_split(self, app: Celery, settings: Settings, state: SessionState, session_dir: Path,
                         request: CollabRequest) -> RequirementAnalysis | None:
        """Understand the requirement until the user starts (None: cancelled)."""
        max_agents = request.max_agents
        while True:
            analysis = self._understand(app, settings, state, session_dir, request, max_agents)
            decision = "start" if request.yes else self.ui.confirm_split(analysis, request.max_agents)
            if decision == "start":
                return analysis
            if decision == "cancel":
                return None
            max_agents = max(2, min(int(decision), request.max_agents))
            for name in (*keys.UNDERSTANDING_KEYS, keys.TEMPLATE):
                state.forget(name)
            for sub in analysis.sub_domains:  # the folders of the split given up, while still empty
                with contextlib.suppress(OSError):
                    agent_dir(session_dir, sub.focus_area).rmdir()

    def _understanding_failed(self, state: SessionState, session_dir: Path, request: CollabRequest,
                              exc: ProviderError) -> PlanResult:
        """The model failed the understanding step (a refusal, answers that never validate, an API that kept
        failing) or the budget stopped it: the plan is failed, plan.md says why, and a resume runs the step again.
        It escaped as an error: `--json` printed nothing, and the session read as interrupted."""
        reason = f"the understanding step stopped: {exc.message}"
        self.ui.info(reason)
        resume = resume_command(state.session_id, request.repo)
        atomic_write_text(session_dir / SUMMARY_FILE,
                          render_failed_understanding(state.session_id, request.requirement, exc.message, resume))
        self._bill(state)
        state.set_meta(status=SessionStatus.FAILED)
        return PlanResult(session_id=state.session_id, session_dir=str(session_dir), status=SessionStatus.FAILED,
                          tasks=0, conflicts=0, usage=self.usage(state), stopped=reason,
                          stop_hint=stop_hint(exc, f"{resume} runs it again"))

    def _result(self, state: SessionState, session_dir: Path, final: dict[str, Any]) -> PlanResult:
        failures = {area: failure_reason(state, area) for area in final["failed_areas"]}
        # Every agent answered, with no task: said, or a failed plan reads as failing for no reason.
        empty = NO_TASK if NO_TASK in final.get("problems", []) else None
        return PlanResult(session_id=state.session_id, session_dir=str(session_dir), status=final["status"],
                          tasks=final["tasks"], conflicts=final["conflicts"], failed_areas=final["failed_areas"],
                          failures=failures, usage=self.usage(state), stopped=empty)

    def _understand(self, app: Celery, settings: Settings, state: SessionState, session_dir: Path,
                    request: CollabRequest, max_agents: int) -> RequirementAnalysis:
        self.ui.info("understanding the requirement")
        result = CollabUnderstand(session_id=state.session_id, session_dir=str(session_dir), repo=str(request.repo),
                                  requirement=request.requirement, max_agents=max_agents,
                                  provider=request.provider, transport=self.transport).send(app)
        self.wait(result, "the understanding step", settings, state)
        stored = state.recall(keys.ANALYSIS)
        if stored is None:
            raise InfrastructureError("the understanding step finished but stored no analysis")
        analysis = RequirementAnalysis.model_validate_json(stored)
        for repair in analysis.repairs:  # plan.md lists them too
            self.ui.info(f"split repaired ({repair.kind}): {repair.detail}")
        return analysis

    def _run_agents(self, app: Celery, settings: Settings, state: SessionState, session_dir: Path,
                    analysis: RequirementAnalysis, provider: str) -> dict[str, Any]:
        result = enqueue_missing(app, state, session_dir, analysis, provider)
        # Not a new meta: Redis may have lost the session since the agents were sent (they run at once), and a
        # meta written anew would hide the loss from the wait below, which would then never end.
        state.add_to_meta(chord_id=result.id)
        final = self.wait_with_progress(result, "the plan", settings, state,
                                        [s.focus_area for s in analysis.sub_domains],
                                        settled=lambda: _watchdog_result(state))
        return dict(final)

    def resume(self, request: ResumeRequest) -> PlanResult:
        """Finish an interrupted plan: only areas without a result run again, then the callback."""
        session_dir, repo = request.session_dir, request.repo
        if is_cancelled(session_dir):
            raise BadInputError(f"{session_dir.name} was cancelled when its split was shown: there is nothing to "
                                "finish", hint="plan the requirement again with `wfqueue collab-plan`")
        with (self.runtime(repo) as runtime,
              self.hold(runtime, session_dir.name, fresh=False, meta=request.chosen_meta()) as state):
            meta = state.meta()
            provider = request.provider_for(str(meta["provider"]) if meta.get("provider") else None)
            if request.budget is not None:
                check_budget_priced(request.budget, provider, self.settings)
                state.set_meta(budget=budget_meta(request.budget))
            analysis = load_or_seed_analysis(state, session_dir)
            if analysis is None:
                requirement = str(meta.get("requirement") or "")
                if not requirement:
                    raise BadInputError(
                        f"{session_dir.name} has no requirement-analysis.json and Redis does not know its "
                        "requirement", hint="start the plan again with `wfqueue collab-plan`")
                understand = CollabRequest(requirement=requirement, repo=repo, max_agents=self.settings.max_agents,
                                           provider=provider, yes=True)
                state.set_meta(status=SessionStatus.PLANNING)  # `status` reads it under way, not failed
                (session_dir / SUMMARY_FILE).unlink(missing_ok=True)  # a failed understanding's plan.md
                try:
                    analysis = self._understand(runtime.app, runtime.settings, state, session_dir, understand,
                                                understand.max_agents)
                except ProviderError as exc:  # failed again: said as the first time
                    return self._understanding_failed(state, session_dir, understand, exc)
            if state.session_meta().kind is None:  # Redis forgot the session: the meta a new plan writes
                state.set_meta(kind=SessionKind.COLLAB, repo=str(repo), session_dir=str(session_dir),
                               provider=provider)
            for key in keys.WATCHDOG_KEYS:  # a resumed plan starts a fresh watch
                state.forget(key)
            state.set_meta(status=SessionStatus.PLANNING)
            state.forget(keys.FINAL)
            seeded = reseed_from_disk(state, session_dir, analysis)
            missing = missing_areas(state, analysis)
            self.ui.info(f"resuming {session_dir.name}: {len(analysis.sub_domains) - len(missing)} area(s) done"
                         + (f" ({len(seeded)} recovered from disk)" if seeded else "")
                         + (f", re-running {', '.join(missing)}" if missing else ", finalising"))
            final = self._run_agents(runtime.app, runtime.settings, state, session_dir, analysis, provider)
            return self._result(state, session_dir, final)


def _watchdog_result(state: SessionState) -> dict[str, Any] | None:
    """The final result when the stalled-session watchdog took over: it finalised the plan, or
    re-enqueued its missing work (whose callback is not the chord this coordinator waits on)."""
    if state.recall(keys.WATCHDOG_FINALIZED_ISO) is None and state.recall(keys.WATCHDOG_REENQUEUED) is None:
        return None
    final = state.recall(keys.FINAL)
    return json.loads(final) if final is not None else None


def _resume(settings: Settings, ui: CoordinatorUI, request: ResumeRequest) -> PlanOutcome:
    return CollabCoordinator(settings, ui).resume(request)


COLLAB = WorkflowKind(name=SessionKind.COLLAB, label="collab", ids=COLLAB_IDS, root=planning_root,
                      read_status=read_status, resume=_resume, missing_work=missing_work, recovery=CollabRecovery())
