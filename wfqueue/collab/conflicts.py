"""Conflict detection over the tasks of a collaborative plan. Pure and deterministic.

Rules (docs/ARTIFACTS.md §3): file_conflict, dependency_cycle, strategy_conflict,
dangling_dependency, id_out_of_range. Results are sorted so that the same plan
always yields the same CONFLICT-NNN numbering.
"""

from __future__ import annotations

from collections import defaultdict

from wfqueue.collab.models import Conflict, NoteTask
from wfqueue.collab.note import collection_paused

_RISKY = {"high", "medium"}


def _conflict(**fields: object) -> Conflict:
    return Conflict(id="CONFLICT-000", **fields)  # numbered once all are known


def _listed_once(tasks: list[NoteTask]) -> list[NoteTask]:
    """``tasks`` in order, less repeats of a task already listed (the same one, or an equal one: only tasks
    of its own id can equal it, so a shared file changed by thousands of tasks does not compare each with
    all the others)."""
    by_id: dict[str, list[NoteTask]] = {}
    kept = []
    for task in tasks:
        same_id = by_id.setdefault(task.id, [])
        if not any(other is task or other == task for other in same_id):
            same_id.append(task)
            kept.append(task)
    return kept


def file_conflicts(tasks: list[NoteTask]) -> list[Conflict]:
    # The first task at each location, and the list of all of them only where another comes: most locations
    # of a large plan have a single task, and this loop runs once per modification point. A task met again
    # where it was first is skipped here, the other repeats are dropped by _listed_once.
    first_at: dict[str, NoteTask] = {}
    shared: dict[str, list[NoteTask]] = {}
    for task in tasks:
        for point in task.modification_points:
            key = f"{point.file}:{point.location}" if point.location else point.file
            first = first_at.setdefault(key, task)
            if first is not task:
                listed = shared.get(key)
                if listed is None:
                    shared[key] = [first, task]
                else:
                    listed.append(task)
    found = []
    for location in sorted(shared):
        involved = _listed_once(shared[location])
        agents = sorted({t.area for t in involved})
        if len(agents) < 2:
            continue
        ids = [t.id for t in involved]
        found.append(
            _conflict(
                type="file_conflict", severity="high", tasks_involved=ids, agents_involved=agents,
                location=location, file=location.split(":", 1)[0],
                description=f"{location} is modified by {len(agents)} agents",
                details=f"{', '.join(ids)} each change {location}",
                suggested_resolution="Coordinate the modification order or merge the changes into one task",
            )
        )
    return found


def strategy_conflicts(tasks: list[NoteTask]) -> list[Conflict]:
    by_file: dict[str, list[NoteTask]] = defaultdict(list)
    for task in tasks:
        if task.conflict_risk.strip().lower() not in _RISKY:
            continue
        for file in sorted({p.file for p in task.modification_points}):
            by_file[file].append(task)
    found = []
    for file, involved in sorted(by_file.items()):
        agents = sorted({t.area for t in involved})
        if len(agents) < 2:
            continue
        ids = [t.id for t in involved]
        found.append(
            _conflict(
                type="strategy_conflict", severity="medium", tasks_involved=ids, agents_involved=agents,
                file=file, description=f"{file} is a risky change for {len(agents)} agents",
                details=f"medium/high-risk tasks {', '.join(ids)} from {', '.join(agents)} touch {file}",
                suggested_resolution="Review the approaches and agree on a single strategy for this file",
            )
        )
    return found


