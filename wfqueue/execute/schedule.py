"""The execution schedule, decided by pure code: tasks in, waves and the critical path out.

A wave is a set of tasks that run at the same time: every dependency of each is
in an earlier wave, no two of them write the same file, and there are at most
``parallel`` of them. Ready tasks are taken longest-remaining-chain first (ties
in plan order), so the tasks on the critical path never wait behind others; a
ready task that shares a file with one already in the wave waits for the next
wave and the schedule says which file held it back.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from wfqueue.execute.model import ExecTask
from wfqueue.execute.validate import rejected
from wfqueue.plan_check import find_cycles

UNIT = 1.0  # the duration of a task without an estimate


class Wave(BaseModel):
    index: int = Field(ge=1)
    task_ids: list[str]


class FileWait(BaseModel):
    """``task_id`` was ready with ``after`` but waits for a later wave: both write ``file``."""

    task_id: str
    after: str
    file: str


class CriticalPath(BaseModel):
    """The longest dependency chain, first task first; ``length`` in the tasks' estimate unit (1 per task
    without one)."""

    task_ids: list[str]
    length: float
    estimated: bool = Field(description="True when some task on the plan carries an estimate")


class Schedule(BaseModel):
    parallel: int | None
    waves: list[Wave]
    file_waits: list[FileWait] = Field(default_factory=list)
    critical_path: CriticalPath
    # The schedule's own length: the sum over waves of each wave's longest task (>= the critical path).
    span: float

    def wave_of(self, task_id: str) -> int:
        return next(w.index for w in self.waves if task_id in w.task_ids)


def graph_problems(tasks: Iterable[ExecTask]) -> list[str]:
    """Duplicate ids, dependencies on unknown ids or on the task itself, and cycles: each one named."""
    problems: list[str] = []
    graph: dict[str, list[str]] = {}
    for task in tasks:
        if task.id in graph:
            problems.append(f"{task.id}: duplicate id; give each task a unique id")
            continue
        graph[task.id] = task.depends_on
    for task_id, deps in graph.items():
        for dep in deps:
            if dep == task_id:
                problems.append(f"{task_id}: depends on itself; remove it from depends_on")
            elif dep not in graph:
                problems.append(f"{task_id}: depends on {dep}, which no task in this plan has; fix the id or remove it")
    for cycle in find_cycles(graph):
        problems.append(f"dependency cycle {' -> '.join(cycle)}; remove one of these dependencies")
    return problems


def _topological(tasks: list[ExecTask]) -> list[ExecTask]:
    """Dependencies before dependents, otherwise in plan order (the graph is known to be acyclic)."""
    placed: set[str] = set()
    order: list[ExecTask] = []
    pending = list(tasks)
    while pending:
        ready = [t for t in pending if all(d in placed for d in t.depends_on)]
        order.extend(ready)
        placed.update(t.id for t in ready)
        pending = [t for t in pending if t.id not in placed]
    return order


def _duration(task: ExecTask) -> float:
    return task.estimate if task.estimate is not None else UNIT


def critical_path(tasks: list[ExecTask]) -> CriticalPath:
    """The longest chain of dependencies by summed duration; on a tie the chain that ends first in plan order."""
    position = {t.id: n for n, t in enumerate(tasks)}
    finish: dict[str, float] = {}
    previous: dict[str, str | None] = {}
    for task in _topological(tasks):
        before = max(task.depends_on, key=lambda d: (finish[d], -position[d]), default=None)
        finish[task.id] = (finish[before] if before else 0.0) + _duration(task)
        previous[task.id] = before
    if not tasks:
        return CriticalPath(task_ids=[], length=0.0, estimated=False)
    end: str | None = max(finish, key=lambda t: (finish[t], -position[t]))
    chain: list[str] = []
    while end is not None:
        chain.append(end)
        end = previous[end]
    return CriticalPath(task_ids=chain[::-1], length=finish[chain[0]],
                        estimated=any(t.estimate is not None for t in tasks))


def _remaining_chain(tasks: list[ExecTask]) -> dict[str, float]:
    """Per task, the longest duration from its start to the end of the plan (itself included)."""
    dependents: dict[str, list[str]] = {t.id: [] for t in tasks}
    for task in tasks:
        for dep in task.depends_on:
            dependents[dep].append(task.id)
    chain: dict[str, float] = {}
    for task in reversed(_topological(tasks)):
        chain[task.id] = _duration(task) + max((chain[d] for d in dependents[task.id]), default=0.0)
    return chain


def build_schedule(tasks: list[ExecTask], parallel: int | None = None) -> Schedule:
    """Waves, file waits and the critical path of a plan; refuses a plan whose dependencies cannot be ordered."""
    if parallel is not None and parallel < 1:
        raise ValueError("parallel must be at least 1")
    problems = graph_problems(tasks)
    if problems:
        raise rejected(problems, hint="fix the tasks' ids and depends_on, then run the command again")
    position = {t.id: n for n, t in enumerate(tasks)}
    chain = _remaining_chain(tasks)
    done: set[str] = set()
    pending = list(tasks)
    waves: list[Wave] = []
    waits: dict[str, FileWait] = {}
    while pending:
        ready = sorted((t for t in pending if all(d in done for d in t.depends_on)),
                       key=lambda t: (-chain[t.id], position[t.id]))
        members: list[ExecTask] = []
        writer: dict[str, str] = {}
        for task in ready:
            if parallel is not None and len(members) >= parallel:
                break
            clash = next((f for f in task.files.written() if f in writer), None)
            if clash is not None:
                # The latest writer that held it back (not the first: the task may be held back again).
                waits[task.id] = FileWait(task_id=task.id, after=writer[clash], file=clash)
                continue
            members.append(task)
            writer.update(dict.fromkeys(task.files.written(), task.id))
        waves.append(Wave(index=len(waves) + 1, task_ids=[t.id for t in members]))
        done.update(t.id for t in members)
        pending = [t for t in pending if t.id not in done]
    span = sum(max(_duration(t) for t in tasks if t.id in wave.task_ids) for wave in waves)
    return Schedule(parallel=parallel, waves=waves, file_waits=list(waits.values()),
                    critical_path=critical_path(tasks), span=span)


def slots_needed(waves: list[list[str]], parallel: int | None) -> int:
    """Worker slots an execution needs: its widest wave, at most ``parallel``. Pure."""
    widest = max(len(wave) for wave in waves)
    return min(widest, parallel or widest)
