"""The ten checks of `wfqueue verify`, one function per dimension. Pure: a VerifyInput in, findings out.

Findings come back with ``id=""``; ``wfqueue.workflow_session.verify.run`` orders, limits and numbers them.
Whatever code can decide is decided here (ARTIFACTS §7); the judgement dimensions follow
fixed, documented rules so two runs on the same session always agree:

- A intent: a goal exists; the notes' GOAL and plan.json's summary match it; every task
  carries a key term of the goal or touches a file the context package names.
- B coverage: share of the goal's key terms (``tokenize``) found in some task's title,
  description or criteria; < 50 % CRITICAL, < 75 % HIGH, < 90 % MEDIUM. A goal with no
  key term cannot be measured: MEDIUM, never 100 %.
- C consistency: task files load, ids are unique and match file names, at most MAX_TASKS,
  files to modify/delete exist, and plan.json / IMPL_PLAN.md / TODO_LIST.md name exactly
  the tasks of .task/.
- I constraints: no task changes a path that a recorded constraint or conflict decision
  forbids ("do not modify X", "keep X unchanged", ...); no failed conflict modification;
  the user's key constraints appear in IMPL_PLAN.md.
- D dependencies: no cycle, self or unknown dependency; a task changing a file that another
  task creates depends on it; a task and its dependency do not share a parallel_group.
- E synthesis and J N+1 context: ``wfqueue.workflow_session.verify.context_checks``.

F, G, H and the shared text rules (testable criteria, forbidden paths, placeholders, coverage)
live in ``wfqueue.workflow_session.verify.rules``; their public names are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from wfqueue.analysis import tokenize
from wfqueue.plan_check import check_plan
from wfqueue.sandboxed_commands import KNOWN_TOOLS
from wfqueue.tasks_file import LoadedTask, TaskProblem
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import (
    MAX_TASKS,
    ConflictResolution,
    ContextPackage,
    Finding,
    PlanOverview,
    WorkflowSession,
)
from wfqueue.workflow_session.render import PlanningNotes
from wfqueue.workflow_session.verify.context_checks import (
    check_n_plus_one,
    check_synthesis,
    context_paths,
    critical_files,
)
from wfqueue.workflow_session.verify.rules import (
    CONTROL_ARTIFACTS,
    DIMENSIONS,
    MANY_TASKS_PER_FILE,
    MAX_FILES_PER_TASK,
    UNMEASURED,
    Coverage,
    auto_runnable,
    changes,
    check_duplication,
    check_feasibility,
    check_specification,
    compute_coverage,
    coverage_colour,
    finding,
    forbidden_changes,
    forbidden_paths,
    goal_of,
    is_testable,
    is_under,
    key_terms,
    norm_text,
    task_text,
)

__all__ = [
    "CHECKS", "CONTROL_ARTIFACTS", "DIMENSIONS", "KNOWN_TOOLS", "MANY_TASKS_PER_FILE", "MAX_FILES_PER_TASK",
    "UNMEASURED", "Coverage", "VerifyInput", "auto_runnable", "changes", "check_consistency", "check_constraints",
    "check_coverage", "check_dependencies", "check_duplication", "check_feasibility", "check_intent",
    "check_n_plus_one", "check_specification", "check_synthesis", "compute_coverage", "coverage_colour",
    "critical_files", "finding", "forbidden_paths", "goal_of", "is_testable", "key_terms", "run_checks",
]

_ID = re.compile(r"\bIMPL-\d+(?:\.\d+)*\b")
_TODO_LINE = re.compile(r"^\s*[-*]\s*\[([ xX])\]\s*\*\*(IMPL-\d+(?:\.\d+)*)\*\*:?\s*(.*?)\s*(?:→.*)?$")
_TABLE_ROW = re.compile(r"^\|\s*(IMPL-\d+(?:\.\d+)*)\s*\|")


class VerifyInput(BaseModel):
    """Everything the checks look at, already loaded; ``exists``/``is_dir`` answer for repo-relative paths."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    session: WorkflowSession
    tasks: list[UnifiedTask]
    task_locations: dict[str, str] = Field(default_factory=dict, description="task id -> .task/ file it came from")
    load_problems: list[TaskProblem] = Field(default_factory=list, description="task files that could not be used")
    broken_ids: list[str] = Field(default_factory=list, description="ids (file stems) of those files")
    overview: PlanOverview | None = None
    context: ContextPackage | None = None
    resolution: ConflictResolution | None = None
    notes: PlanningNotes | None = None
    impl_plan: str | None = None
    todo: str | None = None
    artifact_errors: dict[str, str] = Field(default_factory=dict, description="artifact -> why it is unusable")
    exists: Callable[[str], bool] = lambda _path: True
    is_dir: Callable[[str], bool] = lambda _path: False
    submodules: list[str] = []  # the repository's: their files are another repository's (validate, execute)


