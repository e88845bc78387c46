"""Finishing an interrupted collaborative plan from what is on disk and in Redis.

Used by `wfqueue resume` and by the stalled-session watchdog. Work that is
already done is never redone: an area counts as done when Redis holds its
result, or when this disk holds its plan.json, context and note sections (then
Redis is re-seeded from the disk, e.g. after Redis lost its data).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from celery import Celery
from celery.result import AsyncResult

from wfqueue import keys
from wfqueue.collab.assemble import AreaArtifacts
from wfqueue.collab.models import RequirementAnalysis
from wfqueue.collab.note import parse_note
from wfqueue.collab.steps import ANALYSIS_FILE, NOTE_FILE, agent_dir
from wfqueue.errors import InfrastructureError
from wfqueue.fanout import fan_out
from wfqueue.keys import AgentState
from wfqueue.payloads import CollabFinalize, CollabPlanArea
from wfqueue.state import SessionStore


def load_or_seed_analysis(state: SessionStore, session_dir: Path) -> RequirementAnalysis | None:
    stored = state.recall(keys.ANALYSIS)
    if stored is not None:
        return RequirementAnalysis.model_validate_json(stored)
    path = session_dir / ANALYSIS_FILE
    if not path.is_file():
        return None
    analysis = RequirementAnalysis.model_validate_json(path.read_text(encoding="utf-8"))
    state.store(keys.ANALYSIS, analysis.model_dump_json())
    return analysis


def reseed_from_disk(state: SessionStore, session_dir: Path, analysis: RequirementAnalysis) -> list[str]:
    """Put areas finished on this disk but unknown to Redis back into Redis; returns their names."""
    note_path = session_dir / NOTE_FILE
    note = parse_note(note_path.read_text(encoding="utf-8")) if note_path.is_file() else None
    seeded = []
    for sub in analysis.sub_domains:
        if state.recall(keys.result_key(sub.focus_area)) is not None or note is None:
            continue
        folder = agent_dir(session_dir, sub.focus_area)
        pool, evidence = note.section(sub.task_pool_heading), note.section(sub.evidence_heading)
        if not ((folder / "plan.json").is_file() and (folder / "planning-context.md").is_file() and pool and evidence):
            continue
        if "TASK-" not in pool.body:  # still the template's placeholder, or a failure marker
            continue
        artifacts = AreaArtifacts(
            focus_area=sub.focus_area,
            plan=json.loads((folder / "plan.json").read_text(encoding="utf-8")),
            planning_context=(folder / "planning-context.md").read_text(encoding="utf-8"),
            task_pool=pool.body,
            evidence=evidence.body,
        )
        state.remember_once(keys.result_key(sub.focus_area), artifacts.model_dump_json())
        state.put_section(sub.task_pool_heading, pool.body)
        state.put_section(sub.evidence_heading, evidence.body)
        state.set_agent(sub.focus_area, state=AgentState.DONE)
        seeded.append(sub.focus_area)
    return seeded


def missing_areas(state: SessionStore, analysis: RequirementAnalysis) -> list[str]:
    return [s.focus_area for s in analysis.sub_domains if state.recall(keys.result_key(s.focus_area)) is None]


def finalize_alone(app: Celery, state: SessionStore, session_dir: Path) -> AsyncResult[Any]:
    """The callback without a header (no area results: it reads them from Redis)."""
    return CollabFinalize(session_id=state.session_id, session_dir=str(session_dir),
                          transport=state.session_meta().transport).send_alone(app)


def enqueue_missing(app: Celery, state: SessionStore, session_dir: Path, analysis: RequirementAnalysis,
                    provider: str) -> AsyncResult[Any]:
    """A chord of the areas without a result, then the callback (the callback alone if none is missing)."""
    missing = missing_areas(state, analysis)
    for area in missing:
        state.set_agent(area, state=AgentState.QUEUED, error=None)
    if not missing:
        return finalize_alone(app, state, session_dir)
    meta = state.session_meta()  # the coordinator wrote the repository and, with no shared disk, the transport
    header = [CollabPlanArea(session_id=state.session_id, session_dir=str(session_dir), repo=str(meta.repo),
                             focus_area=area, provider=provider, transport=meta.transport) for area in missing]
    return fan_out(app, state, header, CollabFinalize(session_id=state.session_id, session_dir=str(session_dir),
                                               transport=meta.transport))


def missing_work(state: SessionStore, session_dir: Path) -> list[str]:
    """The areas without a result; every area's work when the split itself is missing."""
    analysis = load_or_seed_analysis(state, session_dir)
    return ["understanding"] if analysis is None else missing_areas(state, analysis)


class CollabRecovery:
    """What the watchdog may do for a stalled collaborative plan (``WatchdogRecovery``)."""

    def watched(self, state: SessionStore, session_dir: Path) -> list[str] | None:
        analysis = load_or_seed_analysis(state, session_dir)
        return None if analysis is None else [s.focus_area for s in analysis.sub_domains]

    def reenqueue(self, app: Celery, state: SessionStore, session_dir: Path,
                  provider: str) -> tuple[list[str], AsyncResult[Any]]:
        analysis = load_or_seed_analysis(state, session_dir)
        if analysis is None:  # watched() found one; it is gone from Redis and disk since
            raise InfrastructureError(f"{state.session_id}: the requirement analysis disappeared")
        missing = missing_areas(state, analysis)
        return missing, enqueue_missing(app, state, session_dir, analysis, provider)

    def finalize(self, app: Celery, state: SessionStore, session_dir: Path) -> None:
        finalize_alone(app, state, session_dir)
