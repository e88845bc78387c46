"""The execution schedule: dependency waves, no two writers of one file at once, the parallel cap, the
critical path, and plans whose dependencies cannot be ordered refused with every problem."""

from __future__ import annotations

import itertools
import random

import pytest

from wfqueue.errors import BadInputError, PlanRejectedError
from wfqueue.execute.model import ExecTask, TaskFiles
from wfqueue.execute.schedule import Schedule, build_schedule


def task(task_id: str, *deps: str, writes: tuple[str, ...] = (), creates: tuple[str, ...] = (),
         estimate: float | None = None) -> ExecTask:
    return ExecTask(id=task_id, title=f"do {task_id}", description="change things", depends_on=list(deps),
                    files=TaskFiles(modify=list(writes), create=list(creates)), verification="python -m pytest -q",
                    definition_of_done="tests pass", criteria=["tests pass"], location=f"tasks.jsonl:{task_id}",
                    estimate=estimate)


def waves(schedule: Schedule) -> list[list[str]]:
    return [w.task_ids for w in schedule.waves]


def test_tasks_wait_for_their_dependencies_and_independent_ones_run_together() -> None:
    plan = [task("A", writes=("a.py",)), task("B", "A", writes=("b.py",)), task("C", writes=("c.py",)),
            task("D", "B", "C", writes=("d.py",))]
    schedule = build_schedule(plan)
    assert waves(schedule) == [["A", "C"], ["B"], ["D"]]
    assert [w.index for w in schedule.waves] == [1, 2, 3]
    assert schedule.wave_of("D") == 3


def test_two_writers_of_one_file_never_share_a_wave_even_when_dependencies_allow() -> None:
    plan = [task("A", writes=("api/handlers.py",)), task("B", creates=("api/limits.py",), writes=("api/handlers.py",)),
            task("C", writes=("storage/db.py",))]
    schedule = build_schedule(plan)
    assert waves(schedule) == [["A", "C"], ["B"]]
    [wait] = schedule.file_waits
    assert (wait.task_id, wait.after, wait.file) == ("B", "A", "api/handlers.py")


def test_a_task_held_back_twice_waits_for_the_writer_of_the_wave_before_its_own() -> None:
    """The dry run said "C waits for A", though A ended in wave 1 and C ran in wave 3, after B."""
    schedule = build_schedule([task(name, writes=("config.py",)) for name in "ABC"])
    assert waves(schedule) == [["A"], ["B"], ["C"]]
    assert [(w.task_id, w.after) for w in schedule.file_waits] == [("B", "A"), ("C", "B")]


def test_a_created_file_counts_as_written() -> None:
    schedule = build_schedule([task("A", creates=("new.py",)), task("B", writes=("new.py",))])
    assert waves(schedule) == [["A"], ["B"]]


def test_tasks_naming_no_file_conflict_with_nothing() -> None:
    assert waves(build_schedule([task("A"), task("B"), task("C")])) == [["A", "B", "C"]]


def test_parallel_caps_the_tasks_in_flight() -> None:
    plan = [task(f"T{n}", writes=(f"f{n}.py",)) for n in range(5)]
    assert waves(build_schedule(plan, parallel=2)) == [["T0", "T1"], ["T2", "T3"], ["T4"]]
    assert waves(build_schedule(plan, parallel=1)) == [[f"T{n}"] for n in range(5)]
    assert waves(build_schedule(plan)) == [[f"T{n}" for n in range(5)]]
    with pytest.raises(ValueError):
        build_schedule(plan, parallel=0)


def test_the_longest_remaining_chain_goes_first_when_slots_are_scarce() -> None:
    # X is alone; Y starts a chain of three. With one slot, Y must not wait behind X.
    plan = [task("X"), task("Y"), task("Y2", "Y"), task("Y3", "Y2")]
    schedule = build_schedule(plan, parallel=1)
    assert waves(schedule)[0] == ["Y"]
    assert schedule.span == 4


def test_critical_path_in_units_when_no_estimates() -> None:
    plan = [task("A"), task("B", "A"), task("C", "A"), task("D", "C"), task("E")]
    path = build_schedule(plan).critical_path
    assert path.task_ids == ["A", "C", "D"]
    assert path.length == 3 and not path.estimated


def test_critical_path_weighs_estimates() -> None:
    plan = [task("A", estimate=1), task("B", "A", estimate=1), task("C", estimate=5), task("D", "C", estimate=0.5)]
    schedule = build_schedule(plan)
    assert schedule.critical_path.task_ids == ["C", "D"]
    assert schedule.critical_path.length == 5.5 and schedule.critical_path.estimated
    assert schedule.span == 5 + 1  # wave 1: A and C (longest 5); wave 2: B and D (longest 1)


def test_file_waits_lengthen_the_span_not_the_critical_path() -> None:
    schedule = build_schedule([task("A", writes=("x.py",)), task("B", writes=("x.py",))])
    assert schedule.critical_path.length == 1
    assert schedule.span == 2


def test_cycles_and_dangling_dependencies_are_refused_all_at_once() -> None:
    plan = [task("A", "C"), task("B", "A"), task("C", "B"), task("D", "TASK-404"), task("E", "E"), task("A")]
    with pytest.raises(PlanRejectedError) as refused:
        build_schedule(plan)
    error = refused.value
    assert isinstance(error, BadInputError) and error.exit_code == 2
    text = "\n".join(error.problems)
    assert "dependency cycle A -> C -> B -> A" in text
    assert "D: depends on TASK-404, which no task in this plan has" in text
    assert "E: depends on itself" in text
    assert "A: duplicate id" in text
    assert len(error.problems) == 4
    assert all(p in error.message for p in error.problems)


@pytest.mark.parametrize("seed", range(25))
def test_every_schedule_keeps_the_rules(seed: int) -> None:
    rng = random.Random(seed)
    files = [f"f{n}.py" for n in range(6)]
    plan = []
    for n in range(rng.randint(1, 14)):
        deps = rng.sample([t.id for t in plan], k=min(len(plan), rng.randint(0, 2)))
        plan.append(task(f"T{n}", *deps, writes=tuple(rng.sample(files, k=rng.randint(0, 2))),
                         estimate=rng.choice([None, 1.0, 2.5])))
    cap = rng.choice([None, 1, 2, 3])
    schedule = build_schedule(plan, parallel=cap)
    order = [t for w in schedule.waves for t in w.task_ids]
    assert sorted(order) == sorted(t.id for t in plan)
    wave_of = {t: w.index for w in schedule.waves for t in w.task_ids}
    for t in plan:
        assert all(wave_of[d] < wave_of[t.id] for d in t.depends_on)
    for w in schedule.waves:
        assert w.task_ids and (cap is None or len(w.task_ids) <= cap)
        written = [f for t in w.task_ids for f in next(x for x in plan if x.id == t).files.written()]
        assert len(written) == len(set(written)), f"two tasks of wave {w.index} write one file"
    path = schedule.critical_path.task_ids
    for before, after in itertools.pairwise(path):
        assert before in next(x for x in plan if x.id == after).depends_on
    assert schedule.span >= schedule.critical_path.length
