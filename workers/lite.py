"""Lite-plan tasks: assess, explore one angle (chord header, shared with workflow
sessions), synthesise (chord callback), plan.

An angle that fails after its retries returns a failure record, so the other
angles and the synthesis go on; the plan names the skipped angle.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded

from wfqueue.errors import ProviderError, TransientProviderError, WfqueueError
from wfqueue.keys import AgentState
from wfqueue.lite.models import ClarificationAnswer
from wfqueue.lite.steps import run_assessment, run_exploration, run_planning, run_synthesis
from wfqueue.settings import Settings
from wfqueue.task_names import EXPLORE_ANGLE, LITE_ASSESS, LITE_PLAN, LITE_SYNTHESIZE
from wfqueue.usage import PriceTable
from workers.context import StateFactory, may_retry, metered_provider, retry_later


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)
    prices = PriceTable(settings.price_table)

    @app.task(name=LITE_ASSESS, bind=True, max_retries=settings.task_max_retries)
    def assess(self: Task[Any, Any], session_id: str, repo: str, requirement: str, force_explore: bool,
               provider: str) -> dict[str, Any]:
        state = states.session(session_id)
        try:
            result = run_assessment(state, metered_provider(provider, settings, state), repo, requirement,
                                    force_explore)
        except TransientProviderError as exc:
            raise retry_later(self, exc, settings) from None
        return result.model_dump(mode="json")

    @app.task(name=EXPLORE_ANGLE, bind=True, max_retries=settings.task_max_retries)
    def explore(self: Task[Any, Any], session_id: str, output_dir: str, repo: str, requirement: str, angle: str,
                provider: str) -> dict[str, Any]:
        state = states.session(session_id)
        state.set_agent(angle, state=AgentState.RUNNING, worker=self.request.hostname, started_at=time.time(),
                        error=None)

        def failed(reason: str) -> dict[str, Any]:
            state.set_agent(angle, state=AgentState.FAILED, error=reason, finished_at=time.time())
            return {"angle": angle, "status": "failed", "error": reason}

        try:
            # A spent budget raises BudgetExhaustedError (a ProviderError): the angle is skipped, not retried.
            exploration = run_exploration(state, metered_provider(provider, settings, state), Path(output_dir), repo,
                                          requirement, angle, self.request.hostname or "unknown")
        except SoftTimeLimitExceeded:
            return failed(f"timed out after the {settings.agent_soft_time_limit_s}s soft time limit")
        except ProviderError as exc:
            if isinstance(exc, TransientProviderError) and may_retry(self):
                state.set_agent(angle, state=AgentState.QUEUED, error=f"retrying: {exc.message}")
                raise retry_later(self, exc, settings) from None
            return failed(exc.message)
        except Exception as exc:  # noqa: BLE001 - retry, then a failure record: never break the chord
            if may_retry(self) and not isinstance(exc, WfqueueError):
                raise retry_later(self, exc, settings) from None
            return failed(f"{type(exc).__name__}: {exc}")
        state.set_agent(angle, state=AgentState.DONE, finished_at=time.time())
        verified = sum(c.verified for c in exploration.checks)
        return {"angle": angle, "status": "done", "verified": verified, "checks": len(exploration.checks)}

    @app.task(name=LITE_SYNTHESIZE, bind=True, max_retries=settings.task_max_retries)
    def synthesize(self: Task[Any, Any], outcomes: list[dict[str, Any]], session_id: str, session_dir: str,
                   requirement: str) -> dict[str, Any]:
        # ``outcomes`` is informative only: which angles finished is read from Redis.
        try:
            questions, failed = run_synthesis(states.session(session_id), Path(session_dir), requirement)
        except OSError as exc:
            raise retry_later(self, exc, settings) from None
        return {"questions": [q.model_dump() for q in questions], "failed": failed}

    @app.task(name=LITE_PLAN, bind=True, max_retries=settings.task_max_retries)
    def plan(self: Task[Any, Any], session_id: str, session_dir: str, repo: str, requirement: str,
             answers: list[dict[str, str]], provider: str) -> dict[str, Any]:
        state = states.session(session_id)
        try:
            draft = run_planning(state, metered_provider(provider, settings, state, session_dir), Path(session_dir),
                                 repo, requirement, [ClarificationAnswer.model_validate(a) for a in answers],
                                 prices=prices)
        except TransientProviderError as exc:
            raise retry_later(self, exc, settings) from None
        return {"tasks": len(draft.tasks)}
