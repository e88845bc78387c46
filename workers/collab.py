"""Collaborative-plan tasks: understand, plan one area (chord header), finalize (callback).

Thin on purpose: each task is declared by its payload (workers.registry) and
calls wfqueue.collab.steps/finalize; the area task runs under the header
wrapper (workers.header), which records progress and decides on retry, and
never raises out of the chord. Providers are metered (workers/context.py):
every call is recorded, and a spent budget stops an agent before it calls the
model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, Task

from wfqueue import keys
from wfqueue.collab.assemble import AreaArtifacts
from wfqueue.collab.finalize import finalize_session
from wfqueue.collab.models import AgentOutcome
from wfqueue.collab.recovery import finalize_alone
from wfqueue.collab.steps import run_area, run_understanding
from wfqueue.errors import TransientProviderError
from wfqueue.payloads import CollabFinalize, CollabPlanArea, CollabUnderstand
from wfqueue.settings import Settings
from workers.context import StateFactory, metered_provider
from workers.header import Attempt, Finished, run_header
from workers.registry import payload_task


def area_outcome(attempt: Finished, artifacts: AreaArtifacts | None) -> AgentOutcome:
    """The record an area hands its chord (finalize reads Redis, Flower shows this)."""
    return AgentOutcome(focus_area=attempt.agent, status=attempt.status, error=attempt.error,
                        task_count=artifacts.plan["task_count"] if artifacts else 0, worker=attempt.worker,
                        pid=attempt.pid, attempts=attempt.attempts)


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)

    @payload_task(app, settings, CollabUnderstand, retry_on=(TransientProviderError,))
    def understand(task: Task[Any, Any], p: CollabUnderstand) -> dict[str, Any]:
        state = states.session(p.session_id)
        analysis = run_understanding(state, metered_provider(p.provider, settings, state, p.session_dir),
                                     Path(p.session_dir), p.repo, p.requirement, p.max_agents)
        return {"complexity": analysis.complexity, "sub_domains": [s.focus_area for s in analysis.sub_domains]}

    @payload_task(app, settings, CollabPlanArea)
    def plan_area(task: Task[Any, Any], p: CollabPlanArea) -> dict[str, Any]:
        state = states.session(p.session_id)

        def plan(attempt: Attempt) -> AreaArtifacts:
            # A spent budget raises BudgetExhaustedError (a ProviderError): a failure record, no retry.
            return run_area(state, metered_provider(p.provider, settings, state, p.session_dir), settings,
                            Path(p.session_dir), p.repo, p.focus_area, attempt.worker)

        outcome = run_header(task, state, settings, p.focus_area, plan, area_outcome,
                             done_fields=lambda artifacts: {"tasks": artifacts.plan["task_count"]})
        if outcome.status == "done" and state.recall(keys.FINALIZED_AT) is not None:
            # The callback already ran without this area (chord fired early): run it again, with the
            # coordinator's paths (this task's may be this worker's copy of the session folder).
            finalize_alone(app, state, Path(str(state.session_meta().session_dir)))
        return outcome.model_dump()

    @payload_task(app, settings, CollabFinalize, callback=True, retry_on=(OSError,))
    def finalize(task: Task[Any, Any], p: CollabFinalize) -> dict[str, Any]:
        return finalize_session(states.session(p.session_id), settings, Path(p.session_dir)).model_dump()
