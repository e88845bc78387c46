"""What a replan will change, worked out in memory before any file is touched. Pure.

:func:`plan_changes` turns a parsed request and the clarification answers into
the new task set and an :class:`Impact` (tasks added / updated / deleted,
dependents affected, source files touched, problems);
wfqueue.workflow_session.replan.artifacts turns that into the bytes of every
session file that changes. :func:`check_task_set` is the consistency check, run
on the draft before writing and on the disk after.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from wfqueue.errors import TaskNotFoundError
from wfqueue.plan_check import check_plan, repo_relative
from wfqueue.tasks_file import LEGACY_VERIFICATION, load_object
from wfqueue.workflow_session.models import MAX_TASKS, ContextPackage, WorkflowSession
from wfqueue.workflow_session.replan.intent import AddTask, ChangeRequest, DeleteTasks, EditDependencies, UpdateTask
from wfqueue.workflow_session.replan.select import Scope, Selections, check_selections, effective_scope, in_modules
from wfqueue.workflow_session.session import (
    TASK_DIR,
    TASK_FILE,
    task_number,
)

REPLAN_TOOL = "wfqueue-replan"


@dataclass(frozen=True)
class SessionSnapshot:
    """Everything a replan reads, captured once (the I/O layer fills it)."""

    session: WorkflowSession
    tasks: dict[str, dict[str, Any]]  # id -> unified task as a dict, in id order
    task_files: dict[str, str]  # id -> path relative to the session folder
    files: dict[str, bytes]  # relative path -> current bytes of each file a replan may change
    plan: dict[str, Any] | None = None
    context: ContextPackage | None = None
    constraints: list[str] = field(default_factory=list)
    topic: str = ""


class TaskChange(BaseModel):
    task_id: str
    action: Literal["create", "update", "delete"]
    fields: list[str] = Field(default_factory=list)


class Impact(BaseModel):
    session_id: str
    mode: Literal["session", "task"]
    task_id: str | None = None
    scope: Scope
    reason: str
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    changes: list[TaskChange] = Field(default_factory=list)
    dependents: dict[str, list[str]] = Field(default_factory=dict, description="changed task -> tasks downstream")
    source_files: list[str] = Field(default_factory=list)
    task_count_before: int
    task_count_after: int
    execution_config: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


@dataclass
class ReplanDraft:
    tasks: dict[str, dict[str, Any]]
    impact: Impact


def _ordered(tasks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return dict(sorted(tasks.items(), key=lambda kv: task_number(kv[0])))


def _status(task: dict[str, Any]) -> str:
    return str(task.get("status") or "pending")


def _paths(task: dict[str, Any]) -> list[str]:
    return [str(p) for p in task.get("focus_paths") or [] if p] + _listed_paths(task)


def dependents_of(graph: dict[str, list[str]], task_id: str) -> list[str]:
    """Every task that depends on ``task_id``, directly or through others, in id order."""
    found: set[str] = set()
    frontier = [task_id]
    while frontier:
        current = frontier.pop()
        for tid, deps in graph.items():
            if current in deps and tid not in found and tid != task_id:
                found.add(tid)
                frontier.append(tid)
    return sorted(found, key=task_number)


def check_task_set(items: list[tuple[str, Any]], existing: Callable[[str], bool] | None = None) -> list[str]:
    """Problems of a whole task set given as (``.task/IMPL-n.json``, decoded JSON) pairs:
    schema, id matching its file name, duplicates, unknown or self dependencies, cycles, count; with
    ``existing`` (is this repository path a file?) also files to modify that do not exist, as `wfqueue
    validate` and `wfqueue execute` check them."""
    loaded = []
    problems: list[str] = []
    for location, data in items:
        task, found = load_object(data, location)
        problems += [str(p) for p in found]
        if task is not None:
            loaded.append(task)
            expected = location.rsplit("/", 1)[-1].removesuffix(".json")
            if task.task.id != expected:
                problems.append(f"{location}: holds id {task.task.id}; a task file is named after its id")
    problems += [str(p) for p in check_plan(loaded, None, existing)]
    if not items:
        problems.append("a plan needs at least one task; this would leave none")
    if len(items) > MAX_TASKS:
        problems.append(f"Replan would create {len(items)} tasks (limit: {MAX_TASKS}); consider combining tasks, "
                        "splitting the session, or removing tasks")
    return problems


def _verification(tasks: dict[str, dict[str, Any]]) -> str:
    """The session's usual verification command: new tasks are checked like their siblings."""
    counts = Counter(str(t.get("convergence", {}).get("verification") or "") for t in tasks.values())
    counts.pop("", None)
    return counts.most_common(1)[0][0] if counts else LEGACY_VERIFICATION


