"""Workflow-session tasks: the context package (callback of the exploration chord),
conflict detection, task generation. Exploration itself is the shared
``wfqueue.explore.angle`` task (workers/lite.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery import Celery, Task

from wfqueue.errors import TransientProviderError
from wfqueue.payloads import SessionConflicts, SessionContext, SessionGenerate
from wfqueue.settings import Settings
from wfqueue.transport.workspace import shown_session_dir
from wfqueue.usage import PriceTable
from wfqueue.workflow_session.steps import run_conflict_detection, run_context_phase, run_generation
from workers.context import StateFactory, metered_provider
from workers.registry import payload_task


def register(app: Celery, settings: Settings) -> None:
    states = StateFactory(settings)
    prices = PriceTable(settings.price_table)

    @payload_task(app, settings, SessionContext, callback=True, retry_on=(OSError,))
    def context(task: Task[Any, Any], p: SessionContext) -> dict[str, Any]:
        return {"risk_level": run_context_phase(states.session(p.session_id), Path(p.session_dir), p.repo,
                                                shown_session_dir(p.transport, p.session_dir),
                                                max_file_bytes=settings.index_max_file_bytes,
                                                max_files=settings.index_max_files)}

    @payload_task(app, settings, SessionConflicts, retry_on=(TransientProviderError,))
    def conflicts(task: Task[Any, Any], p: SessionConflicts) -> list[dict[str, Any]]:
        state = states.session(p.session_id)
        found = run_conflict_detection(state, metered_provider(p.provider, settings, state, p.session_dir),
                                       Path(p.session_dir), p.repo)
        return [c.model_dump(mode="json") for c in found]

    @payload_task(app, settings, SessionGenerate, retry_on=(TransientProviderError,))
    def generate(task: Task[Any, Any], p: SessionGenerate) -> dict[str, Any]:
        state = states.session(p.session_id)
        draft = run_generation(state, metered_provider(p.provider, settings, state, p.session_dir),
                               Path(p.session_dir), p.repo, prices=prices)
        return {"tasks": [t.id for t in draft.tasks]}
