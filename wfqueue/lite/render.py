"""Markdown of a lite plan: one file per angle, the combined notes, plan.md. Pure."""

from __future__ import annotations

from wfqueue.lite.models import Assessment, VerifiedExploration
from wfqueue.lite.synthesis import CoreFile, MergedQuestion
from wfqueue.markdown import inline_code
from wfqueue.markdown import table_cell as _cell
from wfqueue.repair import Repair, repairs_section
from wfqueue.unified_task import UnifiedTask


def _mark(exploration: VerifiedExploration, kind: str, subject: str) -> tuple[str, str]:
    check = exploration.check_for(kind, subject)
    if check is None:
        return "⚠️", "not checked"
    return check.mark, check.evidence


def render_exploration(exploration: VerifiedExploration, requirement: str) -> str:
    f = exploration.findings
    out = [
        f"# Exploration: {f.angle}",
        "",
        f"**Task**: {_cell(requirement)}",
        f"**Timestamp**: {exploration.timestamp}",
        f"**Provider**: {exploration.provider}",
        f"**Verified**: {sum(c.verified for c in exploration.checks)} of {len(exploration.checks)} findings ✅",
        "",
        "## Project Structure",
        "",
        *([f"- {_cell(s)}" for s in f.structure] or ["- (nothing specific to this angle)"]),
        "",
        "## Relevant Files",
        "",
        "| File | Relevance | Rationale | Verified |",
        "|------|-----------|-----------|----------|",
    ]
    for item in f.relevant_files:
        mark, _ = _mark(exploration, "file", item.path)
        out.append(f"| `{_cell(item.path)}` | {item.relevance} | {_cell(item.rationale)} | {mark} |")
    out += ["", "## Patterns", ""]
    for p in f.patterns:
        mark, evidence = _mark(exploration, "pattern", p.search)
        out.append(f"- {mark} {_cell(p.description)} (`{p.search}`: {_cell(evidence)})")
        if p.example:
            out.append(f"  - e.g. `{_cell(p.example)}`")
    out += ["", "## Integration Points", ""]
    for point in f.integration_points:
        mark, evidence = _mark(exploration, "integration_point", f"{point.file}:{point.line}")
        out.append(f"- {mark} `{point.file}:{point.line}`: {_cell(point.description)} ({_cell(evidence)})")
    out += ["", "## Dependencies", ""]
    for dep in f.dependencies:
        mark, evidence = _mark(exploration, "dependency", f"{dep.source} -> {dep.target}")
        out.append(f"- {mark} `{dep.source}` → `{dep.target}` ({_cell(evidence)})")
    out += ["", "## Constraints", "", *[f"- {_cell(c)}" for c in f.constraints], "", "## Clarification Needs", ""]
    for need in f.clarification_needs:
        options = f" Options: {'; '.join(need.options)}." if need.options else ""
        out.append(f"- {_cell(need.question)}{options}")
    return "\n".join(out) + "\n"


