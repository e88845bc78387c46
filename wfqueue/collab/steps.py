"""The three steps of a collaborative plan, as the workers run them.

Each step decodes its inputs, calls the pure logic, and saves: files atomically,
shared state in Redis. Each is idempotent: a provider answer is remembered in
Redis before any file is written (first answer wins), so a redelivered task
writes the same bytes again instead of planning twice.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from wfqueue import keys
from wfqueue.collab.assemble import AreaArtifacts, allocate, assemble_area
from wfqueue.collab.models import AreaDraft, PlanMetadata, RequirementAnalysis, UnderstandingDraft
from wfqueue.collab.note import build_template, parse_note, render_note, replace_section, replace_section_bodies
from wfqueue.collab.note_blocks import render_understanding
from wfqueue.collab.split import Split, repair_split, settle_split, split_feedback
from wfqueue.errors import BudgetExhaustedError, ProviderError, TransientProviderError
from wfqueue.fsio import atomic_write_json, atomic_write_text, locked_update
from wfqueue.keys import AgentState
from wfqueue.per_process import PerProcess
from wfqueue.plan_check import leaves_repository
from wfqueue.providers import PlanAreaStep, Provider, UnderstandStep
from wfqueue.repair import IdRanges, Repair, fill_source, repair_tasks
from wfqueue.settings import Settings
from wfqueue.state import SessionStore

ANALYSIS_FILE = "requirement-analysis.json"
NOTE_FILE = "plan-note.md"
CONFLICTS_FILE = "conflicts.json"
SUMMARY_FILE = "plan.md"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def agent_dir(session_dir: Path, focus_area: str) -> Path:
    return session_dir / "agents" / focus_area


# Every agent of a session reads the same analysis; with 100 areas, validating it again in each of 100
# threads of one worker was a tenth of the worker's CPU. Keyed by the text, so a changed analysis is read anew.
_analyses: PerProcess[str, RequirementAnalysis] = PerProcess(keep=8)


def load_analysis(state: SessionStore, session_dir: Path) -> RequirementAnalysis:
    """Redis first (the same on every host), then this host's file. The same object for the same text in
    one process: callers treat it as read-only (they derive copies)."""
    stored = state.recall(keys.ANALYSIS)
    text = stored if stored is not None else (session_dir / ANALYSIS_FILE).read_text(encoding="utf-8")
    return _analyses.get(text, lambda: RequirementAnalysis.model_validate_json(text))


def understand_answer(state: SessionStore, provider: Provider, step: UnderstandStep) -> UnderstandingDraft:
    """The provider's answer to ``step``, asked once per session and attempt: each attempt's answer is
    kept in Redis under its own key, so a redelivered task never pays for the same call again."""
    key = keys.understanding_key(step.attempt)
    cached = state.recall(key)
    if cached is None:
        cached = state.remember_once(key, provider.run(step).model_dump_json())
    return UnderstandingDraft.model_validate_json(cached)


def repaired_split(
    state: SessionStore, provider: Provider, repo: str, requirement: str, max_agents: int
) -> tuple[UnderstandingDraft, Split]:
    """The understanding answer and its repaired split; fewer than 2 sub-domains get one repair round."""
    first_step = UnderstandStep(session_id=state.session_id, repo=repo, requirement=requirement, max_agents=max_agents)
    draft = understand_answer(state, provider, first_step)
    split = repair_split(draft, max_agents)
    if split.usable:
        return draft, split
    feedback = split_feedback(split, max_agents)
    try:
        again = understand_answer(state, provider, first_step.model_copy(update={"feedback": feedback, "attempt": 2}))
    except (TransientProviderError, BudgetExhaustedError):
        raise  # retried later / stops the plan: a failed repair round is not a reason to give up a split
    except ProviderError as exc:
        # The first answer is still plannable: with one agent, saying why.
        return draft, settle_split(split, feedback, None, failure=exc.message)
    return again, settle_split(split, feedback, repair_split(again, max_agents))


def run_understanding(
    state: SessionStore, provider: Provider, session_dir: Path, repo: str, requirement: str, max_agents: int
) -> RequirementAnalysis:
    """Split the requirement; write requirement-analysis.json and the plan-note template."""
    draft, split = repaired_split(state, provider, repo, requirement, max_agents)
    analysis = allocate(draft, state.session_id, requirement, max_agents, split=split)
    created_at = state.remember_once(keys.CREATED_AT, now_iso())
    template = render_note(build_template(analysis, created_at, render_understanding(analysis.understanding)))
    state.remember_once(keys.TEMPLATE, template)
    # The analysis is rewritten on purpose: an adjusted split replaces the previous one.
    state.store(keys.ANALYSIS, analysis.model_dump_json())
    for sub in analysis.sub_domains:
        agent_dir(session_dir, sub.focus_area).mkdir(parents=True, exist_ok=True)
    atomic_write_json(session_dir / ANALYSIS_FILE, analysis.model_dump(mode="json"))
    atomic_write_text(session_dir / NOTE_FILE, template)
    return analysis


def write_area_files(session_dir: Path, artifacts: AreaArtifacts) -> None:
    folder = agent_dir(session_dir, artifacts.focus_area)
    atomic_write_json(folder / "plan.json", artifacts.plan)
    atomic_write_text(folder / "planning-context.md", artifacts.planning_context)


def template_note(state: SessionStore, session_dir: Path) -> str:
    template = state.recall(keys.TEMPLATE)
    if template is not None:
        return template
    return (session_dir / NOTE_FILE).read_text(encoding="utf-8")


def repair_area(
    analysis: RequirementAnalysis, focus_area: str, draft: AreaDraft, repo: str
) -> tuple[AreaDraft, list[Repair]]:
    """The draft with ids inside the agent's range, files that exist, and known dependencies.

    Dependencies on ids of other agents' ranges are kept (collab tasks may depend on
    each other's work); cycles are left for conflict detection to report."""
    sub = analysis.area(focus_area)
    external = IdRanges("TASK-", [other.task_id_range for other in analysis.sub_domains
                                  if other.focus_area != focus_area])
    root = Path(repo)
    tasks = fill_source(draft.tasks, tool="wfqueue-collab", session_id=analysis.session_id)
    tasks, repairs = repair_tasks(tasks, id_prefix="TASK-", id_range=sub.task_id_range,
                                  exists=lambda rel: (root / rel).exists(), is_folder=lambda rel: (root / rel).is_dir(),
                                  leaves=leaves_repository(root),
                                  known_external_ids=external)
    return draft.model_copy(update={"tasks": tasks}), repairs


