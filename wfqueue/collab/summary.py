"""plan.md: the human-readable summary of a collaborative plan. Pure."""

from __future__ import annotations

from pydantic import BaseModel

from wfqueue.collab.models import AgentOutcome, Conflict, NoteTask, RequirementAnalysis
from wfqueue.markdown import table_cell
from wfqueue.metering import UsageReport, describe_budget, describe_spent
from wfqueue.repair import Repair, repairs_section
from wfqueue.usage import Totals


class PlanSummaryInput(BaseModel):
    analysis: RequirementAnalysis
    created_at: str
    requirement_body: str
    tasks: list[NoteTask]
    conflicts: list[Conflict]
    outcomes: list[AgentOutcome]
    status: str
    problems: list[str] = []
    usage: UsageReport | None = None  # None: not recorded (the section is left out)
    agent_repairs: list[Repair] = []  # what code changed in the agents' answers (their plan.json _metadata.repairs)


def _node(task_id: str) -> str:
    # Mermaid node ids must be plain identifiers; TASK-101 -> T101.
    return "T" + task_id.split("-", 1)[1]


def _label(text: str) -> str:
    """A node's text, at most 60 characters. A long one keeps its start and its end: task titles of a plan
    start alike (the change) and end with where (its file), which tells its nodes apart."""
    text = " ".join(text.split())
    text = text[:LABEL_HEAD] + "..." + text[-(LABEL_MAX - LABEL_HEAD - 3):] if len(text) > LABEL_MAX else text
    return text.replace('"', "#quot;").replace("[", "(").replace("]", ")")


LABEL_MAX, LABEL_HEAD = 60, 24  # characters of a node's text, and of them its start


def mermaid_flowchart(analysis: RequirementAnalysis, tasks: list[NoteTask], conflicts: list[Conflict]) -> str:
    """Tasks grouped by sub-domain, an edge from each dependency to its dependent,
    tasks involved in a conflict highlighted."""
    known = {t.id for t in tasks}
    lines = ["```mermaid", "flowchart TD"]
    for sub in analysis.sub_domains:
        own = [t for t in tasks if t.area == sub.focus_area]
        lines.append(f'    subgraph {sub.focus_area.replace("-", "_")}["{_label(sub.title)}"]')
        lines += [f'        {_node(t.id)}["{t.id}: {_label(t.title)}"]' for t in own]
        if not own:
            lines.append(f'        {sub.focus_area.replace("-", "_")}_empty["no tasks"]')
        lines.append("    end")
    orphan_areas = sorted({t.area for t in tasks} - {s.focus_area for s in analysis.sub_domains})
    for area in orphan_areas:  # tasks from a hand edit under an unknown area still show
        lines.append(f'    subgraph {area.replace("-", "_")}["{_label(area)}"]')
        lines += [f'        {_node(t.id)}["{t.id}: {_label(t.title)}"]' for t in tasks if t.area == area]
        lines.append("    end")
    for task in tasks:
        for dep in task.depends_on:
            if dep in known:
                lines.append(f"    {_node(dep)} --> {_node(task.id)}")
    flagged = sorted({t for c in conflicts for t in c.tasks_involved if t in known})
    if flagged:
        lines.append("    classDef conflict fill:#ffd6d6,stroke:#c62828,stroke-width:2px")
        lines.append(f"    class {','.join(_node(t) for t in flagged)} conflict")
    lines.append("```")
    return "\n".join(lines)


def _cost_cell(totals: Totals) -> str:
    if totals.unpriced_calls == totals.calls:
        return "no price"
    text = f"${totals.cost_usd:.4f}"
    return text + " + unpriced" if totals.unpriced_calls else text


