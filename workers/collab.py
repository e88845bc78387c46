"""Collaborative-plan tasks: understand, plan one area (chord header), finalize (callback).

Thin on purpose: decode arguments, call wfqueue.collab.steps/finalize, record
progress, decide on retry. A header task never raises out of the chord: after
its retries it returns a failure record, so the callback always runs. Providers
are metered (workers/context.py): every call is recorded, and a spent budget
stops an agent before it calls the model.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded

from wfqueue import keys
from wfqueue.collab.finalize import finalize_session
from wfqueue.collab.models import AgentOutcome
from wfqueue.collab.steps import run_area, run_understanding
from wfqueue.errors import ProviderError, TransientProviderError, WfqueueError
from wfqueue.keys import AgentState
from wfqueue.settings import Settings
from wfqueue.task_names import COLLAB_FINALIZE, COLLAB_PLAN_AREA, COLLAB_UNDERSTAND
from workers.context import StateFactory, may_retry, metered_provider, retry_later


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)

    @app.task(name=COLLAB_UNDERSTAND, bind=True, max_retries=settings.task_max_retries)
    def understand(
        self: Task[Any, Any], session_id: str, session_dir: str, repo: str, requirement: str, max_agents: int,
        provider: str
    ) -> dict[str, Any]:
        state = states.session(session_id)
        try:
            analysis = run_understanding(
                state, metered_provider(provider, settings, state, session_dir), Path(session_dir), repo, requirement,
                max_agents
            )
        except TransientProviderError as exc:
            raise retry_later(self, exc, settings) from None
        return {"complexity": analysis.complexity, "sub_domains": [s.focus_area for s in analysis.sub_domains]}

    @app.task(name=COLLAB_PLAN_AREA, bind=True, max_retries=settings.task_max_retries)
    def plan_area(self: Task[Any, Any], session_id: str, session_dir: str, focus_area: str,
                  provider: str) -> dict[str, Any]:
        state = states.session(session_id)
        worker = self.request.hostname or "unknown"
        attempts = state.count_attempt(focus_area)
        state.set_agent(focus_area, state=AgentState.RUNNING, worker=worker, pid=os.getpid(), started_at=time.time(),
                        attempts=attempts, error=None)

        def failed(reason: str) -> dict[str, Any]:
            state.set_agent(focus_area, state=AgentState.FAILED, error=reason, finished_at=time.time())
            return AgentOutcome(focus_area=focus_area, status="failed", error=reason, worker=worker,
                                pid=os.getpid(), attempts=attempts).model_dump()

        try:
            # A spent budget raises BudgetExhaustedError (a ProviderError): a failure record, no retry.
            artifacts = run_area(state, metered_provider(provider, settings, state, session_dir), settings,
                                 Path(session_dir), focus_area, worker)
        except SoftTimeLimitExceeded:
            return failed(f"timed out after the {settings.agent_soft_time_limit_s}s soft time limit")
        except ProviderError as exc:
            if isinstance(exc, TransientProviderError) and may_retry(self):
                state.set_agent(focus_area, state=AgentState.QUEUED, error=f"retrying: {exc.message}")
                raise retry_later(self, exc, settings) from None
            return failed(exc.message)
        except Exception as exc:  # noqa: BLE001 - anything else: retry, then a failure record
            if may_retry(self) and not isinstance(exc, WfqueueError):
                state.set_agent(focus_area, state=AgentState.QUEUED, error=f"retrying: {type(exc).__name__}: {exc}")
                raise retry_later(self, exc, settings) from None
            return failed(f"{type(exc).__name__}: {exc}")
        state.set_agent(focus_area, state=AgentState.DONE, finished_at=time.time(), tasks=artifacts.plan["task_count"])
        if state.recall(keys.FINALIZED_AT) is not None:
            # The callback already ran without this area (chord fired early): run it again.
            app.send_task(COLLAB_FINALIZE, args=[[], session_id, session_dir])
        return AgentOutcome(focus_area=focus_area, status="done", task_count=artifacts.plan["task_count"],
                            worker=worker, pid=os.getpid(), attempts=attempts).model_dump()

    @app.task(name=COLLAB_FINALIZE, bind=True, max_retries=settings.task_max_retries)
    def finalize(self: Task[Any, Any], outcomes: list[dict[str, Any]], session_id: str,
                 session_dir: str) -> dict[str, Any]:
        # ``outcomes`` (the chord's header results) is informative only: Redis is the truth.
        state = states.session(session_id)
        try:
            return finalize_session(state, settings, Path(session_dir)).model_dump()
        except OSError as exc:
            raise retry_later(self, exc, settings) from None