def _strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm over ``graph`` (each node's children sorted), iterative so 10 000-task plans do
    not hit the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child in index:
                    if child in on_stack and index[child] < low[node]:
                        low[node] = index[child]
                elif child in graph:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
            else:  # every child seen: ``node`` is finished
                work.pop()
                if work and low[node] < low[work[-1][0]]:
                    low[work[-1][0]] = low[node]
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _cycle_path(graph: dict[str, list[str]], members: list[str]) -> list[str]:
    """One concrete cycle inside a strongly connected component, from its smallest id."""
    inside = set(members)
    start = members[0]
    parent: dict[str, str] = {}
    queue = [start]
    seen = {start}
    while queue:  # breadth first: the shortest way back to the start
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if child in inside and child not in seen:
                seen.add(child)
                parent[child] = node
                queue.append(child)
    return [start, start]


def _points_backwards(tasks: list[NoteTask], number: dict[str, int]) -> bool:
    """Whether every dependency on a task of the plan is on a lower task number: then there is no cycle.
    Plans are mostly written that way, and the check is much cheaper than finding components."""
    for task in tasks:
        if task.depends_on:  # a plain loop: cheaper than a generator over 10 000 tasks
            own = number[task.id]
            for dep in task.depends_on:
                other = number.get(dep)
                if other is not None and other >= own:
                    return False
    return True


def dependency_cycles(tasks: list[NoteTask], number: dict[str, int] | None = None) -> list[Conflict]:
    """``number``: each task's number by id, when the caller has it already."""
    if _points_backwards(tasks, {t.id: t.number for t in tasks} if number is None else number):
        return []
    graph = {t.id: sorted(set(t.depends_on)) for t in tasks}
    area = {t.id: t.area for t in tasks}
    found = []
    for members in _strongly_connected(graph):
        if len(members) == 1 and members[0] not in graph[members[0]]:
            continue
        path = _cycle_path(graph, members)
        more = f" (the loop spans {len(members)} tasks)" if len(members) > len(path) - 1 else ""
        found.append(
            _conflict(
                type="dependency_cycle", severity="critical", tasks_involved=path[:-1],
                agents_involved=sorted({area[t] for t in members}),
                description=f"dependency cycle {' → '.join(path)}",
                details=f"cycle {' → '.join(path)}{more}",
                suggested_resolution="Remove or reorganise one of these dependencies",
            )
        )
    return found


def dangling_dependencies(tasks: list[NoteTask]) -> list[Conflict]:
    known = {t.id for t in tasks}
    if known.issuperset(dep for t in tasks for dep in t.depends_on):
        return []
    found = []
    for task in tasks:
        missing = [dep for dep in task.depends_on if dep not in known]
        if missing:
            found.append(
                _conflict(
                    type="dangling_dependency", severity="high", tasks_involved=[task.id, *missing],
                    agents_involved=[task.area],
                    description=f"{task.id} depends on {', '.join(missing)}, which no task has",
                    details=f"unknown ids: {', '.join(missing)}",
                    suggested_resolution="Point the dependency at an existing task or remove it",
                )
            )
    return found


def ids_out_of_range(tasks: list[NoteTask], ranges: dict[str, tuple[int, int]]) -> list[Conflict]:
    if not ranges:
        return []
    found = []
    for task in tasks:
        bounds = ranges.get(task.area)
        if bounds is None or bounds[0] <= task.number <= bounds[1]:
            continue
        found.append(
            _conflict(
                type="id_out_of_range", severity="high", tasks_involved=[task.id], agents_involved=[task.area],
                description=f"{task.id} is outside {task.area}'s range TASK-{bounds[0]:03d}..TASK-{bounds[1]:03d}",
                details=f"{task.area} owns ids {bounds[0]}..{bounds[1]}",
                suggested_resolution="Renumber the task inside its agent's range and update references to it",
            )
        )
    return found


def detect_conflicts(tasks: list[NoteTask], ranges: dict[str, tuple[int, int]]) -> list[Conflict]:
    """All conflicts, numbered CONFLICT-001.. in a stable order (by severity, then type).

    Tasks are sorted by id first, so the document order of the note does not matter."""
    with collection_paused():  # the conflicts of a large plan are thousands of objects, all kept
        number = {t.id: t.number for t in tasks}  # once, for the sort and the cycle check
        tasks = sorted(tasks, key=lambda t: (number[t.id], t.area))
        found = (
            dependency_cycles(tasks, number)
            + file_conflicts(tasks)
            + dangling_dependencies(tasks)
            + ids_out_of_range(tasks, ranges)
            + strategy_conflicts(tasks)
        )
    return [c.model_copy(update={"id": f"CONFLICT-{n:03d}"}) for n, c in enumerate(found, start=1)]
