"""Semantic repair of provider-written tasks, after schema validation. Pure and deterministic.

A schema-valid answer can still be wrong in ways code can fix without asking
the provider again:

- ``renumbered``: an id that is not ``{prefix}{number}`` in canonical form,
  lies outside the agent's id range, or repeats an earlier id gets a free id
  inside the range (smallest first, in task order); with ``sequential`` task
  *i* simply gets the *i*-th id of the range. Every ``depends_on`` reference
  to the old id is rewritten.
- ``dropped_file``: a ``files[]`` entry that ``wfqueue validate`` would refuse
  (``plan_check.file_faults``: a path outside the repository or under .git/ or
  .workflow/, a folder, a second action for one path, a file to modify or
  delete that does not exist) is dropped. The task is kept, even when no file is
  left (the detail says so).
- ``removed_unknown_dependency``: a dependency on an id that is neither a task
  of the plan nor in ``known_external_ids`` (collab agents may depend on other
  agents' ids) is removed.
- ``removed_self_dependency``: a task that depends on itself loses that entry.

Cycles are NOT broken here: collab conflict detection and ``wfqueue verify``
report them. A lite plan, which nothing reviews after it is written, breaks them
with ``break_cycles`` (``removed_cyclic_dependency``). References are resolved
against the ids the provider wrote (a reference to a duplicated id means its
first task, also from the duplicate itself), before
any renumbering, so a stale reference never lands on an id freed or assigned by
the repair; a reference that resolves to the task itself is a self-dependency.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from wfqueue.plan_check import FileActionsInPlan, file_faults, repo_relative
from wfqueue.unified_task import TaskFile, TaskSource, UnifiedTask

__all__ = [
    "IdRanges",
    "Repair",
    "RepairKind",
    "break_cycles",
    "fill_source",
    "format_id",
    "repair_tasks",
]

RepairKind = Literal[
    # tasks (this module)
    "renumbered", "dropped_file", "created_to_modified", "removed_unknown_dependency", "removed_self_dependency",
    "removed_duplicate_dependency", "dropped_task",
    "removed_cyclic_dependency",
    # collab sub-domains (wfqueue.collab.split)
    "renamed_sub_domain", "merged_sub_domain", "asked_again", "single_sub_domain",
    # lite angles (wfqueue.lite.angle_repair)
    "renamed_angle", "merged_angle", "dropped_angle", "default_angles", "forced_exploration",
    # workflow-session conflicts (wfqueue.workflow_session.conflict_repair)
    "reset_recommendation",
]


class Repair(BaseModel):
    """One change made to a provider's answer after it validated.

    ``task_id`` names what was repaired, after the repair: a task id, or for answers
    without tasks the sub-domain, angle or conflict id (the field keeps its name so
    recorded repairs stay readable)."""

    kind: RepairKind
    task_id: str
    detail: str


def format_id(prefix: str, number: int, digits: int = 3) -> str:
    """``TASK-007`` (digits 3) or ``IMPL-7`` (digits 1); numbers wider than ``digits`` just grow."""
    return f"{prefix}{number:0{digits}d}"


class IdRanges:
    """The canonical ids of some ranges (e.g. those the other collab agents own), answering ``in``
    without listing them: with 100 agents of 100 ids each, every agent would otherwise format and
    hash 9 900 strings."""

    def __init__(self, prefix: str, ranges: Iterable[tuple[int, int]], digits: int = 3) -> None:
        self.prefix, self.digits = prefix, digits
        self.ranges = tuple(ranges)
        # At most 18 digits: no range goes that far, and int() refuses thousands of digits (a model's invention).
        self._pattern = re.compile(rf"^{re.escape(prefix)}(\d{{1,18}})$")

    def __contains__(self, task_id: object) -> bool:
        if not isinstance(task_id, str):
            return False
        number = _canonical_number(task_id, self._pattern, self.prefix, self.digits)
        return number is not None and any(low <= number <= high for low, high in self.ranges)


def fill_source(tasks: Iterable[UnifiedTask], *, tool: str, session_id: str) -> list[UnifiedTask]:
    """Tasks without ``source`` get ``{tool, session_id, original_id: the id as written}``;
    tasks that have one (the offline planners set it) are returned as they are."""
    return [
        t if t.source is not None
        else t.model_copy(update={"source": TaskSource(tool=tool, session_id=session_id, original_id=t.id)})
        for t in tasks
    ]


def _canonical_number(task_id: str, pattern: re.Pattern[str], prefix: str, digits: int) -> int | None:
    match = pattern.match(task_id)
    if match is None:
        return None
    number = int(match.group(1))
    return number if format_id(prefix, number, digits) == task_id else None


def _new_ids(
    ids: Sequence[str], prefix: str, id_range: tuple[int, int] | None, digits: int, sequential: bool
) -> list[str | None]:
    """The id each task ends up with, position by position; None for a task the range has no id left for."""
    if sequential:
        start = id_range[0] if id_range is not None else 1
        return [format_id(prefix, start + i, digits) for i in range(len(ids))]
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    low, high = id_range if id_range is not None else (1, None)
    result: list[str | None] = []
    used: set[int] = set()
    for task_id in ids:
        number = _canonical_number(task_id, pattern, prefix, digits)
        fits = number is not None and number >= low and (high is None or number <= high) and number not in used
        if fits:
            assert number is not None
            used.add(number)
            result.append(task_id)
        else:
            result.append(None)
    candidate = low
    for position in range(len(ids)):
        if result[position] is not None:
            continue
        while candidate in used:
            candidate += 1
        if high is not None and candidate > high:
            # The range is full: kept under its own id, it took another agent's (a duplicate id the plan's
            # validation then refused); it is dropped, and said to be.
            continue
        used.add(candidate)
        result[position] = format_id(prefix, candidate, digits)
    return result


def _why_renumbered(task_id: str, first_position: int, position: int, id_range: tuple[int, int] | None,
                    prefix: str, digits: int, sequential: bool) -> str:
    if first_position != position:
        return "duplicate id"
    if sequential:
        return "ids follow the task order"
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    if _canonical_number(task_id, pattern, prefix, digits) is None:
        return f"not a {format_id(prefix, 1, digits)}-style id"
    if id_range is None:
        return "not a positive number"
    return f"outside the range {format_id(prefix, id_range[0], digits)}..{format_id(prefix, id_range[1], digits)}"


def repair_tasks(
    tasks: list[UnifiedTask],
    *,
    id_prefix: str,
    id_range: tuple[int, int] | None,
    exists: Callable[[str], bool],
    is_folder: Callable[[str], bool] = lambda _: False,
    known_external_ids: Container[str] = frozenset(),
    digits: int = 3,
    sequential: bool = False,
    leaves: Callable[[str], bool] | None = None,
) -> tuple[list[UnifiedTask], list[Repair]]:
    """Repair ``tasks``; returns the repaired tasks (same order; untouched tasks are the same
    objects) and what was repaired, in task order.

    ``id_range`` (inclusive) is where ids must lie; None allows any positive number.
    ``exists`` answers for a normalised repo-relative path. ``digits`` is the zero
    padding of canonical ids (3 for TASK-001, 1 for IMPL-1). With ``sequential`` the
    ids are the range's first numbers in task order (lite plans, workflow sessions).
    """
    tasks, dropped_repairs, inherited = _without_fileless(tasks, exists, is_folder, leaves)
    dropped = {r.task_id for r in dropped_repairs if r.task_id is not None}
    given = _new_ids([t.id for t in tasks], id_prefix, id_range, digits, sequential)
    if None in given:  # more tasks than the range has ids: those it has none left for go
        assert id_range is not None  # only a range runs out
        low_id, high_id = format_id(id_prefix, id_range[0], digits), format_id(id_prefix, id_range[1], digits)
        dropped_repairs += [Repair(kind="dropped_task", task_id=task.id,
                                   detail=f"dropped {task.id} ({task.title}): the range {low_id}..{high_id} has no "
                                          "id left for it")
                            for task, new in zip(tasks, given, strict=True) if new is None]
        dropped |= {task.id for task, new in zip(tasks, given, strict=True) if new is None}
        tasks = [task for task, new in zip(tasks, given, strict=True) if new is not None]
    tasks, existing_created = _existing_created_as_modified(tasks, exists)  # keyed by the kept tasks' positions
    new_ids = [new for new in given if new is not None]
    old_ids = [t.id for t in tasks]
    first_position: dict[str, int] = {}
    for position, task_id in enumerate(old_ids):
        first_position.setdefault(task_id, position)
    # A reference names the first task that carried the id.
    resolve = {old: new_ids[position] for old, position in first_position.items()}

    # What the answer's tasks create, under the ids they end up with: a repair names the creator by its new id.
    created = FileActionsInPlan([t.model_copy(update={
        "id": new_ids[position], "depends_on": [resolve.get(d, d) for d in _through_dropped(t.depends_on, inherited,
                                                                                            resolve)]})
        for position, t in enumerate(tasks)])
    repairs: list[Repair] = list(dropped_repairs)  # first: they explain the references removed below
    repaired: list[UnifiedTask] = []
    rewritten_in: dict[str, list[str]] = {}
    per_task: list[tuple[list[str], list[Repair], list[Repair], list[TaskFile]]] = []
    for position, task in enumerate(tasks):
        new_id = new_ids[position]
        deps: list[str] = []
        dep_repairs: list[Repair] = []
        for dep, passed_on in _named_or_passed_on(task.depends_on, inherited, resolve, new_id, dep_repairs):
            if dep in dropped and dep not in resolve:  # not another agent's task of that id: this one, gone
                dep_repairs.append(Repair(kind="removed_unknown_dependency", task_id=new_id,
                                          detail=f"removed dependency on the dropped task {dep}"))
                continue
            if dep in resolve or dep in known_external_ids:
                again = resolve.get(dep, dep)
                if again in deps:  # named twice (or two ids that became one): once is what it means
                    if not passed_on:
                        dep_repairs.append(Repair(kind="removed_duplicate_dependency", task_id=new_id,
                                                  detail=f"{new_id} named {dep} more than once"))
                    continue
            if dep in resolve:
                target = resolve[dep]
                if target == new_id:
                    if not passed_on:  # a dropped task's own dependency on this one is no choice of this one's
                        dep_repairs.append(Repair(kind="removed_self_dependency", task_id=new_id,
                                                  detail=f"{new_id} depended on itself ({dep})"))
                    continue
                if target != dep:
                    rewritten_in.setdefault(dep, [])
                    if new_id not in rewritten_in[dep]:
                        rewritten_in[dep].append(new_id)
                deps.append(target)
            elif dep in known_external_ids:
                deps.append(dep)
            else:
                dep_repairs.append(Repair(kind="removed_unknown_dependency", task_id=new_id,
                                          detail=f"removed dependency on {dep}: no task has this id"))
        faults = file_faults(task.files, exists=exists, is_folder=is_folder, task_id=new_id, plan=created,
                             leaves=leaves)
        files = [entry for entry, fault in zip(task.files, faults, strict=True) if fault is None]
        file_repairs = [Repair(kind="dropped_file", task_id=new_id,
                               detail=f"dropped {entry.path} ({entry.action}): it {fault.what}")
                        for entry, fault in zip(task.files, faults, strict=True) if fault is not None]
        if file_repairs and not files:  # only when it was every task's lot (_without_fileless keeps them then)
            last = file_repairs[-1]
            file_repairs[-1] = last.model_copy(update={"detail": last.detail + "; the task has no files left"})
        per_task.append((deps, dep_repairs, file_repairs, files))

    for position, task in enumerate(tasks):
        new_id = new_ids[position]
        deps, dep_repairs, file_repairs, files = per_task[position]
        if new_id != task.id:
            why = _why_renumbered(task.id, first_position[task.id], position, id_range, id_prefix, digits,
                                  sequential)
            detail = f"{task.id} -> {new_id} ({why})"
            if first_position[task.id] == position and rewritten_in.get(task.id):
                detail += f"; references rewritten in {', '.join(rewritten_in[task.id])}"
            repairs.append(Repair(kind="renumbered", task_id=new_id, detail=detail))
        repairs += [r.model_copy(update={"task_id": new_id}) for r in existing_created.get(position, [])]
        repairs += dep_repairs + file_repairs
        changes: dict[str, object] = {}
        if new_id != task.id:
            changes["id"] = new_id
        if deps != task.depends_on:
            changes["depends_on"] = deps
        if file_repairs:
            changes["files"] = files
        repaired.append(task.model_copy(update=changes) if changes else task)
    return repaired, repairs


def _named_or_passed_on(depends_on: list[str], inherited: dict[str, list[str]], resolve: Mapping[str, str],
                        new_id: str, said: list[Repair]) -> list[tuple[str, bool]]:
    """Each dependency as the answer named it, or, for a dropped task, what that one waited for (True: passed on),
    the change said in ``said``."""
    out: list[tuple[str, bool]] = []
    for dep in depends_on:
        if dep not in inherited or dep in resolve:
            out.append((dep, False))
            continue
        instead = [above for above in _through_dropped([dep], inherited, resolve)
                   if resolve.get(above, above) != new_id]  # what it waited for that this one is, it need not
        said.append(Repair(kind="removed_unknown_dependency", task_id=new_id, detail=(
            f"its dependency on the dropped task {dep} passed on to what that one waited for: {', '.join(instead)}"
            if instead else f"removed dependency on the dropped task {dep}")))
        out += [(above, True) for above in instead]
    return out


def _through_dropped(depends_on: list[str], inherited: dict[str, list[str]], resolve: Mapping[str, str]) -> list[str]:
    """``depends_on`` with each dropped task (``inherited``: its own dependencies, by the ids the answer gave)
    replaced by what it depended on, transitively: a task after a dropped one still comes after what that one
    waited for (the task creating the file it changes). An id another task still carries is that task's."""
    def dropped(dep: str) -> bool:
        return dep in inherited and dep not in resolve

    out: list[str] = []
    for dep in depends_on:
        if not dropped(dep):
            out.append(dep)  # as the answer wrote it (a repeat is said by the caller's repair)
            continue
        pending, seen = list(inherited[dep]), {dep}
        while pending:
            above = pending.pop(0)
            if above in seen:
                continue
            seen.add(above)
            if dropped(above):
                pending[:0] = inherited[above]
            elif above not in out and above not in depends_on:
                out.append(above)
    return out


