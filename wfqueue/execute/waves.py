"""The waves of an execution, run inside its coordinator's held runtime: each wave's tasks sent to the workers,
waited for, checked and merged into the integration branch one at a time (a conflict runs its task once more on
the new head), then the gate. Every change of a task's state is saved before the next step
(:mod:`wfqueue.execute.records`); the decisions themselves are :mod:`wfqueue.execute.decisions`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from celery.result import AsyncResult

from wfqueue import keys
from wfqueue.errors import BadInputError, ProviderError
from wfqueue.execute import records
from wfqueue.execute.decisions import conflict_outcome, disallowed_changes, retry_feedback, skip_reason, unnamed_tests
from wfqueue.execute.gate import gate_commands, runnable_on
from wfqueue.execute.merge import (
    branch_exists,
    commit_changes,
    head_of,
    last_of,
    merge_task,
    run_gate,
    task_branch,
)
from wfqueue.execute.model import ExecutablePlan, TaskRun
from wfqueue.execute.records import Execution, GateRun, TaskRecord
from wfqueue.execute.worktree import left_as_found
from wfqueue.keys import AgentState
from wfqueue.payloads import ExecuteTask
from wfqueue.runtime import Runtime
from wfqueue.settings import Settings
from wfqueue.state import SessionState, SessionStore
from wfqueue.transport.models import Transport
from wfqueue.transport.repo import is_ancestor, receive_commits
from wfqueue.transport.workspace import CoordinatorFiles, task_commits_name


class Driver(Protocol):
    """What the waves need of their coordinator (wfqueue.execute.coordinator)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def files(self) -> CoordinatorFiles | None: ...

    @property
    def transport(self) -> Transport | None: ...

    def event(self, execution: Execution, text: str) -> None: ...

    def wait_with_progress(self, result: AsyncResult[Any], what: str, settings: Settings, state: SessionStore,
                           watched: list[str]) -> Any: ...