# -- shared helpers ---------------------------------------------------------------------------


def _plan_problems(inp: VerifyInput) -> list[TaskProblem]:
    # Locations "task:ID" make check_plan's problems point where findings point.
    loaded = [LoadedTask(task=t, location=f"task:{t.id}", legacy=False) for t in inp.tasks]
    return check_plan(loaded, None, inp.exists, inp.submodules)


# -- tier 1 -----------------------------------------------------------------------------------


def check_intent(inp: VerifyInput) -> list[Finding]:
    """A: the plan pursues the goal the user gave."""
    goal = goal_of(inp)
    terms = set(key_terms(goal))
    if not goal.strip():
        return [finding("A", "CRITICAL", ["workflow-session.json"], "no goal is recorded for this session",
                        "re-plan with a goal; intent cannot be verified without one")]
    out: list[Finding] = []
    if inp.notes is not None and norm_text(inp.notes.goal) != norm_text(goal):
        out.append(finding("A", "HIGH", ["planning-notes.md"], f"planning notes GOAL differs from the session goal "
                           f"({inp.notes.goal!r} vs {goal!r})",
                           "re-plan so tasks are generated against the user's goal"))
    if inp.overview is not None and terms and not terms & set(tokenize(inp.overview.summary)):
        out.append(finding("A", "HIGH", ["plan.json"], "plan.json summary shares no key term with the goal",
                           "rewrite the summary (and check the tasks) against the goal"))
    known = context_paths(inp.context, inp.notes)
    for t in inp.tasks:
        if terms and not terms & set(tokenize(task_text(t) + " " + (t.scope or ""))) \
                and not any(is_under(p, known) for p, _ in changes(t)):
            out.append(finding("A", "MEDIUM", [f"task:{t.id}"], f"{t.id} carries no key term of the goal and touches "
                               "no file of the gathered context (possible scope creep)",
                               "tie the task to the goal in its description, or drop it"))
    return out


def check_coverage(inp: VerifyInput) -> list[Finding]:
    """B: the goal's key terms are all addressed by some task."""
    if not inp.tasks:
        return [finding("B", "CRITICAL", [".task/"], "the plan has no usable task", "re-plan the session")]
    cov = compute_coverage(inp)
    if cov.colour == UNMEASURED:
        if not goal_of(inp).strip():
            return []  # no goal at all: dimension A's CRITICAL says so
        return [finding("B", "MEDIUM", ["workflow-session.json"],
                        f"coverage cannot be measured: the goal ({goal_of(inp)!r}) has no key word verify can match "
                        "(words in Latin letters, other than common ones such as 'add' or 'the')",
                        "check by hand that the tasks cover every part of the goal")]
    if cov.colour == "GREEN":
        return []
    severity = "CRITICAL" if cov.percent < 50 else "HIGH" if cov.colour == "RED" else "MEDIUM"
    return [finding("B", severity, ["IMPL_PLAN.md", "workflow-session.json"],
                    f"tasks cover {cov.percent:.1f} % of the goal's key words ({cov.colour}); "
                    f"not addressed: {', '.join(cov.missing)}",
                    "add or extend tasks for the missing parts of the goal (wfqueue replan)")]


def _doc_ids(out: list[Finding], name: str, lines: list[str], listed: Callable[[str], list[str]],
             known: list[str], missing_msg: str, tolerated: set[str]) -> None:
    """Unknown ids anywhere in a document (first line each), and known ids the document does not list.

    ``tolerated`` ids (named in some depends_on) are not unknown here: the document only
    repeats the task, and dimension D reports the dangling dependency once."""
    unknown: set[str] = set()
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        seen.update(listed(line))
        for tid in dict.fromkeys(_ID.findall(line)):
            if tid not in known and tid not in unknown and tid not in tolerated:
                unknown.add(tid)
                out.append(finding("C", "HIGH", [f"{name}:L{number}"], f"{name} names {tid}, which has no task file",
                                   f"regenerate {name} from .task/ or restore the task"))
    for tid in known:
        if tid not in seen:
            out.append(finding("C", "HIGH", [name, f"task:{tid}"], f"{tid} {missing_msg}",
                               f"regenerate {name} from .task/"))


def _table_ids(line: str) -> list[str]:
    m = _TABLE_ROW.match(line)
    return [m.group(1)] if m else []


def _todo_ids(line: str) -> list[str]:
    m = _TODO_LINE.match(line)
    return [m.group(2)] if m else []


