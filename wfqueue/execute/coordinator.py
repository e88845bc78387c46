"""The coordinator of an execution: tasks sent wave by wave, merged one at a time, the gate after each wave.

``wfqueue execute`` starts one (:meth:`ExecuteCoordinator.start`); ``--continue`` and ``wfqueue resume`` go on
with one (:meth:`ExecuteCoordinator.resume`). The shared steps (runtime, lease, meta, waiting with progress)
are :mod:`wfqueue.workflow.base`; the waves (send, wait, merge, gate) are :mod:`wfqueue.execute.waves`; git is
:mod:`wfqueue.execute.merge`, decisions are
:mod:`wfqueue.execute.decisions`, the records :mod:`wfqueue.execute.records`. Every change of a task's state
is saved in ``execution.json`` before the next step, so a coordinator killed at any point can be continued:
a completed task is never sent again, and a task in flight is sent again with the same attempt and base,
which the worker answers from its remembered result or its existing commit (no second commit). Continuing
also runs the failed, rejected and blocked tasks again, each as a new attempt, then their skipped dependents.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import redis

from wfqueue.errors import BadInputError, WfqueueError
from wfqueue.execute import records
from wfqueue.execute.command_executor import usable_executor
from wfqueue.execute.continuing import branch_gone, check_continuable, check_same_repository, reschedule
from wfqueue.execute.decisions import (
    BranchGone,
    final_status,
    merge_hint,
    needs_gate,
    reopened,
)
from wfqueue.execute.executors import ExecutorName
from wfqueue.execute.load import load_plan
from wfqueue.execute.merge import (
    claim_branch,
    close_integration,
    head_of,
    integration_branch,
    integration_path,
    leftover_worktrees,
    open_integration,
    used_exec_ids,
)
from wfqueue.execute.model import ExecutablePlan
from wfqueue.execute.outcome import EXEC_IDS, ExecutionOutcome, execution_root, outcome, plan_slug
from wfqueue.execute.records import Execution, TaskRecord
from wfqueue.execute.safety import checkout_changes, checkout_state
from wfqueue.execute.schedule import Schedule, slots_needed
from wfqueue.execute.waves import WaveRunner
from wfqueue.execute.worktree import repo_prefix
from wfqueue.execute.writeback import kept_as_committed, write_back
from wfqueue.fsio import atomic_write_text
from wfqueue.keys import AgentState, SessionKind, SessionMeta, SessionStatus
from wfqueue.liveness import silent_for
from wfqueue.metering import budget_meta, usage_line, write_usage_file
from wfqueue.runtime import Runtime
from wfqueue.sessions import repo_option
from wfqueue.settings import Settings
from wfqueue.state import SessionState, SessionStore, connect
from wfqueue.transport.checkouts import cache_dir
from wfqueue.usage import Budget
from wfqueue.workflow.base import WorkflowCoordinator, new_session_folder
from wfqueue.workflow.contract import PlanOutcome, ResumeRequest, WorkflowUI
from wfqueue.workflow.kind import WorkflowKind


class ExecuteCoordinator(WorkflowCoordinator[WorkflowUI]):
    RESUME_HINT_ON_STOP = False  # its report names `wfqueue execute --continue` (merge_hint)

    def interrupted_hint(self, session_id: str, repo: Path) -> str:
        return f"finish it with `wfqueue execute --continue {session_id}{repo_option(repo)}`"

    def start(self, plan: ExecutablePlan, schedule: Schedule, executor: ExecutorName,
              budget: Budget | None = None, *, untested: bool = False) -> ExecutionOutcome:
        """A new execution of ``plan`` (validated, its repository checked clean) on a new integration branch;
        ``budget`` stops the claude executor's model calls once spent; ``untested`` (--no-gate): no gate runs."""
        return self._run(plan, lambda: self._begin(plan, schedule, executor, untested),
                         slots=slots_needed([w.task_ids for w in schedule.waves], schedule.parallel), fresh=True,
                         budget=budget)

    def _begin(self, plan: ExecutablePlan, schedule: Schedule, executor: ExecutorName, untested: bool) -> Execution:
        """The new execution's folder, integration branch and first records."""
        repo = Path(plan.repo)
        # An id with no branch yet: `.workflow/` is ignored by git, so a cleaned checkout may have lost the folder
        # of an execution whose branch is still there, and the new one would build on its merges.
        base = head_of(repo)
        taken = used_exec_ids(repo)
        while True:
            exec_dir = self.free_folder(lambda seen: new_session_folder(execution_root(repo), EXEC_IDS,
                                                                        plan_slug(plan.session_id), taken=seen),
                                        taken)
            branch = integration_branch(exec_dir.name)
            if claim_branch(repo, branch, base):
                break
            shutil.rmtree(exec_dir)  # its id was taken meanwhile by an execution from another worktree
            taken.add(exec_dir.name)
        exec_id = exec_dir.name
        tasks = {t.id: TaskRecord(id=t.id, title=t.title, wave=schedule.wave_of(t.id)) for t in plan.tasks}
        execution = Execution(exec_id=exec_id, exec_dir=str(exec_dir), repo=plan.repo, source=plan.source,
                              plan_kind=plan.kind, plan_session=plan.session_id, branch=branch, base=base,
                              executor=executor, parallel=schedule.parallel,
                              waves=[w.task_ids for w in schedule.waves],
                              critical_path=schedule.critical_path.task_ids, tasks=tasks, untested=untested)
        records.save(execution)
        self.event(execution, f"execution {exec_id} of {plan.session_id} started on branch {branch} at {base[:12]} "
                               f"({len(plan.tasks)} task(s), {len(schedule.waves)} wave(s), executor {executor}"
                               f"{', no gate (--no-gate)' if untested else ''})")
        if kept_as_committed(plan, execution):
            self.event(execution, f"the tasks' states are not written into {plan.source}: git tracks it in your "
                                  "checkout, which an execution never changes (execution.json and execution.md "
                                  "hold them)")
        return execution

    def resume(self, request: ResumeRequest) -> ExecutionOutcome:
        """Go on with an execution (``--continue``): completed tasks are never run again; failed, rejected and
        blocked ones run again as a new attempt, and the tasks skipped because of them after."""
        execution = records.load(request.session_dir)
        check_same_repository(execution, request.repo)
        if execution.status == "completed":
            self.ui.info(f"{execution.exec_id} is already completed")
            # Its records again: the run that completed it may have failed to write them (a read-only plan
            # folder), and writing them is idempotent.
            gone = branch_gone(execution)  # merged and deleted, most likely: "git merge" it no more
            with contextlib.suppress(BadInputError):  # no plan left to write them into
                self._write_records(load_plan(execution.source, execution.repo), execution, gone)
            return outcome(execution, gone)
        check_continuable(execution, cache_dir(self.settings))
        usable_executor(self.settings, execution.executor, Path(execution.repo),
                        requested_by=f"{execution.exec_id}'s {execution.executor} executor")
        plan = load_plan(execution.source, execution.repo)
        if sorted(t.id for t in plan.tasks) != sorted(execution.tasks):
            raise BadInputError(f"the plan {execution.source} no longer has the tasks {execution.exec_id} runs",
                                hint="restore the plan's task ids, or start a new execution of it")
        capped = request.parallel is not None and request.parallel != execution.parallel
        if request.parallel is not None:
            execution.parallel = request.parallel
        rescheduled = reschedule(execution, plan)

        def begin() -> Execution:  # said once the runtime is up: a refused continue writes nothing
            if capped:
                self.event(execution, f"at most {execution.parallel} task(s) at once from now on (--parallel)")
            if rescheduled:
                waves = " | ".join(", ".join(wave) for wave in execution.waves)
                why = "the cap on tasks at once changed" if capped else \
                    "the plan's dependencies or files changed since the last run"
                self.event(execution, f"{why}: its waves are now {waves} (completed tasks are not run again)")
            return execution

        return self._run(plan, begin, slots=slots_needed(execution.waves, execution.parallel), fresh=False,
                         budget=request.budget)

    # -- one run of the coordinator ---------------------------------------------------------------------

    def _run(self, plan: ExecutablePlan, begin: Callable[[], Execution], *, slots: int, fresh: bool,
             budget: Budget | None = None) -> ExecutionOutcome:
        """Hold a runtime with ``slots`` worker slots and drive the execution ``begin`` makes or loads.

        A new execution's folder and branch are made once the runtime is up: a command refused a broker
        (another command holds the repository's embedded Redis) leaves nothing behind."""
        execution: Execution | None = None
        held = False  # only the coordinator holding the lease may clean up and write the records
        try:
            with self.runtime(Path(plan.repo), slots) as runtime:
                execution = begin()
                # The claude executor reads the budget there before every call; None keeps a continued one's.
                meta = SessionMeta(kind=SessionKind.EXECUTE, repo=execution.repo, session_dir=execution.exec_dir,
                                   requirement=plan.context.requirement or plan.session_id,
                                   status=SessionStatus.RUNNING,  # beat's purge and watchdog: under way
                                   **({"budget": budget_meta(budget)} if budget is not None else {}))
                with self.hold(runtime, execution.exec_id, fresh=fresh, meta=meta) as state:
                    held = True
                    if not fresh:
                        execution.status = "running"
                        self.event(execution, f"execution {execution.exec_id} continued")
                        self._reopen(execution)
                    self._drive(runtime, state, plan, execution)
                    # What the executor's model calls cost (a red gate too returns here; a lost broker does not).
                    # Best effort: a bill that cannot be written must not turn a finished execution into a failure.
                    with contextlib.suppress(WfqueueError, OSError):
                        report = write_usage_file(state, self.prices, Path(execution.exec_dir))
                        execution.usage = usage_line(report) if report.total.calls else None
                    execution.status = final_status(execution)
                    execution.finished_at = time.time()
                    # The meta speaks SessionStatus (beat reads it); a stopped execution waits on a person, not
                    # a worker.
                    state.set_meta(status=SessionStatus.COMPLETED if execution.status == "completed"
                                   else SessionStatus.PARTIAL)
        except BaseException:
            if execution is not None:
                execution.status = "interrupted"
            raise
        finally:
            # Here no task of this execution runs in embedded mode: on a clean end each sent task has returned
            # (the cluster's stop may be deferred until the result is printed), and on an error the embedded
            # workers were stopped on the way out. What is left of a task's worktree is no one's.
            if held and execution is not None:
                try:
                    kept = [str(path) for path in leftover_worktrees(Path(execution.repo), cache_dir(self.settings),
                                                                      execution.exec_id)]
                except WfqueueError as exc:  # the outcome is still recorded and told: it says what to do next
                    kept = execution.kept_worktrees
                    self.event(execution, f"the task worktrees could not all be removed: {exc.message}")
                for path in kept:
                    if path not in execution.kept_worktrees:  # an earlier run named the others
                        self.event(execution, f"a task worktree holding work no branch has (uncommitted changes, or a "
                                              f"commit made there) is kept: {path} (once you "
                                              f"no longer need it: git worktree remove --force {shlex.quote(path)})")
                execution.kept_worktrees = kept
                self._finish(plan, execution)
        assert execution is not None  # begin() ran, or the runtime's error went up
        return outcome(execution)

    def _reopen(self, execution: Execution) -> None:
        """Put the tasks a continued execution runs again back to pending (saved before any is sent)."""
        again = reopened(execution)
        for task_id, record in again.items():
            before = execution.tasks[task_id]
            if before.state == "skipped":
                self.event(execution, f"{task_id} runs if its dependencies complete now (before: skipped, "
                                      f"{before.reason})")
            else:
                self.event(execution, f"{task_id} runs again as attempt {record.attempt + 1} (before: "
                                      f"{before.state}, {before.reason})")
        execution.tasks.update(again)
        records.save(execution)

    def _finish(self, plan: ExecutablePlan, execution: Execution) -> None:
        hint = self._write_records(plan, execution)
        self.event(execution, f"execution {execution.status}: {hint}")

    @staticmethod
    def _write_records(plan: ExecutablePlan, execution: Execution, gone: BranchGone | None = None) -> str:
        """Save the execution's state and report and write each task's state into the plan; return the hint."""
        records.save(execution)
        option = repo_option(Path(execution.repo))
        hint = merge_hint(execution, option, gone=gone)
        report = records.render_report(execution, merge_hint(execution, option, why_at="the tasks above", gone=gone))
        atomic_write_text(Path(execution.exec_dir) / records.REPORT_FILE, report)
        write_back(plan, execution)
        return hint

    def event(self, execution: Execution, text: str) -> None:
        records.append_event(Path(execution.exec_dir), text)
        self.ui.info(text)

    def _drive(self, runtime: Runtime, state: SessionState, plan: ExecutablePlan, execution: Execution) -> None:
        repo = Path(execution.repo)
        checkout = checkout_state(repo)
        try:
            worktree = open_integration(repo, cache_dir(self.settings), execution.exec_id)
        except WfqueueError:  # git failed half-way: what it made is no one's
            with contextlib.suppress(WfqueueError, OSError):
                close_integration(repo, integration_path(repo, cache_dir(self.settings), execution.exec_id))
            raise
        prefix = repo_prefix(repo)
        try:
            step = WaveRunner(self, runtime, state, plan, execution, worktree, prefix)  # reads git: inside the try
            step.refuse_moved()  # before any agent runs: on a branch moved while no command ran, no merge could work
            for index, wave in enumerate(execution.waves, start=1):
                if step.wave(index, wave) and index in execution.gated_waves:
                    execution.gated_waves.remove(index)  # a task run again was merged: gated again
                if needs_gate(execution, index, head_of(worktree)) and not step.gate(index, wave):
                    return
        finally:
            if close_integration(repo, worktree):
                self.event(execution, f"the integration worktree holds uncommitted work and is kept: {worktree}")
            try:
                changed = checkout_changes(checkout, checkout_state(repo))
            except WfqueueError:  # git failing now: the outcome matters more than this report
                changed = []
            if changed:
                execution.checkout_changes = [*execution.checkout_changes, *changed]
                self.event(execution, "your checkout changed while the execution ran (not by wfqueue: by you, or "
                                      f"by an agent writing outside its worktree): {'; '.join(changed)}")