def _without_fileless(tasks: list[UnifiedTask], exists: Callable[[str], bool], is_folder: Callable[[str], bool],
                      leaves: Callable[[str], bool] | None
                      ) -> tuple[list[UnifiedTask], list[Repair], dict[str, list[str]]]:
    """``tasks`` less those none of whose files can be changed (each outside the repository, missing though to be
    modified, a folder...), a repair for each, and each dropped task's dependencies (its dependents inherit them).
    Such a task was kept with no files: the plan read completed and validated, and its execution paid an agent whose
    every change was then rejected for files the task does not name (new tests aside). A task that names no file
    at all is left as it is, and so are they all when none would be left: a plan is at least one task."""
    remaining, repairs, inherited = list(tasks), list[Repair](), dict[str, list[str]]()
    while True:  # a task whose only file a dropped one created is dropped in turn
        kept_ids = {t.id: t.id for t in remaining}
        rewired = [t.model_copy(update={"depends_on": _through_dropped(t.depends_on, inherited, kept_ids)})
                   for t in remaining]
        checked, _ = _existing_created_as_modified(rewired, exists)  # as the repair then checks them (a created
        plan = FileActionsInPlan(checked)                            # file the repository has: one to modify)
        dropped_now: list[UnifiedTask] = []
        for task, as_checked in zip(remaining, checked, strict=True):
            faults = file_faults(as_checked.files, exists=exists, is_folder=is_folder, task_id=task.id, plan=plan,
                                 leaves=leaves)
            if task.files and all(fault is not None for fault in faults):
                why = "; ".join(dict.fromkeys(f"{entry.path} {fault.what}" for entry, fault in
                                              zip(task.files, faults, strict=True) if fault is not None))
                repairs.append(Repair(kind="dropped_task", task_id=task.id, detail=f"dropped {task.id} "
                                      f"({task.title}): none of its files can be changed ({why})"))
                dropped_now.append(task)
        if not dropped_now:
            return remaining, repairs, inherited
        if len(dropped_now) == len(remaining):
            return tasks, [], {}  # none would be left: a plan is at least one task
        inherited |= {t.id: list(t.depends_on) for t in dropped_now}
        remaining = [t for t in remaining if all(t is not gone for gone in dropped_now)]


