"""Markdown of a workflow session: IMPL_PLAN.md, TODO_LIST.md, planning-notes.md. Pure."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from wfqueue.markdown import table_cell as _one
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import ContextPackage, PlanOverview, WorkflowSession

SUMMARY_DIR = ".summaries"


def critical_path(tasks: list[UnifiedTask]) -> list[str]:
    """The longest chain of dependencies (ties: lowest ids), ignoring unknown ids and cycles."""
    by_id = {t.id: t for t in tasks}
    best: dict[str, list[str]] = {}

    def chain(task_id: str, seen: frozenset[str]) -> list[str]:
        if task_id in best:
            return best[task_id]
        deps = [d for d in by_id[task_id].depends_on if d in by_id and d not in seen]
        longest = max((chain(d, seen | {task_id}) for d in deps), key=len, default=[])
        best[task_id] = [*longest, task_id]
        return best[task_id]

    return max((chain(t.id, frozenset()) for t in tasks), key=len, default=[])


def execution_strategy(tasks: list[UnifiedTask]) -> str:
    if not any(t.depends_on for t in tasks):
        return "Parallel"
    path = critical_path(tasks)
    return "Sequential" if len(path) == len(tasks) else "Phased"


# The counts wfqueue's own planners write into plan.json's summary and approach
# (wfqueue.providers.offline): "{goal}: 2 task(s), ...", "Parallel execution over 3 file(s); ...".
_TASK_COUNT = re.compile(r"\b\d+ task\(s\)")
_STRATEGY_OVER_FILES = re.compile(r"\b(?:Parallel|Sequential|Phased) execution over \d+ file\(s\)")


def recount(text: str, tasks: list[UnifiedTask]) -> str:
    """``text`` with the task count, strategy and file count of those phrases taken from ``tasks``, so a summary
    written at planning time agrees with the plan after a replan; other prose is left as it is."""
    files = len({f.path for t in tasks for f in t.files})
    text = _TASK_COUNT.sub(f"{len(tasks)} task(s)", text)
    return _STRATEGY_OVER_FILES.sub(f"{execution_strategy(tasks)} execution over {files} file(s)", text)


def waves(tasks: list[UnifiedTask]) -> list[list[str]]:
    """Tasks grouped by dependency depth: wave n needs only waves before it."""
    known = {t.id for t in tasks}
    depth: dict[str, int] = {}
    remaining = {t.id: [d for d in t.depends_on if d in known] for t in tasks}
    level = 0
    while remaining:
        ready = sorted((tid for tid, deps in remaining.items() if all(d in depth for d in deps)),
                       key=lambda i: [int(p) for p in i.split("-", 1)[1].split(".")])
        if not ready:  # a cycle: put the rest in a last wave rather than loop forever
            ready = sorted(remaining)
        for tid in ready:
            depth[tid] = level
            remaining.pop(tid)
        level += 1
    return [[tid for tid, d in depth.items() if d == n] for n in range(level)]


def render_impl_plan(session: WorkflowSession, overview: PlanOverview, tasks: list[UnifiedTask],
                     context: ContextPackage, constraints: list[str]) -> str:
    risk = context.conflict_detection.risk_level
    strategy = execution_strategy(tasks)
    path = critical_path(tasks)
    structured = session.structured
    lines = [
        "---",
        f"session_id: {session.session_id}",
        f"title: {_one(structured.goal if structured else session.description)}",
        f"created_at: {session.created_at}",
        f"complexity: {overview.complexity or 'Medium'}",
        f"task_count: {len(tasks)}",
        f"execution_strategy: {strategy}",
        f"conflict_risk: {risk}",
        "---",
        "",
        f"# Implementation Plan: {_one(structured.goal if structured else session.description)}",
        "",
        "## 1. Summary",
        "",
        _one(overview.summary),
        "",
    ]
    usage = (overview.metadata.model_extra or {}).get("usage")
    if isinstance(usage, dict) and usage.get("summary"):  # written by the task generation (wfqueue.metering)
        lines += [f"Planning LLM usage (cost estimated from the price_table setting): {_one(usage['summary'])}", ""]
    lines += [
        "## 2. Context Analysis",
        "",
    ]
    critical = context.critical_files()
    lines += [f"- Critical file: `{f}`" for f in critical[:10]] or ["- No critical files identified."]
    lines += [f"- Conflict risk: {risk}" + (f" ({_one(context.conflict_detection.mitigation_strategy)})"
                                             if context.conflict_detection.mitigation_strategy else "")]
    lines += ["", "## 3. Brainstorming Artifacts", "",
              "- `planning-notes.md` (user intent, findings, decisions)",
              "- `.process/context-package.json`, `.process/exploration-*.json`"]
    if risk == "resolved":
        lines.append("- `.process/conflict-resolution.json` (strategies chosen for detected conflicts)")
    lines += ["", "## 4. Implementation Strategy", "", f"**Execution**: {strategy}",
              f"**Critical path**: {' → '.join(path) if path else '-'}", "", _one(overview.approach), ""]
    # The user's own constraints first (verify looks for each of them here), then the chosen strategies'.
    stated = list(dict.fromkeys([*(structured.constraints if structured else []), *constraints]))
    if stated:
        lines += ["Constraints every task follows:", *[f"- {_one(c)}" for c in stated], ""]
    lines += ["## 5. Task Breakdown", "", "| Task | Title | Type | Effort | Depends on | Files |",
              "|---|---|---|---|---|---|"]
    for t in tasks:
        paths = list(dict.fromkeys(f.path for f in t.files))  # files[] has an entry per symbol changed
        files = ", ".join(f"`{p}`" for p in paths[:3]) + (" ..." if len(paths) > 3 else "")
        lines.append(f"| {t.id} | {_one(t.title)} | {t.type or '-'} | {t.effort or '-'} "
                     f"| {', '.join(t.depends_on) or '-'} | {files or '-'} |")
    lines += ["", "## 6. Phased Plan", ""]
    for n, wave in enumerate(waves(tasks), start=1):
        lines.append(f"- Phase {n}: {', '.join(wave)}")
    lines += ["", "## 7. Risks", "", "| Risk | Impact | Mitigation |", "|---|---|---|"]
    risks = [(r, t.id) for t in tasks for r in t.risks]
    lines += [f"| {_one(r)} | {tid} | keep the interface compatible; run the covering tests first |"
              for r, tid in risks]
    if context.conflict_detection.risk_factors.breaking_changes:
        lines += [f"| {_one(b)} | breaking change | announce and migrate callers in the same task |"
                  for b in context.conflict_detection.risk_factors.breaking_changes]
    if not risks and not context.conflict_detection.risk_factors.breaking_changes:
        lines.append("| No specific risk identified | - | run the full test suite after each task |")
    lines += ["", "## 8. Success Criteria", ""]
    lines += [f"- [{t.id}] {_one(c)}" for t in tasks for c in t.convergence.criteria]
    return "\n".join(lines) + "\n"


def render_todo(topic: str, tasks: list[UnifiedTask]) -> str:
    lines = [f"# Tasks: {_one(topic)}", "", "## Task Progress", ""]
    for t in tasks:
        if (t.model_extra or {}).get("status") == "completed":
            lines.append(f"- [x] **{t.id}**: {_one(t.title)} → [✅](./{SUMMARY_DIR}/{t.id}-summary.md)")
        else:
            lines.append(f"- [ ] **{t.id}**: {_one(t.title)} → [📋](./.task/{t.id}.json)")
    return "\n".join(lines) + "\n"


class Decision(BaseModel):
    decision: str
    rationale: str
    revisit: bool = False


class PlanningNotes(BaseModel):
    """The accumulated state behind planning-notes.md (kept in .process/planning-notes.json)."""

    goal: str
    key_constraints: list[str] = Field(default_factory=list)
    critical_files: list[str] = Field(default_factory=list)
    architecture: list[str] = Field(default_factory=list)
    conflict_risk: str = "unknown"
    constraints: list[str] = Field(default_factory=list)
    conflict_decisions: list[str] = Field(default_factory=list)
    task_generation: list[str] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    deferred: list[str] = Field(default_factory=list)

    @property
    def consolidated(self) -> list[str]:
        merged: list[str] = []
        for item in [*self.key_constraints, *self.constraints]:
            if item not in merged:
                merged.append(item)
        return merged


def _items(values: list[str], empty: str = "(none yet)") -> list[str]:
    return [f"- {_one(v)}" for v in values] or [f"- {empty}"]


def render_notes(notes: PlanningNotes) -> str:
    lines = ["# Planning Notes", "", "## User Intent", "", f"**GOAL**: {_one(notes.goal)}", "", "**KEY_CONSTRAINTS**:",
             *_items(notes.key_constraints), "", "## Context Findings", "", "**CRITICAL_FILES**:",
             *_items(notes.critical_files), "", "**ARCHITECTURE**:", *_items(notes.architecture), "",
             f"**CONFLICT_RISK**: {notes.conflict_risk}", "", "**CONSTRAINTS**:", *_items(notes.constraints), "",
             "## Conflict Decisions", "", *_items(notes.conflict_decisions, "(no conflict resolution needed)"), "",
             "## Consolidated Constraints", "", *_items(notes.consolidated), "", "## Task Generation", "",
             *_items(notes.task_generation), "", "## N+1 Context", "", "### Decisions", "",
             "| Decision | Rationale | Revisit? |", "|---|---|---|"]
    lines += [f"| {_one(d.decision)} | {_one(d.rationale)} | {'yes' if d.revisit else 'no'} |" for d in notes.decisions]
    lines += ["", "### Deferred", ""]
    lines += [f"- [ ] {_one(d)}" for d in notes.deferred] or ["- [ ] (nothing deferred)"]
    return "\n".join(lines) + "\n"
