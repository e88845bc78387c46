"""The chord callback: merge every section, detect conflicts, write the final files.

It does not trust the chord: which agents finished is read from Redis, not from
the results the chord handed over, so firing twice, early, or after a
redelivered header task yields the same files. The final plan-note.md is built
from this host's file (hand edits, unknown sections) with every owned section
taken from Redis, so sections written on other machines are not lost. It also
totals the session's LLM usage (usage.json, the Cost section of plan.md).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from wfqueue import keys
from wfqueue.collab.assemble import AreaArtifacts
from wfqueue.collab.conflicts import detect_conflicts
from wfqueue.collab.models import AgentOutcome, Conflict, ConflictReport, NoteTask, RequirementAnalysis
from wfqueue.collab.note import (
    CONFLICT_HEADING,
    DEPENDENCY_HEADING,
    REQUIREMENT_HEADING,
    PlanNote,
    parse_note,
    render_note,
    replace_section,
)
from wfqueue.collab.note_blocks import (
    note_tasks,
    render_conflicts,
    render_dependencies,
    render_failed_area,
)
from wfqueue.collab.steps import (
    CONFLICTS_FILE,
    NOTE_FILE,
    SUMMARY_FILE,
    area_results,
    failure_reason,
    load_analysis,
    now_iso,
    template_note,
    write_area_files,
)
from wfqueue.collab.summary import NO_TASK, PlanSummaryInput, render_plan_md
from wfqueue.fsio import atomic_write_json, atomic_write_text, locked_update
from wfqueue.metering import write_usage_file
from wfqueue.repair import Repair
from wfqueue.settings import Settings
from wfqueue.state import SessionStore
from wfqueue.usage import PriceTable


class FinalResult(BaseModel):
    session_id: str
    status: str
    tasks: int
    conflicts: int
    failed_areas: list[str]
    problems: list[str]


def merge_note(
    base: PlanNote, analysis: RequirementAnalysis, sections: dict[str, str], failures: dict[str, str]
) -> PlanNote:
    """Owned sections from Redis over the file's; failed areas say why. Pure."""
    note = base
    for sub in analysis.sub_domains:
        if sub.focus_area in failures:
            note = replace_section(note, sub.task_pool_heading,
                                   render_failed_area(sub.focus_area, failures[sub.focus_area]))
            continue
        for heading in (sub.task_pool_heading, sub.evidence_heading):
            if heading in sections:
                note = replace_section(note, heading, sections[heading])
    return note


def owned_sections(analysis: RequirementAnalysis, results: dict[str, AreaArtifacts]) -> dict[str, str]:
    """Each finished area's two sections, from its stored result. Pure."""
    sections = {}
    for sub in analysis.sub_domains:
        if (artifacts := results.get(sub.focus_area)) is not None:
            sections[sub.task_pool_heading] = artifacts.task_pool
            sections[sub.evidence_heading] = artifacts.evidence
    return sections


def note_status(failed: bool, tasks: int, conflicts: int) -> str:
    """failed: no task was planned (agents failed, or every agent answered with none: a plan of nothing said
    "completed", and execute sent the user to a resume that had nothing to do); partial: agents failed, some
    area was planned."""
    if not tasks:
        return "failed"
    if failed:
        return "partial"
    return "conflicts_detected" if conflicts else "completed"


class FinalNote(BaseModel):
    note: PlanNote
    tasks: list[NoteTask]
    conflicts: list[Conflict]
    problems: list[str]
    status: str


