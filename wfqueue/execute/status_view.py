"""`wfqueue status EXEC-ID` as a person reads it: the execution's headline, one row per task wave by wave, the
gates, and what to do next. Pure: from the recorded :class:`~wfqueue.execute.records.Execution`."""

from __future__ import annotations

from pydantic import BaseModel

from wfqueue.execute.records import IN_FLIGHT, Execution, TaskRecord, iso, review_note


class TaskRow(BaseModel):
    wave: int
    task_id: str
    title: str
    state: str
    attempt: str
    seconds: str
    worker: str
    detail: str


def shown_state(record: TaskRecord, execution: Execution) -> str:
    """The task's state in words: a task not sent yet is queued while its execution runs, else not started
    (a red gate or an interruption stopped the execution before its wave); one sent but not merged when its
    execution was interrupted is interrupted (``--continue`` sends it again), not running."""
    if record.state == "pending":
        return "queued" if execution.status == "running" else "not started"
    if record.state in IN_FLIGHT and execution.status == "interrupted":
        return "interrupted"
    return record.state


def _detail(record: TaskRecord) -> str:
    parts = [record.reason or record.note or "", ", ".join(record.rejected_files)]
    if record.state == "completed" and record.merge:
        parts.append(f"merged as {record.merge[:12]}")
    return "; ".join(p for p in (": ".join(p for p in parts if p), review_note(record)) if p)


def task_rows(execution: Execution) -> list[TaskRow]:
    """Every task of the plan, wave by wave, in the schedule's order within a wave."""
    rows: list[TaskRow] = []
    for number, wave in enumerate(execution.waves, start=1):
        for task_id in wave:
            record = execution.tasks[task_id]
            took = (f"{record.finished_at - record.started_at:.1f}"
                    if record.started_at and record.finished_at else "-")
            rows.append(TaskRow(wave=number, task_id=task_id, title=record.title,
                                state=shown_state(record, execution), attempt=str(record.attempt or "-"),
                                seconds=took, worker=record.worker, detail=_detail(record)))
    return rows


def headline(execution: Execution) -> list[str]:
    """The lines above the table: the execution, its plan, its branch, how far it got."""
    e = execution
    done, total = len(e.in_state("completed")), len(e.tasks)
    stopped = f" (the gate after wave {e.stopped_wave} is red)" if e.stopped_wave else ""
    return [f"{e.exec_id} (execution of {e.plan_session}, {e.plan_kind} plan): {e.status}{stopped}, "
            f"{done} of {total} task(s) completed in {len(e.waves)} wave(s)",
            f"integration branch: {e.branch} (started at {e.base[:12]}); executor {e.executor}, "
            f"at most {e.parallel or 'any number of'} task(s) at once",
            f"started {iso(e.started_at)}, finished {iso(e.finished_at)}",
            *([f"model usage: {e.usage}"] if e.usage else [])]


def gate_lines(execution: Execution) -> list[str]:
    return [f"gate after wave {g.wave}: " + ("passed" if g.passed else f"red (`{g.failed_command}`)")
            for g in execution.gates]