def _new_task(tid: str, op: AddTask, session_id: str, verification: str, reason: str, when: str) -> dict[str, Any]:
    return {
        "id": tid, "title": op.title, "description": op.description, "depends_on": list(op.depends_on),
        "type": "feature", "effort": "medium", "focus_paths": [],
        "convergence": {"criteria": [f"{op.title.rstrip('…')} works as described"], "verification": verification,
                        "definition_of_done": f"{op.title.rstrip('…')} is implemented and its verification passes"},
        "rationale": f"Added by replan at {when}: {' '.join(reason.split())}",
        "source": {"tool": REPLAN_TOOL, "session_id": session_id},
    }


def _edit_files(task: dict[str, Any], value: str, existing: Callable[[str], bool] | None) -> None:
    """``files: a.py, new.py``: a path the task names keeps its entry (and action); a new one is created when
    the repository lacks it (a task cannot modify what is not there). One outside the repository is refused."""
    paths = list(dict.fromkeys(p for p in (part.strip().strip("`") for part in value.replace("、", ",")
                                           .replace("，", ",").split(",")) if p))  # each once: `a.py, a.py`
    kept: dict[str, list[dict[str, Any]]] = {}  # every entry of a path: one per symbol the task changes there
    for entry in task.get("files") or []:
        if isinstance(entry, dict):
            kept.setdefault(str(entry.get("path")), []).append(entry)

    def action(path: str) -> str:
        rel = repo_relative(path)
        return "create" if rel is not None and existing is not None and not existing(rel) else "modify"

    task["focus_paths"] = paths
    task["files"] = [entry for p in paths for entry in kept.get(p) or [{"path": p, "action": action(p)}]]


def _edit_field(task: dict[str, Any], op: UpdateTask, when: str, existing: Callable[[str], bool] | None) -> None:
    if op.field in ("title", "description"):
        task[op.field] = op.value
    elif op.field == "criterion":
        convergence = dict(task.get("convergence") or {})
        criteria = list(convergence.get("criteria") or [])
        if op.value not in criteria:
            criteria.append(op.value)  # more than 5 is reported by the schema check, not cut here
        task["convergence"] = {**convergence, "criteria": criteria}
    elif op.field == "step":
        task["implementation"] = [*(task.get("implementation") or []), op.value]
    elif op.field == "files":
        _edit_files(task, op.value, existing)
    else:  # free text of task mode: added to the description, dated, so the history stays readable
        task["description"] = f"{task.get('description', '').rstrip()}\n\nReplan {when[:10]}: {op.value}"


def _listed_paths(task: dict[str, Any]) -> list[str]:
    """The paths of the task's ``files[]`` entries."""
    return [str(entry["path"]) for entry in task.get("files") or [] if isinstance(entry, dict) and entry.get("path")]


def _still_named(task: dict[str, Any], dropped: list[str]) -> list[str]:
    """Warnings for files a replan took out of the task that its title, criteria or definition of done still name:
    the task then asks for a change `execute` rejects (it changes only the files a task lists)."""
    convergence = task.get("convergence") or {}
    texts = {"title": str(task.get("title") or ""), "criteria": " ".join(map(str, convergence.get("criteria") or [])),
             "definition of done": str(convergence.get("definition_of_done") or "")}
    warnings = []
    for path in dropped:
        said = re.compile(rf"(?<![\w./-]){re.escape(path)}(?![\w/-])")  # the path, not api.py inside myapp/api.py
        named_in = [name for name, text in texts.items() if said.search(text)]
        if named_in:
            # A replan adds criteria and sets the title; it replaces no criterion: the task file is where they change.
            warnings.append(f"{task['id']}'s {' and '.join(named_in)} still name {path}, no longer among its files: "
                            f"execute rejects a change to it; edit them in .task/{task['id']}.json")
    return warnings


def contradicting_dependencies(request: ChangeRequest) -> list[str]:
    """A task the request tells both to depend on a task and not to ("IMPL-5 depends on IMPL-1; IMPL-5 no longer
    depends on IMPL-1"): applied in turn, the second clause silently undid the first, and with it every other
    dependency the first had set. Pure."""
    said: dict[tuple[str, str], set[bool]] = {}
    for op in request.operations:
        if isinstance(op, EditDependencies):
            task = op.task_id or request.task_id or ""
            for dep in op.depends_on:
                said.setdefault((task, dep), set()).add(op.mode != "remove")
    return [f"the request says both that {task} depends on {dep} and that it does not; say one"
            for (task, dep), ways in said.items() if len(ways) > 1]


