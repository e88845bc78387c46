"""Lite-plan tasks: assess, explore one angle (chord header, shared with workflow
sessions), synthesise (chord callback), plan.

An angle runs under the header wrapper (workers.header): one that fails after
its retries returns a failure record, so the other angles and the synthesis go
on; the plan names the skipped angle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from celery import Celery, Task
from pydantic import BaseModel

from wfqueue.errors import TransientProviderError
from wfqueue.lite.models import VerifiedExploration
from wfqueue.lite.steps import run_assessment, run_exploration, run_planning, run_synthesis
from wfqueue.payloads import ExploreAngle, LiteAssess, LitePlan, LiteSynthesize
from wfqueue.settings import Settings
from wfqueue.transport.workspace import shown_session_dir
from wfqueue.usage import PriceTable
from workers.context import StateFactory, metered_provider
from workers.header import Attempt, Finished, run_header
from workers.registry import payload_task

__all__ = ["AngleOutcome", "angle_outcome", "register"]


class AngleOutcome(BaseModel):
    """The record an angle hands its chord (the callbacks read Redis; Flower shows this)."""

    angle: str
    status: Literal["done", "failed"]
    error: str | None = None
    verified: int = 0  # findings confirmed against the code
    checks: int = 0
    worker: str | None = None
    pid: int | None = None
    attempts: int = 1


def angle_outcome(attempt: Finished, exploration: VerifiedExploration | None) -> AngleOutcome:
    checks = exploration.checks if exploration else []
    return AngleOutcome(angle=attempt.agent, status=attempt.status, error=attempt.error,
                        verified=sum(c.verified for c in checks), checks=len(checks), worker=attempt.worker,
                        pid=attempt.pid, attempts=attempt.attempts)


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)
    prices = PriceTable(settings.price_table)

    @payload_task(app, settings, LiteAssess, retry_on=(TransientProviderError,))
    def assess(task: Task[Any, Any], p: LiteAssess) -> dict[str, Any]:
        state = states.session(p.session_id)
        result = run_assessment(state, metered_provider(p.provider, settings, state, p.session_dir), p.repo,
                                p.requirement, p.force_explore)
        return result.model_dump(mode="json")

    @payload_task(app, settings, ExploreAngle)
    def explore(task: Task[Any, Any], p: ExploreAngle) -> dict[str, Any]:
        state = states.session(p.session_id)

        def exploration(attempt: Attempt) -> VerifiedExploration:
            # A spent budget raises BudgetExhaustedError (a ProviderError): the angle is skipped, not retried.
            return run_exploration(state, metered_provider(p.provider, settings, state, p.session_dir),
                                   Path(p.output_dir), p.repo,
                                   p.requirement, p.angle, attempt.worker)

        return run_header(task, state, settings, p.angle, exploration, angle_outcome).model_dump()

    @payload_task(app, settings, LiteSynthesize, callback=True, retry_on=(OSError,))
    def synthesize(task: Task[Any, Any], p: LiteSynthesize) -> dict[str, Any]:
        questions, failed = run_synthesis(states.session(p.session_id), Path(p.session_dir), p.requirement,
                                          shown_session_dir(p.transport, p.session_dir))
        return {"questions": [q.model_dump() for q in questions], "failed": failed}

    @payload_task(app, settings, LitePlan, retry_on=(TransientProviderError,))
    def plan(task: Task[Any, Any], p: LitePlan) -> dict[str, Any]:
        state = states.session(p.session_id)
        draft = run_planning(state, metered_provider(p.provider, settings, state, p.session_dir), Path(p.session_dir),
                             p.repo, p.requirement, p.answers, prices=prices, awaiting=p.awaiting_acceptance)
        return {"tasks": len(draft.tasks)}