# -- the workflow kind ----------------------------------------------------------------------------------


def read_status(folder: Path, settings: Settings) -> Execution:
    """`wfqueue status EXEC-ID`: the execution's waves and per-task states, from ``execution.json`` (rewritten on
    every change), and for a task in flight its agent record's word, where the Redis the execution runs on is at
    hand (``settings``: that Redis, a shared broker or the command's own): its worker and start, what it waits
    for (a retry-after), that it is done and waits for its merge, or that its worker has gone silent."""
    execution = records.load(folder)
    running = [t for t, r in execution.tasks.items() if r.state in records.IN_FLIGHT]
    if execution.status != "running" or not running or settings.broker_url is None:
        return execution
    try:
        agents = SessionState(connect(settings), execution.exec_id, settings.state_ttl_s).agents(running)
    except (WfqueueError, redis.RedisError):  # the files say all the rest
        return execution
    now = time.time()
    for task_id, agent in agents.items():
        record = execution.tasks[task_id]
        if agent.get("attempt") == record.attempt and agent.get("state") != AgentState.QUEUED:
            # The attempt in flight, once a worker took it (a queued record still holds an earlier run's worker).
            record.worker = str(agent.get("worker") or record.worker)
            record.started_at = _seconds(agent.get("started_at")) or record.started_at
            record.finished_at = _seconds(agent.get("finished_at")) if agent.get("state") != AgentState.RUNNING \
                else None
        record.note = _in_flight_note(agent, now)
    return execution


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _in_flight_note(agent: dict[str, object], now: float) -> str | None:
    """What a task execution.json calls running is doing, from its agent record. Results are merged in the order
    the tasks were sent, so a task done early waits for those sent before it (it read "running" all that time)."""
    silent = silent_for(agent, now)
    if silent is not None:
        return (f"no heartbeat from its worker for {silent:.0f}s: if that worker stopped, the broker gives the task "
                "to another once WFQUEUE_VISIBILITY_TIMEOUT_S has passed since it was taken")
    if agent.get("state") == AgentState.DONE:
        return "done on its worker; merged once the tasks sent before it in its wave are settled"
    if agent.get("state") == AgentState.FAILED:
        return "failed on its worker; recorded once the tasks sent before it in its wave are settled"
    note = agent.get("note")
    return str(note) if note else None


def missing_work(state: SessionStore, session_dir: Path) -> list[str]:
    """The tasks not completed yet."""
    del state
    execution = records.load(session_dir)
    return [t for t, r in execution.tasks.items() if r.state != "completed"]


def _resume(settings: Settings, ui: WorkflowUI, request: ResumeRequest) -> PlanOutcome:
    return ExecuteCoordinator(settings, ui).resume(request)


# Executions may wait on a red gate for a person: the watchdog only reports them.
EXECUTE = WorkflowKind(name=SessionKind.EXECUTE, label="execution", ids=EXEC_IDS, root=execution_root,
                       read_status=read_status, resume=_resume, missing_work=missing_work,
                       marker=records.STATE_FILE)