def run_area(
    state: SessionStore,
    provider: Provider,
    settings: Settings,
    session_dir: Path,
    repo: str,
    focus_area: str,
    worker_name: str,
) -> AreaArtifacts:
    """Plan one sub-domain and write its files and its two sections of plan-note.md."""
    analysis = load_analysis(state, session_dir)
    sub = analysis.area(focus_area)
    cached = state.recall(keys.result_key(focus_area))
    if cached is None:
        draft = provider.run(
            PlanAreaStep(
                session_id=state.session_id,
                repo=repo,
                requirement=analysis.original_requirement,
                analysis=analysis,
                focus_area=focus_area,
            )
        )
        assert isinstance(draft, AreaDraft)
        draft, repairs = repair_area(analysis, focus_area, draft, repo)
        metadata = PlanMetadata(
            timestamp=now_iso(),
            provider=provider.name,
            model=provider.model,
            worker=worker_name,
            pid=os.getpid(),
            host=socket.gethostname(),
            repairs=[r.model_dump() for r in repairs],
        )
        fresh = assemble_area(analysis, focus_area, draft, metadata)
        cached = state.remember_once(keys.result_key(focus_area), fresh.model_dump_json())
    artifacts = AreaArtifacts.model_validate_json(cached)
    # Redis holds each section for the callback, before any file is written: a write that fails (a
    # read-only or full disk) must not leave an area that counts as done without its sections.
    state.put_section(sub.task_pool_heading, artifacts.task_pool)
    state.put_section(sub.evidence_heading, artifacts.evidence)
    write_area_files(session_dir, artifacts)

    bodies = {sub.task_pool_heading: artifacts.task_pool, sub.evidence_heading: artifacts.evidence}

    def update(current: str | None) -> str:
        spliced = None if current is None else replace_section_bodies(current, bodies)
        if spliced is not None:
            return spliced
        note = parse_note(current if current is not None else template_note(state, session_dir))
        for heading, body in bodies.items():
            note = replace_section(note, heading, body)
        return render_note(note)

    locked_update(session_dir / NOTE_FILE, update, settings.lock_timeout_s)
    return artifacts


def area_results(state: SessionStore, analysis: RequirementAnalysis) -> dict[str, AreaArtifacts]:
    """Every agent result recorded in Redis, by focus area."""
    found = {}
    for sub in analysis.sub_domains:
        raw = state.recall(keys.result_key(sub.focus_area))
        if raw is not None:
            found[sub.focus_area] = AreaArtifacts.model_validate_json(raw)
    return found


def failure_reason(state: SessionStore, focus_area: str) -> str:
    record = state.agent(focus_area)
    if record.get("state") == AgentState.FAILED:
        return str(record.get("error") or "failed without a message")
    return f"no result recorded (last state: {record.get('state', 'never started')})"


def dumps(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


CANCELLED = "cancelled"  # plan-note.md's status once the user said no to the split


def mark_cancelled(session_dir: Path, lock_timeout_s: float) -> None:
    """The user cancelled at the split: plan-note.md's status says so, for `status` and `resume` to read after
    Redis has forgotten the session (the note is the session's record on disk)."""
    def update(current: str | None) -> str:
        note = parse_note(current or "")
        return render_note(note.model_copy(update={"front_matter": {**note.front_matter, "status": CANCELLED}}))

    locked_update(session_dir / NOTE_FILE, update, lock_timeout_s)


UNFINISHED = ("understanding", "planning")  # plan-note.md's status until the callback has written the plan


def note_status(session_dir: Path) -> str | None:
    """The status plan-note.md's front matter gives (None: no note to read)."""
    try:
        text = (session_dir / NOTE_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    status = parse_note(text).front_matter.get("status")
    return None if status is None else str(status)


def is_cancelled(session_dir: Path) -> bool:
    """Whether plan-note.md says the user cancelled the plan at its split."""
    return note_status(session_dir) == CANCELLED