def _existing_created_as_modified(tasks: list[UnifiedTask], exists: Callable[[str], bool]
                                  ) -> tuple[list[UnifiedTask], dict[int, list[Repair]]]:
    """``tasks`` with "create" of a file the repository has turned into "modify", and the repairs by task position.
    A coding agent told to create a file that is there writes it from scratch, and the file's code is lost."""
    repaired: list[UnifiedTask] = []
    repairs: dict[int, list[Repair]] = {}
    plan = FileActionsInPlan(tasks)  # a task after one deleting the file may create it again (plan_check agrees)
    for position, task in enumerate(tasks):
        files = list(task.files)
        for index, entry in enumerate(files):
            rel = repo_relative(entry.path)
            if (entry.action == "create" and rel is not None and exists(rel)
                    and not plan.comes_after(task.id, plan.deleters(rel))):
                files[index] = entry.model_copy(update={"action": "modify"})
                repairs.setdefault(position, []).append(Repair(
                    kind="created_to_modified", task_id=task.id,
                    detail=f"{entry.path} is to be modified, not created: the repository has it"))
        repaired.append(task.model_copy(update={"files": files}) if position in repairs else task)
    return repaired, repairs


def break_cycles(tasks: list[UnifiedTask]) -> tuple[list[UnifiedTask], list[Repair]]:
    """Tasks without dependency cycles: a dependency on a LATER task of the list that closes a cycle is
    removed (in task order). Dependencies on earlier tasks never form a cycle among themselves, so the
    ones kept are those that follow the plan's order. Unknown ids are left alone (``repair_tasks``)."""
    position = {t.id: n for n, t in enumerate(tasks)}
    edges: dict[str, list[str]] = {t.id: [d for d in t.depends_on if position.get(d, len(tasks)) < position[t.id]]
                                   for t in tasks}

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                stack += edges.get(node, [])
        return False

    repairs: list[Repair] = []
    result: list[UnifiedTask] = []
    for task in tasks:
        removed = []
        for dep in task.depends_on:
            if dep not in position or position[dep] < position[task.id]:
                continue
            if reaches(dep, task.id):
                removed.append(dep)
                repairs.append(Repair(kind="removed_cyclic_dependency", task_id=task.id,
                                      detail=f"removed dependency on {dep}: {dep} already depends on {task.id}, "
                                             "directly or through other tasks"))
            else:
                edges[task.id].append(dep)
        if removed:
            task = task.model_copy(update={"depends_on": [d for d in task.depends_on if d not in removed]})
        result.append(task)
    return result, repairs


def repairs_section(title: str, intro: str, repairs: list[Repair]) -> list[str]:
    """A plan.md section listing ``repairs`` (nothing when there are none): what code changed in a model's answer
    (a task dropped, a file dropped, ids renumbered) is said where the plan is read, not only in a JSON field."""
    if not repairs:
        return []
    return [f"## {title}", "", intro, "",
            *[f"- {r.kind} `{r.task_id}`: {' '.join(r.detail.split())}" for r in repairs], ""]