def render_notes(requirement: str, timestamp: str, assessment: Assessment, explorations: list[VerifiedExploration],
                 core: list[CoreFile], questions: list[MergedQuestion], failed: dict[str, str]) -> str:
    angles = [e.findings.angle for e in explorations]
    out = [
        f"# Exploration Notes: {_cell(requirement)}",
        "",
        f"**Generated**: {timestamp} | **Complexity**: {assessment.complexity}",
        f"**Exploration Angles**: {', '.join(angles) or 'none'}",
    ]
    if failed:
        out.append(f"**Skipped angles** (failed): {', '.join(f'{a} ({_cell(e)})' for a, e in sorted(failed.items()))}")
    out += ["", "## Part 1: Multi-Angle Exploration Summary", ""]
    for e in explorations:
        f = e.findings
        out.append(f"### {f.angle}")
        out.append("- **Key files**: " + (", ".join(f"`{r.path}` ({r.relevance})" for r in f.relevant_files) or "-"))
        out.append("- **Patterns**: " + ("; ".join(_cell(p.description) for p in f.patterns) or "-"))
        out.append("- **Integration points**: "
                   + (", ".join(f"`{p.file}:{p.line}`" for p in f.integration_points) or "-"))
        out.append("- **Dependencies**: " + (", ".join(f"{d.source} → {d.target}" for d in f.dependencies) or "-"))
        out.append("- **Constraints**: " + ("; ".join(_cell(c) for c in f.constraints) or "-"))
        out.append("")
    out += ["## Part 2: Core Files Index", "", "| File | Relevance | Angles | Verified | Why |",
            "|---|---|---|---|---|"]
    out += [f"| `{_cell(c.path)}` | {c.relevance} | {', '.join(c.angles)} | {'✅' if c.verified else '⚠️'}"
            f" | {_cell(c.rationale)} |"
            for c in core]
    edges = sorted({(d.source, d.target) for e in explorations for d in e.findings.dependencies
                    if (chk := e.check_for("dependency", f"{d.source} -> {d.target}")) and chk.verified})
    importers: dict[str, list[str]] = {}
    for source, target in edges:
        importers.setdefault(target, []).append(source)
    out += ["", "## Part 3: Architecture Reasoning", ""]
    if importers:
        for target, sources in sorted(importers.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(f"- `{target}` is used by {', '.join(f'`{s}`' for s in sources)}: change it first, "
                       "and keep its interface stable for its users.")
    else:
        out.append("- No verified import relations among the explored files: the changes can proceed independently.")
    out += ["", "## Part 4: Risks and Mitigations", ""]
    constraints = sorted({c for e in explorations for c in e.findings.constraints})
    out += [f"- {_cell(c)}" for c in constraints]
    unverified = [f"{e.findings.angle}: {c.kind} {c.subject} ({c.evidence})" for e in explorations
                  for c in e.checks if not c.verified]
    if unverified:
        out.append("- Findings not confirmed in the code (kept, not relied on):")
        out += [f"  - ⚠️ {_cell(u)}" for u in unverified]
    if not constraints and not unverified:
        out.append("- None found by exploration.")
    out += ["", "## Part 5: Clarification Questions Summary", ""]
    out += [f"{n}. [{', '.join(q.angles)}] {_cell(q.question)}"
            + (f" Options: {'; '.join(q.options)}." if q.options else "")
            for n, q in enumerate(questions, start=1)] or ["None."]
    out += ["", "## Part 6: Key Code Location Index", "", "| Component | File Path | Key Lines | Purpose |",
            "|---|---|---|---|"]
    for e in explorations:
        for point in e.findings.integration_points:
            check = e.check_for("integration_point", f"{point.file}:{point.line}")
            if check and check.verified:
                component = point.snippet.split("(")[0][:40] if point.snippet else point.file.rsplit("/", 1)[-1]
                out.append(f"| {_cell(component)} | `{_cell(point.file)}` | {point.line} "
                           f"| {_cell(point.description)} |")
    return "\n".join(out) + "\n"


def _plan_header(session_id: str, requirement: str, created: str, assessment: Assessment | None,
                 failed: dict[str, str], usage: str | None, status: str | None = None) -> list[str]:
    """The title and key facts both kinds of plan.md start with (``assessment`` None: it never ended)."""
    out = ["# Lite Plan", "", f"**Session**: {session_id}", f"**Requirement**: {_cell(requirement)}",
           f"**Created**: {created}"]
    if status is not None:
        out.append(f"**Status**: {status}")
    if assessment is None:
        out.append("**Complexity**: not assessed")
    else:
        out += [
            f"**Complexity**: {assessment.complexity}",
            "**Exploration Angles**: "
            + (", ".join(assessment.angles) if assessment.needs_exploration else "none (not needed)"),
        ]
    if failed:
        out.append(f"**Skipped angles**: {', '.join(f'{a}: {_cell(e)}' for a, e in sorted(failed.items()))}")
    if usage is not None:
        out.append(f"**LLM usage** (cost estimated from the price_table setting): {_cell(usage)}")
    return out


def render_plan(session_id: str, requirement: str, created: str, assessment: Assessment, understanding: str,
                tasks: list[UnifiedTask], tasks_path: str, failed: dict[str, str], *, usage: str | None = None,
                status: str | None = None, repairs: list[Repair] | None = None) -> str:
    """plan.md; ``usage`` is the session's usage line (wfqueue.metering.usage_line), when known; ``status`` is
    said only when it is not the plan's own (a plan the user cancelled); ``repairs``: what code changed in the
    model's answers."""
    out = _plan_header(session_id, requirement, created, assessment, failed, usage, status)
    out += ["", "## Understanding", "", understanding.strip(), "", "## Task Overview", "",
            "| # | ID | Title | Type | Priority | Effort | Dependencies |",
            "|---|-----|-------|------|----------|--------|--------------|"]
    for n, t in enumerate(tasks, start=1):
        out.append(f"| {n} | {t.id} | {_cell(t.title)} | {t.type or '-'} | {t.priority or '-'} | {t.effort or '-'} "
                   f"| {', '.join(t.depends_on) or '-'} |")
    out += ["", "## Task Details", ""]
    for t in tasks:
        out += [
            f"### {t.id}: {_cell(t.title)}",  # one line: a title's line break began a heading of its own
            f"- **Scope**: {_cell(t.scope or t.description)}",
            # files[] has an entry per symbol changed: each file is listed once.
            "- **Files**: " + (", ".join(dict.fromkeys(f"`{f.path}` ({f.action})" for f in t.files)) or "-"),
            "- **Acceptance criteria**:",
            *[f"  - {_cell(c)}" for c in t.convergence.criteria],
            f"- **Verification**: {inline_code(t.convergence.verification)}",
            f"- **Definition of done**: {_cell(t.convergence.definition_of_done)}",
            "",
        ]
    out += repairs_section("Repairs of the Answers", "The model's answers were repaired by code before they were "
                           "written (`repairs` in `requirement-analysis.json`):", repairs or [])
    out += [
        "## How to Execute",
        "",
        "Run the tasks in dependency order; tasks without dependencies between them can run in parallel. "
        "`wfqueue execute` does it with coding agents, each task in a git worktree of its own, merged one at a "
        "time behind the test gate, on a branch of its own:",
        "",
        "```bash",
        f"wfqueue validate {tasks_path}",
        f"wfqueue execute {session_id} --dry-run",
        f"wfqueue execute {session_id}",
        "```",
        "",
    ]
    return "\n".join(out)


def render_stopped_plan(session_id: str, requirement: str, created: str, assessment: Assessment | None,
                        reason: str, failed: dict[str, str], usage: str) -> str:
    """plan.md of a lite plan whose planning step (or, ``assessment`` None, its assessment) did not end: its
    budget was spent, or the model failed it. What is known and why."""
    out = _plan_header(session_id, requirement, created, assessment, failed, usage,
                       status="failed: no tasks were planned")
    out += [
        "",
        f"> ⚠️ **{'Planning' if assessment is not None else 'The assessment'} stopped**: {_cell(reason)}",
        "",
        "What was done is kept: `wfqueue resume` this session (with a larger `--budget` when the budget stopped it) "
        "finishes it without paying for that again.",
        "",
    ]
    return "\n".join(out)


CANCELLED_NOTE = "cancelled: the plan was not accepted (tasks.jsonl is kept for reference)"
# Written before the user is asked to allow, modify or cancel the plan, and replaced by the answer: a command
# stopped at that question (Ctrl-C, a closed terminal) leaves a plan nobody accepted, and its plan.md says so.
AWAITING_NOTE = "awaiting acceptance: shown to the user, not accepted yet (`wfqueue resume` asks again)"


def _says(plan_md: str, note: str) -> bool:
    """Whether a plan.md's header gives ``note`` as its status (text below the header, a task title quoting
    the words, does not count)."""
    header = plan_md.split("\n## ", 1)[0]
    return f"**Status**: {note}" in header.splitlines()


def says_cancelled(plan_md: str) -> bool:
    """Whether a plan.md says that the user cancelled the plan."""
    return _says(plan_md, CANCELLED_NOTE)


def says_awaiting(plan_md: str) -> bool:
    """Whether a plan.md says that its plan was shown to the user and not accepted yet."""
    return _says(plan_md, AWAITING_NOTE)