@dataclass
class WaveRunner:
    """One wave's work inside a held runtime: sending, waiting, merging, the gate."""

    c: Driver
    runtime: Runtime
    state: SessionState
    plan: ExecutablePlan
    execution: Execution
    worktree: Path
    prefix: str
    # Where this run left the integration branch (opened, then after each merge): a branch found elsewhere was
    # moved under the execution (`git update-ref`, a reset from another checkout).
    head: str = ""

    def __post_init__(self) -> None:
        # Where the execution left it: its last merge, else its base. The branch may have gone on from there (a fix
        # committed after a red gate, as the hint says); anything else moved it while no command ran.
        merges = [r.merge for r in self.execution.tasks.values() if r.state == "completed" and r.merge]
        left = (last_of(self.worktree, merges) if merges else None) or self.execution.base
        tip = head_of(self.worktree)
        self.head = tip if is_ancestor(self.worktree, left, tip) else left

    def refuse_moved(self) -> None:
        """Stop when the integration branch is not where this run left it: merging on it failed each task ("local
        changes would be overwritten") for ever, and a gate tested a tree no one merged."""
        e = self.execution
        if head_of(Path(e.repo), f"refs/heads/{e.branch}") == self.head:
            return
        raise BadInputError(f"the integration branch {e.branch} was moved while {e.exec_id} ran: it no longer "
                            f"holds what the execution merged (its last merge, {self.head[:12]}), and nothing more "
                            "is merged",
                            hint=f"put it back (`git update-ref refs/heads/{e.branch} {self.head}`), then `wfqueue "
                                 f"execute --continue {e.exec_id}`; or execute the plan again "
                                 f"(`wfqueue execute {e.source}`)")

    def _save(self) -> None:
        records.save(self.execution)
        self.state.store(keys.EXECUTION, self.execution.model_dump_json())

    def _send(self, record: TaskRecord, feedback: str = "") -> AsyncResult[Any]:
        e = self.execution
        base = record.base or e.base
        if self.c.files is not None:  # workers that share no disk read the task's base from a bundle in Redis
            self.c.files.publish_commit(Path(e.repo), base)
        payload = ExecuteTask(exec_id=e.exec_id, exec_dir=e.exec_dir, repo=e.repo, task=self.plan.task(record.id),
                              context=self.plan.context, base=base, branch=task_branch(e.exec_id, record.id),
                              attempt=record.attempt, executor=e.executor, retry_feedback=feedback,
                              prefix=self.prefix, transport=self.c.transport)
        self.state.set_agent(record.id, state=AgentState.QUEUED, attempt=record.attempt)
        return payload.send(self.runtime.app)

    def wave(self, index: int, wave: list[str]) -> bool:
        """Run the wave's unfinished tasks and merge them; True when anything was merged."""
        e = self.execution
        todo = [t for t in wave if e.tasks[t].state not in records.FINAL_STATES]
        if not todo:
            return False
        head = head_of(self.worktree)
        sent: dict[str, AsyncResult[Any]] = {}
        for task_id in todo:
            record = e.tasks[task_id]
            reason = skip_reason(self.plan.task(task_id), e)
            if reason is not None:
                record.state, record.reason = "skipped", reason
                self._save()
                self.c.event(e, f"{task_id} skipped: {reason}")
                continue
            if record.state == "pending":  # else sent before this coordinator stopped: same attempt, same base
                record.state, record.attempt, record.base = "running", record.attempt + 1, head
            self._save()
            sent[task_id] = self._send(record, retry_feedback(record))
            self.c.event(e, f"wave {index}: {task_id} sent (attempt {record.attempt})")
        merged = False
        for task_id, result in sent.items():
            merged = self._settle(e.tasks[task_id], self._wait(task_id, result, list(sent))) or merged
        return merged

    def _not_merged(self, record: TaskRecord) -> None:
        """The worker reported the task done; its agent record now says why it was not merged after all."""
        self._save()
        self.state.set_agent(record.id, state=AgentState.FAILED, error=f"{record.state}: {record.reason}")

    def _wait(self, task_id: str, result: AsyncResult[Any], wave: list[str]) -> TaskRun:
        record = self.execution.tasks[task_id]
        try:
            answer = self.c.wait_with_progress(result, f"task {task_id}", self.runtime.settings, self.state, wave)
            return TaskRun.model_validate(answer)
        except ProviderError as exc:  # the task itself raised (it returns a failed TaskRun otherwise)
            now = time.time()
            return TaskRun(task_id=task_id, attempt=record.attempt, status="failed", branch="",
                           base=record.base or "", error=f"{exc.message} ({exc.hint})" if exc.hint else exc.message,
                           started_at=now, finished_at=now)

    def _settle(self, record: TaskRecord, run: TaskRun) -> bool:
        """Record ``run`` and merge its commit; a conflict is run again once. True when merged."""
        e = self.execution
        record.worker, record.log = run.worker, run.log
        record.started_at, record.finished_at = run.started_at or None, run.finished_at or None
        record.commit, record.files_changed = run.commit, run.files_changed
        if run.status == "failed" or run.commit is None:
            record.state, record.reason = "failed", run.error or "the task failed"
            self._save()
            self.c.event(e, f"{record.id} failed: {record.reason}")
            return False
        if self.c.transport is not None:  # the commit was made on a worker's disk: bring it here first
            receive_commits(self.runtime.client, task_commits_name(e.exec_id, record.id, record.attempt),
                            Path(e.repo), f"refs/heads/{run.branch}")
        task = self.plan.task(record.id)
        changes = commit_changes(Path(e.repo), run.commit, self.prefix)
        bad = disallowed_changes(task, changes)
        if bad:
            record.state, record.rejected_files = "rejected", bad
            record.reason = "its commit changes files the task does not name"
            self._not_merged(record)
            self.c.event(e, f"{record.id} rejected, not merged: it changes {', '.join(bad)}")
            return False
        if not branch_exists(Path(e.repo), e.branch):  # deleted under the execution (`git update-ref -d`)
            e.branch_lost = True
            self._save()
            raise BadInputError(f"the integration branch {e.branch} was deleted while {e.exec_id} ran: what it "
                                "merged is gone, and nothing more is merged",
                                hint=f"execute the plan again: `wfqueue execute {e.source}`")
        self.refuse_moved()
        merge = merge_task(self.worktree, run.commit, record.id, e.exec_id, task.title)
        self.head = head_of(self.worktree)
        if merge.merged:
            record.state, record.merge, record.reason = "completed", merge.commit, None
            record.unnamed_tests = unnamed_tests(task, changes)
            self._save()
            added = (f"; review the tests it added that its task does not name ({', '.join(record.unnamed_tests)}): "
                     "a test module can change what other tests see" if record.unnamed_tests else "")
            self.c.event(e, f"{record.id} merged into {e.branch} ({(merge.commit or '')[:12]}){added}")
            return True
        if not merge.conflicts:  # git failed for another reason: running the task again would not change it
            record.state, record.reason = "failed", f"its merge failed: {merge.error or 'git gave no reason'}"
            self._not_merged(record)
            self.c.event(e, f"{record.id} failed: {record.reason}")
            return False
        record.state, record.reason = conflict_outcome(record, merge.conflicts)
        if record.state == "blocked":
            self._not_merged(record)
            self.c.event(e, f"{record.id} blocked: {record.reason}")
            return False
        record.attempt, record.base = record.attempt + 1, head_of(self.worktree)
        # The first run's, not the next one's.
        record.worker, record.log, record.started_at, record.finished_at = "", None, None, None
        self._save()
        self.c.event(e, f"{record.id} conflict in {', '.join(merge.conflicts)}: running it "
                         f"again on {record.base[:12]}")
        result = self._send(record, retry_feedback(record))
        return self._settle(record, self._wait(record.id, result, [record.id]))

    def gate(self, index: int, wave: list[str]) -> bool:
        """The gate after wave ``index``; red stops the execution before the next wave."""
        e = self.execution
        done = [self.plan.task(t) for t in e.in_state("completed")]
        configured = self.c.settings.execute_test_command
        commands = [] if e.untested else gate_commands(done, configured)
        workdir = self.worktree / self.prefix if self.prefix else self.worktree
        if not commands and not e.untested:
            # No merged task has a check the runner runs (manual ones): the plan's own checks, on what they can
            # test of the merged tree, rather than no gate at all (the dry run promises one after each wave).
            commands = runnable_on(gate_commands(self.plan.tasks, configured), lambda rel: (workdir / rel).exists())
            if not commands:
                self.c.event(e, f"gate after wave {index}: no check can run yet (no merged task has one the runner "
                                f"runs, and the plan's test files are not there yet): wave {index} "
                                f"({', '.join(wave)}) is untested so far")
        if not commands:
            e.gated_waves.append(index)
            self._save()
            return True
        self.c.event(e, f"gate after wave {index}: {'; '.join(commands)}")
        head = head_of(self.worktree)
        with left_as_found(self.worktree):  # the next merge, and the end, find the branch's files only
            result = run_gate(workdir, commands, self.c.settings.execute_check_timeout_s)
        self.refuse_moved()  # a gate run on a branch moved meanwhile tested what no one merged
        e.gates.append(GateRun(wave=index, passed=result.passed, commands=commands, head=head,
                               failed_command=result.failed_command, output=result.output, at=time.time()))
        if result.passed:
            e.stopped_wave = None
            e.gated_waves.append(index)
            self._save()
            self.c.event(e, f"gate after wave {index} passed")
            return True
        e.stopped_wave = index
        self._save()
        why = (f"`{result.failed_command}` did not finish within {self.c.settings.execute_check_timeout_s:g}s "
               "(WFQUEUE_EXECUTE_CHECK_TIMEOUT_S)" if result.timed_out else f"`{result.failed_command}`")
        self.c.event(e, f"gate after wave {index} is red ({why}); wave {index} ran {', '.join(wave)}; stopped before "
                        "the next wave")
        return False