def build_final_note(
    current: str,
    template: str,
    analysis: RequirementAnalysis,
    sections: dict[str, str],
    failures: dict[str, str],
    contributors: list[str],
) -> FinalNote:
    """The final plan-note: merged sections, dependencies, conflicts, status. Pure."""
    note = merge_note(parse_note(current), analysis, sections, failures)
    if not note.front_matter:  # a hand edit lost the front matter: rebuild it from the template
        note = note.model_copy(update={"front_matter": parse_note(template).front_matter})
    tasks, found = note_tasks(note)
    problems = [str(p) for p in found] + ([NO_TASK] if not tasks and not failures else [])
    ranges = {s.focus_area: s.task_id_range for s in analysis.sub_domains}
    conflicts = detect_conflicts(tasks, ranges)
    note = replace_section(note, DEPENDENCY_HEADING, render_dependencies(tasks))
    note = replace_section(note, CONFLICT_HEADING, render_conflicts(conflicts))
    status = note_status(bool(failures), len(tasks), len(conflicts))
    front = {**note.front_matter, "contributors": contributors, "status": status}
    return FinalNote(
        note=note.model_copy(update={"front_matter": front}),
        tasks=tasks,
        conflicts=conflicts,
        problems=problems,
        status=status,
    )


def finalize_session(state: SessionStore, settings: Settings, session_dir: Path) -> FinalResult:
    analysis = load_analysis(state, session_dir)
    results = area_results(state, analysis)
    for artifacts in results.values():  # a worker on another disk wrote these elsewhere
        write_area_files(session_dir, artifacts)
    failures = {
        sub.focus_area: failure_reason(state, sub.focus_area)
        for sub in analysis.sub_domains
        if sub.focus_area not in results
    }
    # A result stored without its sections (the agent stopped in between) still brings them.
    sections = {**owned_sections(analysis, results), **state.sections()}
    template = template_note(state, session_dir)
    detected_at = state.remember_once(keys.FINALIZED_AT, now_iso())
    created_at = state.remember_once(keys.CREATED_AT, now_iso())
    built: list[FinalNote] = []

    def update(current: str | None) -> str:
        built.append(build_final_note(current or template, template, analysis, sections, failures, sorted(results)))
        return render_note(built[-1].note)

    locked_update(session_dir / NOTE_FILE, update, settings.lock_timeout_s)
    final = built[-1]
    report = ConflictReport(
        detected_at=detected_at,
        total_tasks=len(final.tasks),
        total_agents=len(analysis.sub_domains),
        conflicts=final.conflicts,
    )
    atomic_write_json(session_dir / CONFLICTS_FILE, report.model_dump(mode="json", exclude_none=True))
    requirement = final.note.section(REQUIREMENT_HEADING)
    # Every agent recorded its calls before its result: the totals are complete here. usage.json is
    # what `wfqueue status` reads once an embedded Redis is gone.
    usage = write_usage_file(state, PriceTable(settings.price_table), session_dir)
    outcomes = [
        AgentOutcome(focus_area=s.focus_area, status="failed", error=failures[s.focus_area])
        if s.focus_area in failures
        else AgentOutcome(focus_area=s.focus_area, status="done", task_count=results[s.focus_area].plan["task_count"])
        for s in analysis.sub_domains
    ]
    summary = PlanSummaryInput(
        analysis=analysis,
        created_at=created_at,
        requirement_body=requirement.body if requirement else "",
        tasks=final.tasks,
        conflicts=final.conflicts,
        outcomes=outcomes,
        status=final.status,
        problems=final.problems,
        usage=usage,
        agent_repairs=[Repair.model_validate(r) for s in analysis.sub_domains if s.focus_area in results
                       for r in results[s.focus_area].plan.get("_metadata", {}).get("repairs", [])],
    )
    # The folder as the user finds it (the meta's), not this worker's copy: the same bytes whichever worker writes.
    shown = state.session_meta().session_dir or str(session_dir)
    atomic_write_text(session_dir / SUMMARY_FILE, render_plan_md(summary, shown))
    result = FinalResult(
        session_id=analysis.session_id,
        status=final.status,
        tasks=len(final.tasks),
        conflicts=len(final.conflicts),
        failed_areas=sorted(failures),
        problems=final.problems,
    )
    state.store(keys.FINAL, result.model_dump_json())
    state.set_meta(status=result.status)
    return result
