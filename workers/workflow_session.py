"""Workflow-session tasks: the context package (callback of the exploration chord),
conflict detection, task generation. Exploration itself is the shared
``wfqueue.explore.angle`` task (workers/lite.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, Task

from wfqueue.errors import TransientProviderError
from wfqueue.settings import Settings
from wfqueue.task_names import SESSION_CONFLICTS, SESSION_CONTEXT, SESSION_GENERATE
from wfqueue.usage import PriceTable
from wfqueue.workflow_session.steps import run_conflict_detection, run_context_phase, run_generation
from workers.context import StateFactory, metered_provider, retry_later


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)
    prices = PriceTable(settings.price_table)

    @app.task(name=SESSION_CONTEXT, bind=True, max_retries=settings.task_max_retries)
    def context(self: Task[Any, Any], outcomes: list[dict[str, Any]], session_id: str, session_dir: str,
                repo: str) -> dict[str, Any]:
        # ``outcomes`` (the angles' records) is informative: finished angles are read from Redis.
        try:
            risk = run_context_phase(states.session(session_id), Path(session_dir), repo)
        except OSError as exc:
            raise retry_later(self, exc, settings) from None
        return {"risk_level": risk}

    @app.task(name=SESSION_CONFLICTS, bind=True, max_retries=settings.task_max_retries)
    def conflicts(self: Task[Any, Any], session_id: str, session_dir: str, repo: str,
                  provider: str) -> list[dict[str, Any]]:
        state = states.session(session_id)
        try:
            found = run_conflict_detection(state, metered_provider(provider, settings, state, session_dir),
                                           Path(session_dir), repo)
        except TransientProviderError as exc:
            raise retry_later(self, exc, settings) from None
        return [c.model_dump(mode="json") for c in found]

    @app.task(name=SESSION_GENERATE, bind=True, max_retries=settings.task_max_retries)
    def generate(self: Task[Any, Any], session_id: str, session_dir: str, repo: str, provider: str) -> dict[str, Any]:
        state = states.session(session_id)
        try:
            draft = run_generation(state, metered_provider(provider, settings, state, session_dir), Path(session_dir),
                                   repo, prices=prices)
        except TransientProviderError as exc:
            raise retry_later(self, exc, settings) from None
        return {"tasks": [t.id for t in draft.tasks]}