def _edit_dependencies(task: dict[str, Any], op: EditDependencies, warnings: list[str]) -> None:
    deps = list(task.get("depends_on") or [])
    if op.mode == "set":
        deps = list(op.depends_on)
    elif op.mode == "add":
        deps += [d for d in op.depends_on if d not in deps]
    else:
        missing = [d for d in op.depends_on if d not in deps]
        if missing:
            warnings.append(f"{task['id']} did not depend on {', '.join(missing)}")
        deps = [d for d in deps if d not in op.depends_on]
    task["depends_on"] = deps


def _next_number(snap: SessionSnapshot) -> int:
    """The number of the next new task: above every id the session has held, so an id a replan deleted is
    never given to a different task (replan_history and backups would name two tasks by one id)."""
    history = [tid for entry in snap.session.replan_history for tid in [*entry.added, *entry.deleted]]
    used = [task_number(t)[0] for t in [*snap.tasks, *history] if TASK_FILE.match(f"{t}.json")]
    return max(used, default=0) + 1


def _problems(snap: SessionSnapshot, items: list[tuple[str, Any]], existing: Callable[[str], bool] | None
              ) -> tuple[list[str], list[str]]:
    """(the problems of the draft this replan brings, those the session had before and keeps). What the session
    had (a file removed since planning, a dependency cycle a model wrote) is not this replan's doing, as the check
    after writing judges it too: refused, it blocked every replan but the one that fixes it, with a hint that blamed
    the request."""
    problems = check_task_set(items, existing)
    before = [(snap.task_files[t], d) for t, d in snap.tasks.items()]
    known = set(check_task_set(before, existing)) if before else set()
    return [p for p in problems if p not in known], [p for p in problems if p in known]