def check_consistency(inp: VerifyInput) -> list[Finding]:
    """C: artifacts load and agree with .task/ and with the repository."""
    out: list[Finding] = []
    for name in CONTROL_ARTIFACTS:
        if name in inp.artifact_errors:
            out.append(finding("C", "HIGH", [name], f"{name}: {inp.artifact_errors[name]}", f"regenerate {name}"))
    by_file: dict[str, list[str]] = {}
    for problem in inp.load_problems:
        by_file.setdefault(problem.location, []).append(problem.message)
    for location, messages in by_file.items():
        out.append(finding("C", "CRITICAL", [location], f"task file cannot be used: {'; '.join(messages[:3])}",
                           "fix the file so it is a valid unified task"))
    for t in inp.tasks:
        where = inp.task_locations.get(t.id, "")
        if where and where.rsplit("/", 1)[-1] != f"{t.id}.json":
            out.append(finding("C", "HIGH", [where, f"task:{t.id}"], f"{where} holds task {t.id}",
                               f"rename the file to {t.id}.json (TODO_LIST.md links by id)"))
    for p in _plan_problems(inp):
        if p.code == "duplicate_id":
            out.append(finding("C", "CRITICAL", [p.location], p.message, "give every task a unique id"))
        elif p.code == "missing_file":
            out.append(finding("C", "HIGH", [p.location], p.message, "fix the path, or use action create"))
        elif p.code == "bad_path":
            out.append(finding("C", "HIGH", [p.location], p.message, "name the project files the task changes"))
    known = list(dict.fromkeys([t.id for t in inp.tasks] + inp.broken_ids))  # a duplicate id is one task here
    deps = {d for t in inp.tasks for d in t.depends_on}
    if len(known) > MAX_TASKS:
        out.append(finding("C", "HIGH", [".task/"], f"{len(known)} tasks; a session holds at most {MAX_TASKS}",
                           "merge related tasks (wfqueue replan) or split the goal into sessions"))
    if inp.overview is not None:
        ov = inp.overview
        for tid in [i for i in ov.task_ids if i not in known]:
            out.append(finding("C", "HIGH", ["plan.json"], f"plan.json lists {tid}, which has no task file",
                               "regenerate plan.json from .task/"))
        for tid in [i for i in known if i not in ov.task_ids]:
            out.append(finding("C", "HIGH", ["plan.json", f"task:{tid}"], f"{tid} is missing from plan.json task_ids",
                               "regenerate plan.json from .task/"))
        if ov.task_count != len(ov.task_ids) or ov.task_count != len(known):
            out.append(finding("C", "HIGH", ["plan.json"], f"plan.json task_count is {ov.task_count}, task_ids has "
                               f"{len(ov.task_ids)}, .task/ has {len(known)}", "regenerate plan.json from .task/"))
    if inp.impl_plan is not None:
        lines = inp.impl_plan.splitlines()
        for number, line in enumerate(lines, 1):
            m = re.match(r"^task_count:\s*(\d+)\s*$", line)
            if m and int(m.group(1)) != len(known):
                out.append(finding("C", "HIGH", [f"IMPL_PLAN.md:L{number}"], f"IMPL_PLAN.md says task_count "
                                   f"{m.group(1)}, .task/ has {len(known)}", "regenerate IMPL_PLAN.md"))
        # The Task Breakdown table lists the tasks when present; else any mention counts as listing.
        table = any(_TABLE_ROW.match(line) for line in lines)
        _doc_ids(out, "IMPL_PLAN.md", lines, _table_ids if table else _ID.findall, known,
                 "is missing from the IMPL_PLAN.md task breakdown", deps)
    if inp.todo is not None:
        lines = inp.todo.splitlines()
        _doc_ids(out, "TODO_LIST.md", lines, _todo_ids, known, "has no line in TODO_LIST.md", deps)
        by_id = {t.id: t for t in inp.tasks}
        for number, line in enumerate(lines, 1):
            m = _TODO_LINE.match(line)
            if not m or m.group(2) not in by_id:
                continue
            t = by_id[m.group(2)]
            done = (t.model_extra or {}).get("status") == "completed"
            if (m.group(1) != " ") != done:
                out.append(finding("C", "MEDIUM", [f"TODO_LIST.md:L{number}", f"task:{t.id}"],
                                   f"TODO_LIST.md marks {t.id} {'done' if m.group(1) != ' ' else 'open'}, the task "
                                   f"status is {(t.model_extra or {}).get('status', 'pending')}",
                                   "regenerate TODO_LIST.md from .task/"))
            if m.group(3) and norm_text(m.group(3)) != norm_text(t.title):
                out.append(finding("C", "MEDIUM", [f"TODO_LIST.md:L{number}", f"task:{t.id}"],
                                   f"TODO_LIST.md title of {t.id} differs from the task title",
                                   "regenerate TODO_LIST.md from .task/"))
    return out