def render_cost(report: UsageReport | None) -> list[str]:
    """The Cost section: tokens by kind per step, the estimated cost, the budget."""
    if report is None:
        return []
    out = ["## Cost", ""]
    if report.total.calls == 0:
        return [*out, "- **Total**: no LLM calls (the provider plans without a model)", ""]
    out += [f"- **Total**: {report.summary}",
            "- Costs are estimates from the `price_table` setting (dollars per million tokens of each kind)."]
    if report.budget is not None:
        spent = describe_spent(report.total, report.budget)
        state = ("**exhausted**: steps that had not started were stopped (failed areas say so)"
                 if report.budget_exhausted else "not reached")
        out.append(f"- **Budget**: {describe_budget(report.budget)}, {spent} spent, {state}")
    out += ["", "| Step | Calls | Input | Output | Cache read | Cache write | Est. cost |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for step, totals in report.steps.items():
        u = totals.usage
        out.append(f"| {step} | {totals.calls} | {u.input_tokens:,} | {u.output_tokens:,} | {u.cache_read_tokens:,} "
                   f"| {u.cache_write_tokens:,} | {_cost_cell(totals)} |")
    return [*out, ""]


def render_plan_md(data: PlanSummaryInput, session_dir: str) -> str:
    analysis = data.analysis
    failed = [o for o in data.outcomes if o.status == "failed"]
    out = [
        f"# Collaborative Plan: {analysis.session_id}",
        "",
        f"- **Session**: {analysis.session_id}",
        f"- **Created**: {data.created_at}",
        f"- **Status**: {data.status}",
        f"- **Requirement**: {' '.join(analysis.original_requirement.split())}",
        f"- **Complexity**: {analysis.complexity}",
        f"- **Tasks**: {len(data.tasks)} across {len(analysis.sub_domains)} sub-domains; "
        f"**conflicts**: {len(data.conflicts)}",
        "",
    ]
    if failed:
        head = ("> ❌ **Failed plan**: no agent produced tasks. Each agent's error:" if data.status == "failed"
                else "> ⚠️ **Partial plan**: these agents failed, their areas have no tasks:")
        out += [head, ">"]
        out += [f"> - `{o.focus_area}`: {' '.join((o.error or 'unknown error').split())}" for o in failed]
        out.append("")
    single = next((r for r in analysis.repairs if r.kind == "single_sub_domain"), None)
    if single is not None:
        out += [f"> ℹ️ **One agent**: {' '.join(single.detail.split())}.", ""]
    out += ["## Requirements", data.requirement_body.strip("\n"), ""]
    out += ["## Sub-Domain Split", "", "| Area | Description | Task ids | Effort |", "|---|---|---|---|"]
    for sub in analysis.sub_domains:
        first, last = sub.task_id_range
        out.append(f"| {table_cell(sub.focus_area)} | {table_cell(sub.description)} | TASK-{first:03d} .. "
                   f"TASK-{last:03d} | {table_cell(sub.estimated_effort)} |")
    out += ["", "## Task Graph", "", mermaid_flowchart(analysis, data.tasks, data.conflicts), ""]
    out += ["## Task Overview", ""]
    for sub in analysis.sub_domains:
        own = [t for t in data.tasks if t.area == sub.focus_area]
        out += [f"### {sub.title} (`{sub.focus_area}`)", ""]
        if not own:
            outcome = next((o for o in failed if o.focus_area == sub.focus_area), None)
            out += [f"_No tasks: {'the agent failed' if outcome else 'nothing to change in this area'}._", ""]
            continue
        out += ["| Id | Title | Complexity | Depends on | Risk |", "|---|---|---|---|---|"]
        for t in own:
            depends = ", ".join(t.depends_on) or "-"
            out.append(f"| {t.id} | {table_cell(t.title)} | {table_cell(t.complexity)} | {table_cell(depends)} "
                       f"| {table_cell(t.conflict_risk)} |")
        out.append("")
    out += ["## Conflict Report", ""]
    if not data.conflicts:
        out += ["No conflicts detected.", ""]
    else:
        out += ["| Id | Type | Severity | Tasks | Description |", "|---|---|---|---|---|"]
        for c in data.conflicts:
            out.append(f"| {c.id} | {c.type} | {c.severity} | {table_cell(', '.join(c.tasks_involved))} "
                       f"| {table_cell(c.description)} |")
        out += ["", "Details and resolution options: `conflicts.json` and the conflict markers section of "
                "`plan-note.md`.", ""]
    out += repairs_section("Repairs of the Understanding Answer", "The split was repaired by code before planning "
                           "(`repairs` in `requirement-analysis.json`):", analysis.repairs)
    out += repairs_section("Repairs of the Agents' Answers", "Each agent's answer was repaired by code before it was "
                           "written (`_metadata.repairs` in `agents/{area}/plan.json`):",
                           data.agent_repairs)
    if data.problems:
        out += ["## Note Problems", "", "Lines of plan-note.md that could not be read as written:", ""]
        out += [f"- {p}" for p in data.problems] + [""]
    out += render_cost(data.usage)
    out += [
        "## How to Execute",
        "",
        f"1. Review `{session_dir}/plan-note.md`; resolve critical and high conflicts first.",
        "2. Each agent's detailed tasks (unified task format) are in `agents/{area}/plan.json`.",
        "3. Run tasks in dependency order: a task starts once every task it depends on is done;",
        "   tasks with no dependencies between them can run in parallel.",
        f"   `wfqueue execute {analysis.session_id} --dry-run` shows that schedule;",
        f"   `wfqueue execute {analysis.session_id}` runs it with coding agents, each task in a git worktree of its",
        "   own, merged one at a time behind the test gate, on a branch of its own.",
        "",
    ]
    return "\n".join(out)


UNDERSTANDING_FAILED = "failed: the understanding step did not end"  # plan.md's status line, as status reads it
# Why a plan whose agents all answered with no task failed (plan.md's problems, the CLI, `status`'s hint).
NO_TASK = "no agent planned a task: plan the requirement again, said more precisely or with another model"


def render_failed_understanding(session_id: str, requirement: str, reason: str, resume: str) -> str:
    """plan.md of a plan whose understanding step the model failed (or its budget stopped): no split, no agent."""
    return "\n".join([
        f"# Collaborative Plan: {table_cell(requirement)}", "", f"**Session**: {session_id}",
        f"**Status**: {UNDERSTANDING_FAILED}", "", f"> ⚠️ **The understanding step stopped**: {table_cell(reason)}",
        "", f"Nothing was split or planned. {resume} runs the understanding step again.", ""])