def plan_changes(snap: SessionSnapshot, request: ChangeRequest, selections: Selections, when: str,
                 repo_option: str = "", existing: Callable[[str], bool] | None = None) -> ReplanDraft:
    """The task set after the replan, and its impact. Raises only for ids that do not exist
    and answers the request exceeds; every other defect is listed in ``impact.problems``. ``repo_option``
    (wfqueue.sessions.repo_option) goes into the commands the warnings name. ``existing`` (is this repository
    path there? wfqueue.plan_check.on_disk) picks a new file's action and finds files to modify that are missing,
    so that the whole check after writing is also made before it."""
    check_selections(request, selections)
    sid = snap.session.session_id
    before = snap.tasks
    after = copy.deepcopy(before)
    warnings: list[str] = []
    notes: list[str] = []
    added: list[str] = []
    deleted: list[str] = []
    problems: list[str] = []
    explicit: list[str] = []  # tasks an operation names (not those a session-wide intent reaches)
    next_number = _next_number(snap)

    def require(tid: str) -> dict[str, Any]:
        if tid not in after:
            where = "deleted by this request" if tid in deleted else f"not found in session {sid}"
            known = sorted({*before, *added}, key=task_number)  # not narrowed by this request's own deletions
            raise TaskNotFoundError(f"Task {tid} {where}", hint=f"the session's tasks: {', '.join(known) or 'none'}")
        explicit.append(tid)
        return after[tid]

    if request.task_id is not None:
        require(request.task_id)
    problems += contradicting_dependencies(request)
    for op in request.operations:
        if isinstance(op, DeleteTasks):
            for tid in op.task_ids:
                require(tid)
                del after[tid]
                deleted.append(tid)
        elif isinstance(op, AddTask):
            tid = f"IMPL-{next_number}"
            next_number += 1
            after[tid] = _new_task(tid, op, sid, _verification(before), request.text, when)
            added.append(tid)
            warnings.append(f"{tid} has a placeholder criterion; refine it: wfqueue replan {tid} \"criterion: ...\" "
                            f"--session {sid}{repo_option}")
        elif isinstance(op, EditDependencies):
            _edit_dependencies(require(op.task_id or ""), op, warnings)
        elif isinstance(op, UpdateTask):
            _edit_field(require(request.task_id or ""), op, when, existing)
    if request.task_id in after and request.task_id in before:  # once every operation is done: a title set after
        listed = _listed_paths(after[request.task_id])         # the files no longer names the file taken out
        warnings += _still_named(after[request.task_id],
                                 [p for p in _listed_paths(before[request.task_id]) if p not in listed])
    for tid in [*deleted]:
        orphans = [t for t, task in after.items() if tid in (task.get("depends_on") or [])]
        for orphan in orphans:
            if selections.dependency_changes:  # keep the ordering: inherit what the deleted task waited for
                inherited = [d for d in before[tid].get("depends_on") or [] if d in after and d != orphan]
                deps = [d for d in after[orphan]["depends_on"] if d != tid]
                after[orphan]["depends_on"] = deps + [d for d in inherited if d not in deps]
                notes.append(f"{orphan} now depends on {', '.join(after[orphan]['depends_on']) or 'nothing'} "
                             f"instead of the deleted {tid}")
            else:
                problems.append(f"{orphan} depends on {tid}, which this replan deletes; dependencies are preserved "
                                f"by default: also say '{orphan} depends on ...' (or 'depends on nothing'), "
                                "or answer yes to dependency changes with --interactive")
    if request.intent is not None:
        config = request.intent.model_dump()
        if request.task_id is not None:
            targets = [request.task_id]
        else:
            targets = [t for t, task in after.items() if _status(task) != "completed"
                       and in_modules(_paths(task), selections.modules)]
            skipped = [t for t in after if t not in targets]
            if skipped:
                notes.append(f"execution config left as is on {', '.join(skipped)} (completed or outside the modules)")
        for tid in targets:
            task = after[tid]
            task["meta"] = {**(task.get("meta") or {}), "execution_config": config}
    updated = [t for t in after if t in before and after[t] != before[t]]
    if request.task_id is not None:
        downstream = dependents_of({t: list(d.get("depends_on") or []) for t, d in after.items()}, request.task_id)
        if selections.ripple == "yes" and request.task_id in updated:
            note = f"Upstream {request.task_id} changed by replan {when[:10]}: {' '.join(request.text.split())}"
            for tid in [t for t in downstream if request.task_id in (after[t].get("depends_on") or [])]:
                after[tid] = {**after[tid], "description": f"{after[tid].get('description', '').rstrip()}\n\n{note}"}
                updated.append(tid)
        elif selections.ripple == "analyze" and downstream:
            notes.append(f"dependents of {request.task_id} to review by hand: {', '.join(downstream)}")
    if selections.answered and selections.modules is not None:
        outside = [t for t in dict.fromkeys(explicit) if t in before
                   and not in_modules(_paths(before[t]), selections.modules)]
        problems += [f"{t} is outside the chosen modules ({', '.join(selections.modules)})" for t in outside]
    for tid in [t for t in [*updated, *deleted] if _status(before[t]) == "completed"]:
        warnings.append(f"Task {tid} is completed; consider creating a new task for additional work")
    after = _ordered(after)
    graph_before = {t: list(d.get("depends_on") or []) for t, d in before.items()}
    graph_after = {t: list(d.get("depends_on") or []) for t, d in after.items()}
    dependents = {t: [d for d in dependents_of(graph_after if t in after else graph_before, t) if d in after]
                  for t in [*updated, *deleted]}
    changes = ([TaskChange(task_id=t, action="create") for t in added]
               + [TaskChange(task_id=t, action="update", fields=sorted(k for k in {*before[t], *after[t]}
                                                                        if before[t].get(k) != after[t].get(k)))
                  for t in updated]
               + [TaskChange(task_id=t, action="delete") for t in deleted])
    touched = sorted({p for t in [*added, *updated] for p in _paths(after[t])} | {p for t in deleted
                                                                                  for p in _paths(before[t])})
    items = [(snap.task_files.get(t, f"{TASK_DIR}/{t}.json"), d) for t, d in after.items()]
    brought, inherited = _problems(snap, items, existing)
    impact = Impact(session_id=sid, mode="task" if request.task_id else "session", task_id=request.task_id,
                    scope=effective_scope(request, selections), reason=request.text,
                    added=added, updated=sorted(updated, key=task_number), deleted=deleted, changes=changes,
                    dependents={k: v for k, v in dependents.items() if v}, source_files=touched,
                    task_count_before=len(before), task_count_after=len(after),
                    execution_config=request.intent.model_dump() if request.intent else None,
                    warnings=warnings + [f"the plan had this before and still has it: {p}" for p in inherited],
                    notes=notes, problems=problems + brought)
    if impact.scope != selections.scope:
        impact.notes.append(f"scope {impact.scope}: the request itself adds or deletes tasks")
    return ReplanDraft(tasks=after, impact=impact)
