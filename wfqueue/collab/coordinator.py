"""The coordinator of a collaborative plan: enqueue by task name, wait, report.

It imports no worker code. In embedded mode it first starts Redis and local
workers (and always stops them); with a broker URL it only enqueues and waits
for workers started anywhere. Interaction goes through a small UI protocol so
the CLI, tests and benchmarks each bring their own.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import redis
from celery import Celery
from pydantic import BaseModel, Field

from wfqueue import keys
from wfqueue.collab.models import RequirementAnalysis
from wfqueue.collab.recovery import enqueue_missing, load_or_seed_analysis, missing_areas, reseed_from_disk
from wfqueue.collab.steps import failure_reason
from wfqueue.errors import BadInputError, InfrastructureError
from wfqueue.keys import SessionKind, SessionStatus
from wfqueue.metering import budget_meta, check_budget_priced, session_report, usage_line
from wfqueue.providers import check_provider_spec
from wfqueue.runtime import broker_runtime, resumable, wait_for
from wfqueue.sessions import new_collab_session_id, planning_root
from wfqueue.settings import MAX_AGENTS_LIMIT, Settings
from wfqueue.state import CoordinatorLease, SessionState
from wfqueue.task_names import COLLAB_UNDERSTAND, QUEUE_PLAN
from wfqueue.usage import Budget, PriceTable

SplitDecision = Literal["start", "cancel"] | int


class CollabRequest(BaseModel):
    requirement: str = Field(min_length=1)
    repo: Path
    max_agents: int = Field(ge=2, le=MAX_AGENTS_LIMIT)
    provider: str
    yes: bool = False
    workers: int | None = Field(default=None, ge=1, le=256)
    budget: Budget | None = None


class PlanResult(BaseModel):
    session_id: str
    session_dir: str
    status: str
    tasks: int
    conflicts: int
    failed_areas: list[str] = Field(default_factory=list)
    failures: dict[str, str] = Field(default_factory=dict)  # area -> why (plan.md says the same)
    usage: str | None = None  # wfqueue.metering.usage_line

    @property
    def exit_code(self) -> int:
        return 1 if self.status in (SessionStatus.PARTIAL, SessionStatus.FAILED) else 0


class CoordinatorUI(Protocol):
    def info(self, message: str) -> None: ...

    def confirm_split(self, analysis: RequirementAnalysis) -> SplitDecision:
        """start, cancel, or a new number of sub-domains to split into."""
        ...

    def progress(self, agents: dict[str, dict[str, Any]]) -> None: ...

    def done(self) -> None: ...


class CollabCoordinator:
    def __init__(self, settings: Settings, ui: CoordinatorUI, worker_env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.ui = ui
        self.worker_env = worker_env

    def run(self, request: CollabRequest) -> PlanResult:
        check_provider_spec(request.provider)
        check_budget_priced(request.budget, request.provider, self.settings)
        if not request.repo.is_dir():
            raise BadInputError(f"--repo {request.repo} is not a directory")
        with broker_runtime(self.settings, request.repo, request.workers or request.max_agents, self.ui,
                            self.worker_env) as runtime:
            return self._plan(runtime.app, runtime.settings, runtime.client, request)

    def _plan(self, app: Celery, settings: Settings, client: redis.Redis, request: CollabRequest) -> PlanResult:
        root = planning_root(request.repo)
        existing = {p.name for p in root.iterdir()} if root.is_dir() else set()
        session_id = new_collab_session_id(request.requirement, datetime.now(UTC), existing)
        session_dir = root / session_id
        session_dir.mkdir(parents=True)
        state = SessionState(client, session_id, settings.state_ttl_s)
        with resumable(settings, session_id), CoordinatorLease(state, fresh=True):
            # Workers read the budget from here before every LLM step (wfqueue.metering).
            state.set_meta(kind=SessionKind.COLLAB, repo=str(request.repo), session_dir=str(session_dir),
                           requirement=request.requirement, provider=request.provider, status=SessionStatus.PLANNING,
                           budget=budget_meta(request.budget))
            self.ui.info(f"session {session_id}")
            max_agents = request.max_agents
            while True:
                analysis = self._understand(app, settings, state, session_dir, request, max_agents)
                decision = "start" if request.yes else self.ui.confirm_split(analysis)
                if decision == "start":
                    break
                if decision == "cancel":
                    state.set_meta(status=SessionStatus.CANCELLED)
                    return PlanResult(session_id=session_id, session_dir=str(session_dir),
                                      status=SessionStatus.CANCELLED, tasks=0, conflicts=0)
                max_agents = max(2, min(int(decision), MAX_AGENTS_LIMIT))
                for name in (*keys.UNDERSTANDING_KEYS, keys.TEMPLATE):
                    state.forget(name)
            final = self._run_agents(app, settings, state, session_dir, analysis, request.provider)
            return self._result(state, session_dir, final)

    def _result(self, state: SessionState, session_dir: Path, final: dict[str, Any]) -> PlanResult:
        failures = {area: failure_reason(state, area) for area in final["failed_areas"]}
        return PlanResult(session_id=state.session_id, session_dir=str(session_dir), status=final["status"],
                          tasks=final["tasks"], conflicts=final["conflicts"], failed_areas=final["failed_areas"],
                          failures=failures,
                          usage=usage_line(session_report(state, PriceTable(self.settings.price_table))))

    def _understand(self, app: Celery, settings: Settings, state: SessionState, session_dir: Path,
                    request: CollabRequest, max_agents: int) -> RequirementAnalysis:
        self.ui.info("understanding the requirement")
        result = app.send_task(
            COLLAB_UNDERSTAND, queue=QUEUE_PLAN,
            kwargs={"session_id": state.session_id, "session_dir": str(session_dir), "repo": str(request.repo),
                    "requirement": request.requirement, "max_agents": max_agents, "provider": request.provider},
        )
        wait_for(result, "the understanding step", settings)
        stored = state.recall(keys.ANALYSIS)
        if stored is None:
            raise InfrastructureError("the understanding step finished but stored no analysis")
        analysis = RequirementAnalysis.model_validate_json(stored)
        for repair in analysis.repairs:  # plan.md lists them too
            self.ui.info(f"split repaired ({repair.kind}): {repair.detail}")
        return analysis

    def _run_agents(self, app: Celery, settings: Settings, state: SessionState, session_dir: Path,
                    analysis: RequirementAnalysis, provider: str) -> dict[str, Any]:
        areas = [s.focus_area for s in analysis.sub_domains]
        result = enqueue_missing(app, state, session_dir, analysis, provider)
        state.set_meta(chord_id=result.id)
        try:
            final = wait_for(result, "the plan", settings, tick=lambda: self.ui.progress(state.agents(areas)),
                             settled=lambda: _watchdog_result(state))
        finally:
            self.ui.done()
        return dict(final)

    def resume(self, session_dir: Path, repo: Path, provider: str, budget: Budget | None = None) -> PlanResult:
        """Finish an interrupted plan: only areas without a result run again, then the callback.
        ``budget`` replaces the session's budget; None keeps the one it was started with."""
        with broker_runtime(self.settings, repo, self.settings.max_agents, self.ui, self.worker_env) as runtime:
            state = SessionState(runtime.client, session_dir.name, runtime.settings.state_ttl_s)
            with resumable(runtime.settings, state.session_id), CoordinatorLease(state):
                meta = state.meta()
                provider = str(meta.get("provider") or provider)
                if budget is not None:
                    check_budget_priced(budget, provider, self.settings)
                    state.set_meta(budget=budget_meta(budget))
                analysis = load_or_seed_analysis(state, session_dir)
                if analysis is None:
                    requirement = str(meta.get("requirement") or "")
                    if not requirement:
                        raise BadInputError(
                            f"{session_dir.name} has no requirement-analysis.json and Redis does not know its "
                            "requirement", hint="start the plan again with `wfqueue collab-plan`")
                    request = CollabRequest(requirement=requirement, repo=repo, max_agents=self.settings.max_agents,
                                            provider=provider, yes=True)
                    analysis = self._understand(runtime.app, runtime.settings, state, session_dir, request,
                                                request.max_agents)
                if state.session_meta().repo is None:
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
