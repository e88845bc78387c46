"""The steps of a lite plan, as workers run them: assess, explore one angle, synthesise, plan.

Each step calls the provider (its answer remembered in Redis before any file is
written, so a redelivered task writes the same bytes), verifies or validates
what came back, and saves. Exploration is shared with workflow sessions: it
writes into whatever folder it is given.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import BaseModel

from wfqueue import keys
from wfqueue.collab.steps import now_iso
from wfqueue.errors import ProviderError
from wfqueue.fsio import atomic_write_json, atomic_write_text
from wfqueue.lite.angle_repair import repair_assessment
from wfqueue.lite.finding_checks import verify_findings
from wfqueue.lite.models import AngleFindings, Assessment, ClarificationAnswer, LitePlanDraft, VerifiedExploration
from wfqueue.lite.render import AWAITING_NOTE, render_exploration, render_notes, render_plan
from wfqueue.lite.synthesis import MergedQuestion, core_files, manifest, merge_questions
from wfqueue.metering import usage_line, write_usage_file
from wfqueue.plan_check import check_plan, leaves_repository
from wfqueue.providers import AssessStep, ExploreAngleStep, LitePlanStep, Provider
from wfqueue.repair import Repair, break_cycles, fill_source, repair_tasks
from wfqueue.state import SessionStore
from wfqueue.tasks_file import dump_jsonl, parse_jsonl
from wfqueue.usage import PriceTable

MANIFEST_FILE = "explorations-manifest.json"
NOTES_FILE = "exploration-notes.md"
ANALYSIS_FILE = "requirement-analysis.json"
TASKS_FILE = "tasks.jsonl"
PLAN_FILE = "plan.md"


def run_assessment(state: SessionStore, provider: Provider, repo: str, requirement: str,
                   force_explore: bool) -> Assessment:
    """The assessment with its angles repaired (wfqueue.lite.angle_repair); the repaired one is what is
    remembered, with its repairs (``assessment_repairs``), for every later step to read."""
    cached = state.recall(keys.ASSESSMENT)
    if cached is None:
        answer = provider.run(AssessStep(session_id=state.session_id, repo=repo, requirement=requirement,
                                         force_explore=force_explore))
        assert isinstance(answer, Assessment)
        fixed, repairs = repair_assessment(answer, requirement, force_explore)
        cached = state.remember_once(keys.ASSESSMENT, with_repairs(fixed, repairs))
    return Assessment.model_validate_json(cached)


def assessment_repairs(state: SessionStore) -> list[Repair]:
    cached = state.recall(keys.ASSESSMENT)
    return recalled_repairs(cached) if cached is not None else []


def run_exploration(state: SessionStore, provider: Provider, output_dir: Path, repo: str, requirement: str,
                    angle: str, worker: str) -> VerifiedExploration:
    """Explore one angle, verify every finding against the code, write exploration-{angle}.md."""
    key = keys.exploration_key(angle)
    cached = state.recall(key)
    if cached is None:
        started = time.time()
        findings = provider.run(ExploreAngleStep(session_id=state.session_id, repo=repo, requirement=requirement,
                                                 angle=angle))
        assert isinstance(findings, AngleFindings)
        # The angle names files and keys: it is the one asked for, whatever the answer says.
        findings = findings if findings.angle == angle else findings.model_copy(update={"angle": angle})
        checks = verify_findings(Path(repo), findings)
        fresh = VerifiedExploration(findings=findings, checks=checks, provider=provider.name, timestamp=now_iso(),
                                    worker=worker, pid=os.getpid(), started_at=started, finished_at=time.time())
        cached = state.remember_once(key, fresh.model_dump_json())
    exploration = VerifiedExploration.model_validate_json(cached)
    atomic_write_text(output_dir / f"exploration-{angle}.md", render_exploration(exploration, requirement))
    return exploration


def explorations_for(state: SessionStore, angles: list[str]) -> tuple[list[VerifiedExploration], dict[str, str]]:
    """The angles that finished (from Redis) and why the others did not."""
    done, failed = [], {}
    for angle in angles:
        raw = state.recall(keys.exploration_key(angle))
        if raw is not None:
            done.append(VerifiedExploration.model_validate_json(raw))
        else:
            record = state.agent(angle)
            last = record.get("state", "never started")
            failed[angle] = str(record.get("error") or f"no result (last state: {last})")
    return done, failed


def run_synthesis(state: SessionStore, session_dir: Path, requirement: str,
                  shown_dir: Path | None = None) -> tuple[list[MergedQuestion], dict[str, str]]:
    """The manifest and the notes in ``session_dir``; the manifest names the files in ``shown_dir`` (the
    folder as the user sees it, when this is a worker's copy)."""
    assessment = Assessment.model_validate_json(state.recall(keys.ASSESSMENT) or "")
    explorations, failed = explorations_for(state, assessment.angles)
    timestamp = state.remember_once(keys.SYNTHESIZED_AT, now_iso())
    atomic_write_json(session_dir / MANIFEST_FILE, manifest(state.session_id, requirement, timestamp,
                                                            assessment.complexity, explorations,
                                                            str(shown_dir or session_dir), failed))
    questions = merge_questions(explorations)
    atomic_write_text(session_dir / NOTES_FILE, render_notes(requirement, timestamp, assessment, explorations,
                                                             core_files(explorations), questions, failed))
    return questions, failed


def repair_lite_draft(draft: LitePlanDraft, repo: str, session_id: str) -> tuple[LitePlanDraft, list[Repair]]:
    """Ids TASK-001.. in task order, files that exist, dependencies on tasks of the plan only, no cycle
    (a dependency on a later task that closes one is removed)."""
    root = Path(repo)
    tasks = fill_source(draft.tasks, tool="wfqueue-lite", session_id=session_id)
    tasks, repairs = repair_tasks(tasks, id_prefix="TASK-", id_range=(1, len(tasks)),
                                  exists=lambda rel: (root / rel).exists(), is_folder=lambda rel: (root / rel).is_dir(),
                                  leaves=leaves_repository(root),
                                  sequential=True)
    tasks, broken = break_cycles(tasks)
    return draft.model_copy(update={"tasks": tasks}), [*repairs, *broken]


def with_repairs(draft: BaseModel, repairs: list[Repair]) -> str:
    """A draft's JSON with its repairs under ``repairs`` (the draft models ignore the extra key)."""
    payload = json.loads(draft.model_dump_json(exclude_none=True))
    payload["repairs"] = [r.model_dump() for r in repairs]
    return json.dumps(payload, ensure_ascii=False)


def recalled_repairs(cached: str) -> list[Repair]:
    return [Repair.model_validate(r) for r in json.loads(cached).get("repairs", [])]


def run_planning(state: SessionStore, provider: Provider, session_dir: Path, repo: str, requirement: str,
                 answers: list[ClarificationAnswer], *, prices: PriceTable | None = None,
                 awaiting: bool = False) -> LitePlanDraft:
    """Plan from what was verified; write requirement-analysis.json, tasks.jsonl, plan.md (and, with
    ``prices``, usage.json and a usage line: this is the plan's last LLM step). ``awaiting``: plan.md says the
    plan awaits the user's acceptance."""
    assessment = Assessment.model_validate_json(state.recall(keys.ASSESSMENT) or "")
    explorations, failed = explorations_for(state, assessment.angles if assessment.needs_exploration else [])
    if not assessment.needs_exploration:
        failed = {}
    cached = state.recall(keys.LITE_PLAN)
    if cached is None:
        answer = provider.run(LitePlanStep(session_id=state.session_id, repo=repo, requirement=requirement,
                                           assessment=assessment, explorations=explorations, answers=answers))
        assert isinstance(answer, LitePlanDraft)
        # The repaired draft is what is remembered (the coordinator reads it back), with its repairs.
        fixed, repairs = repair_lite_draft(answer, repo, state.session_id)
        cached = state.remember_once(keys.LITE_PLAN, with_repairs(fixed, repairs))
    draft, repairs = LitePlanDraft.model_validate_json(cached), recalled_repairs(cached)
    draft, again = repair_lite_draft(draft, repo, state.session_id)  # a no-op unless the repository changed
    repairs = [*assessment_repairs(state), *repairs, *again]
    text = dump_jsonl(draft.tasks)
    loaded, problems = parse_jsonl(text, TASKS_FILE)
    problems += check_plan(loaded, Path(repo))
    if problems:  # only when the repository changed under a remembered plan: repairs leave nothing else
        raise ProviderError(
            "the plan does not validate: " + "; ".join(str(p) for p in problems[:5]),
            hint="the repository changed while it was planned: run `wfqueue lite-plan` again",
        )
    created = state.remember_once(keys.CREATED_AT, now_iso())
    atomic_write_json(session_dir / ANALYSIS_FILE, {
        "session_id": state.session_id,
        "original_requirement": requirement,
        "complexity": assessment.complexity,
        "exploration_angles": assessment.angles if assessment.needs_exploration else [],
        "total_explorations": len(explorations),
        "timestamp": created,
        "assessment": assessment.model_dump(mode="json"),
        "clarifications": [a.model_dump() for a in answers],
        "failed_angles": failed,
        "repairs": [r.model_dump() for r in repairs],
    })
    atomic_write_text(session_dir / TASKS_FILE, text)
    write_plan_md(state, session_dir, requirement, assessment, draft, failed, prices=prices,
                  status=AWAITING_NOTE if awaiting else None)
    return draft


def write_plan_md(state: SessionStore, session_dir: Path, requirement: str, assessment: Assessment,
                  draft: LitePlanDraft, failed: dict[str, str], *, prices: PriceTable | None = None,
                  status: str | None = None) -> None:
    """plan.md; with ``prices`` also usage.json and the usage line. The planning step's own calls are
    already recorded here: the metered provider records them before it hands the answer back."""
    created = state.remember_once(keys.CREATED_AT, now_iso())
    usage = usage_line(write_usage_file(state, prices, session_dir)) if prices is not None else None
    # The folder as the user finds it (the meta's, the coordinator's), not this worker's copy of it: the
    # command plan.md names works there, and the file's bytes do not depend on which worker wrote them.
    shown = Path(state.session_meta().session_dir or session_dir)
    atomic_write_text(session_dir / PLAN_FILE, render_plan(state.session_id, requirement, created, assessment,
                                                           draft.understanding, draft.tasks,
                                                           str(shown / TASKS_FILE), failed, usage=usage,
                                                           status=status, repairs=_recorded_repairs(session_dir)))


def _recorded_repairs(session_dir: Path) -> list[Repair]:
    """The repairs requirement-analysis.json records (none before it is written, or where it does not read)."""
    try:
        recorded = json.loads((session_dir / ANALYSIS_FILE).read_text(encoding="utf-8")).get("repairs", [])
        return [Repair.model_validate(r) for r in recorded]
    except (OSError, ValueError, AttributeError):
        return []