def check_constraints(inp: VerifyInput) -> list[Finding]:
    """I: recorded constraints and conflict decisions are respected."""
    out: list[Finding] = []
    rules: list[tuple[str, str]] = []
    if inp.resolution is not None:
        rules += [(c, ".process/conflict-resolution.json") for c in inp.resolution.planning_constraints]
        rules += [(m, f".process/conflict-resolution.json:{r.conflict_id}")
                  for r in inp.resolution.resolved_conflicts for m in [r.strategy_approach, *r.modifications_applied]]
        for failed in inp.resolution.failed_modifications:
            out.append(finding("I", "HIGH", [".process/conflict-resolution.json"],
                               f"a conflict modification failed to apply: {failed}",
                               "apply it by hand or re-run conflict resolution before executing"))
    if inp.notes is not None:
        rules += [(c, "planning-notes.md") for c in [*inp.notes.consolidated, *inp.notes.conflict_decisions]]
    if inp.context is not None:
        raw = inp.context.aggregated_insights().get("constraints", [])
        rules += [(str(c), ".process/context-package.json") for c in raw]
    user = list(inp.session.structured.constraints) if inp.session.structured else []
    user += inp.notes.key_constraints if inp.notes else []
    rules += [(c, "workflow-session.json") for c in user]
    reported: set[tuple[str, str]] = set()
    for t, path, text, source in forbidden_changes(inp, list(dict.fromkeys(rules))):
        if (t.id, path) not in reported:  # one finding per change, however many rules forbid it
            reported.add((t.id, path))
            out.append(finding("I", "CRITICAL", [f"task:{t.id}", source], f"{t.id} changes {path}, which a recorded "
                               f"constraint forbids: {text!r}", f"remove {path} from {t.id} or revise the constraint"))
    if inp.impl_plan is not None:
        plan = norm_text(inp.impl_plan)
        for c in dict.fromkeys(user):
            if norm_text(c) not in plan:
                out.append(finding("I", "MEDIUM", ["IMPL_PLAN.md"], f"user constraint not stated in the plan: {c!r}",
                                   "list it under the Implementation Strategy constraints"))
    return out


# -- tier 2 -----------------------------------------------------------------------------------


def _ancestors(tid: str, graph: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    stack = list(graph.get(tid, []))
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack += graph.get(dep, [])
    return seen


def check_dependencies(inp: VerifyInput) -> list[Finding]:
    """D: the dependency graph is acyclic, complete and orderable."""
    out: list[Finding] = []
    for p in _plan_problems(inp):
        if p.code == "dependency_cycle":
            cycle = list(dict.fromkeys(_ID.findall(p.message)))
            out.append(finding("D", "HIGH", [f"task:{i}" for i in cycle], p.message,
                               "break the cycle (wfqueue replan)"))
        elif p.code == "self_dependency":
            out.append(finding("D", "HIGH", [p.location], p.message, "remove the self dependency"))
    ids = {t.id for t in inp.tasks} | set(inp.broken_ids)
    for t in inp.tasks:  # computed here, not by check_plan, so tasks in broken files still count as existing
        for dep in t.depends_on:
            if dep not in ids:
                out.append(finding("D", "HIGH", [f"task:{t.id}"], f"{t.id} depends on {dep}, which does not exist",
                                   "fix the id or remove the dependency"))
    graph = {t.id: t.depends_on for t in inp.tasks}
    creators = {path: t for t in inp.tasks for path, action in changes(t) if action == "create"}
    by_id = {t.id: t for t in inp.tasks}
    for t in inp.tasks:
        before = _ancestors(t.id, graph)
        for path, action in changes(t):
            maker = creators.get(path)
            if maker is not None and maker.id != t.id and action != "create" and maker.id not in before:
                out.append(finding("D", "HIGH", [f"task:{t.id}", f"task:{maker.id}"], f"{t.id} changes {path}, which "
                                   f"{maker.id} creates, but does not depend on {maker.id}",
                                   f"add {maker.id} to {t.id}.depends_on"))
        for dep in t.depends_on:
            other = by_id.get(dep)
            if other and t.parallel_group is not None and other.parallel_group == t.parallel_group:
                out.append(finding("D", "HIGH", [f"task:{t.id}", f"task:{dep}"], f"{t.id} depends on {dep} but both "
                                   f"are in parallel_group {t.parallel_group}", "move one task to a later group"))
    return out


# Run order = report order: tier 1, tier 2, tier 3, tier 4.
CHECKS: dict[str, Callable[[VerifyInput], list[Finding]]] = {
    "A": check_intent, "B": check_coverage, "C": check_consistency, "I": check_constraints,
    "D": check_dependencies, "E": check_synthesis, "J": check_n_plus_one,
    "F": check_specification, "G": check_duplication, "H": check_feasibility,
}


def run_checks(inp: VerifyInput) -> list[Finding]:
    return [f for check in CHECKS.values() for f in check(inp)]
