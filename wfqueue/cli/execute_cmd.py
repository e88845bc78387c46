"""`wfqueue execute`: validate a plan, schedule its tasks in waves, and run them (wfqueue.execute.coordinator),
or only show the schedule (`--dry-run`); `--continue EXEC-ID` goes on with an execution.

Exit codes: 0 every task completed (or the schedule was shown); 1 some task did not complete, or a red gate
stopped the execution; 2 bad input: a plan with problems (all listed), a repository that is not git or not
clean, no executor configured; 3 infrastructure (a lost broker, git failing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.prompt import Confirm

from wfqueue.cli import json_output
from wfqueue.cli.plan_common import finish
from wfqueue.cli.progress import TerminalUI
from wfqueue.errors import BadInputError, UnsafeCommandError
from wfqueue.execute import records
from wfqueue.execute.command_executor import check_where_it_runs
from wfqueue.execute.coordinator import EXECUTE, ExecuteCoordinator
from wfqueue.execute.decisions import stopped_by_budget
from wfqueue.execute.executors import ExecutorName, choose_executor
from wfqueue.execute.gate import gate_commands, verification_refusal
from wfqueue.execute.load import load_plan
from wfqueue.execute.model import ExecutablePlan, PlanVerdict
from wfqueue.execute.outcome import ExecutionOutcome
from wfqueue.execute.safety import check_clean_repository
from wfqueue.execute.schedule import Schedule, build_schedule
from wfqueue.execute.validate import refuse_blocked
from wfqueue.metering import parse_budget_option
from wfqueue.runtime import stop_after_output
from wfqueue.sandboxed_commands import parse_command
from wfqueue.sessions import repo_option, resolve_repo
from wfqueue.settings import load_settings
from wfqueue.up_cluster import serving_up
from wfqueue.workflow.contract import ResumeRequest
from wfqueue.workflow.registry import locate

EXECUTORS: tuple[ExecutorName, ...] = ("claude", "command")
TITLE_WIDTH = 72


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def dry_run_payload(plan: ExecutablePlan, schedule: Schedule, gate: list[str]) -> dict[str, Any]:
    """The one JSON object `--dry-run --json` prints."""
    return {
        "status": "dry_run",
        "plan": {"kind": plan.kind, "session_id": plan.session_id, "source": plan.source, "repo": plan.repo,
                 "tasks": len(plan.tasks)},
        "parallel": schedule.parallel,
        "waves": [{"wave": w.index, "tasks": w.task_ids} for w in schedule.waves],
        "file_waits": [w.model_dump() for w in schedule.file_waits],
        "critical_path": {"tasks": schedule.critical_path.task_ids, "length": schedule.critical_path.length,
                          "estimated": schedule.critical_path.estimated},
        "span": schedule.span,
        "gate_commands": gate,
        "verification": plan.verdict.model_dump() if plan.verdict is not None else None,
        "tasks": [{"id": t.id, "title": t.title, "type": t.type, "wave": schedule.wave_of(t.id),
                   "depends_on": t.depends_on, "files": t.files.model_dump(), "verification": t.verification,
                   "verification_runs": verification_refusal(t) is None}
                  for t in plan.tasks],
    }


def cancelled_payload(plan: ExecutablePlan) -> dict[str, Any]:
    """The one JSON object of an execution the user declined at its confirmation."""
    return {"status": "cancelled", "plan": {"kind": plan.kind, "session_id": plan.session_id, "source": plan.source,
                                            "repo": plan.repo, "tasks": len(plan.tasks)},
            "message": "not started; nothing was written"}


def verdict_line(verdict: PlanVerdict) -> str:
    line = f"verification: {verdict.quality_gate}"
    if verdict.stale:
        line += " (the tasks changed after it: run `wfqueue verify` again)"
    return line + ("; execute refuses the plan without --force" if verdict.blocks else "")


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_WIDTH else line[: TITLE_WIDTH - 1] + "…"


def render_schedule(plan: ExecutablePlan, schedule: Schedule, gate: list[str], untested: bool = False) -> str:
    """The schedule as the terminal shows it: waves, what waits for a file, the critical path, the gate."""
    cap = f"at most {_plural(schedule.parallel, 'task')} at once" if schedule.parallel else "no cap on tasks at once"
    lines = [f"{plan.session_id} ({plan.kind} plan, {_plural(len(plan.tasks), 'task')}): "
             f"{_plural(len(schedule.waves), 'wave')}, {cap}"]
    for wave in schedule.waves:
        for n, task_id in enumerate(wave.task_ids):
            task = plan.task(task_id)
            head = f"wave {wave.index}" if n == 0 else ""
            files = ", ".join(task.files.written())
            lines.append(f"  {head:<8}{task_id:<10} {_title(task.title)}" + (f"  [{files}]" if files else ""))
    for wait in schedule.file_waits:
        lines.append(f"  {wait.task_id} waits for {wait.after}: both write {wait.file}")
    path = schedule.critical_path
    unit = f"length {path.length:g}" if path.estimated else _plural(len(path.task_ids), "task")
    lines.append(f"critical path ({unit}): {' -> '.join(path.task_ids)}")
    if gate:
        lines.append(f"gate after each wave ({_plural(len(gate), 'command')}):")
        lines.extend(f"  {command}" for command in gate)
    elif untested:
        lines.append("gate after each wave: none (--no-gate: nothing tests the merges)")
    else:
        lines.append("gate after each wave: none (no task has a runnable verification command; "
                     "set WFQUEUE_EXECUTE_TEST_COMMAND, or execute with --no-gate to merge untested)")
    if plan.verdict is not None:
        lines.append(verdict_line(plan.verdict))
    lines.append("dry run: nothing was written")
    return "\n".join(lines)


def check_gate(plan: ExecutablePlan, gate: list[str], configured: str | None, may_be_empty: bool) -> None:
    """Refuse a configured test command the sandbox will not run (before a dry run too, which shows it), and,
    unless ``may_be_empty`` (a dry run, --no-gate), a plan that would merge with no test after any wave."""
    if configured is not None and configured.strip() and gate:
        try:
            parse_command(configured)
        except UnsafeCommandError as exc:
            raise UnsafeCommandError(f"WFQUEUE_EXECUTE_TEST_COMMAND: {exc.message}", hint=exc.hint) from None
    if gate or may_be_empty:
        return
    refused = [(t.id, why) for t in plan.tasks if (why := verification_refusal(t)) is not None]
    example = f"; {refused[0][0]}: {refused[0][1]}" if refused else ""
    raise BadInputError(
        f"no test gate: no verification command of the plan's {_plural(len(plan.tasks), 'task')} is one wfqueue "
        f"runs{example}", hint="set WFQUEUE_EXECUTE_TEST_COMMAND to the project's test command (e.g. "
                               "'python -m pytest -q'), or pass --no-gate to merge without tests")


def _executor(name: str | None) -> ExecutorName | None:
    for known in EXECUTORS:
        if name == known:
            return known
    if name is not None:
        raise BadInputError(f"--executor {name}: unknown executor", hint="use claude or command")
    return None


def _confirm(ui: TerminalUI, plan: ExecutablePlan, schedule: Schedule, gate: list[str], yes: bool,
             untested: bool) -> bool:
    """Show the schedule and ask to start it: on a terminal unless -y; without one, start (as the plan commands
    do), saying that -y skips the question."""
    if yes or not ui.interactive("starting the execution without confirmation"):
        return True
    # Plain text: each task's files are listed in brackets, and titles are the model's.
    ui.console.print(render_schedule(plan, schedule, gate, untested).rsplit("\n", 1)[0], markup=False)
    try:
        return Confirm.ask("start these tasks?", default=True, console=ui.console)
    except EOFError:  # Ctrl-D: no is the answer (typer's confirm called it an interrupt, exit 130)
        ui.console.print()
        return False


def _describe(out: Console, result: ExecutionOutcome) -> None:
    out.print(f"[bold]{result.status}[/]: {result.tasks} of {result.total} task(s) "
              f"merged into {escape(result.branch)} — {escape(result.session_dir)}")
    for task_id, said in result.unfinished.items():  # each with its own state and why: rejected is not failed
        out.print(escape(f"{task_id} {said}"), soft_wrap=True)
    out.print(escape(result.hint))


def refuse_start_options(resume_id: str, *, no_gate: bool, dry_run: bool, force: bool,
                         executor: ExecutorName | None, recorded: ExecutorName) -> None:
    """Refuse, with --continue, the options that decide how an execution starts: a continued one goes on as it
    started (its gate, its executor), and none of them would be heeded."""
    again = f"run `wfqueue execute --continue {resume_id}` without it"
    if no_gate:  # the merges so far were tested, or not
        raise BadInputError("--no-gate starts an execution without its gate; a continued one keeps the gate it "
                            "started with", hint=f"{again}, or execute the plan anew with --no-gate")
    if dry_run:
        raise BadInputError("--dry-run shows a plan's schedule before it starts; it does not apply to --continue",
                            hint=f"`wfqueue status {resume_id}` shows what is left; then {again}")
    if force:
        raise BadInputError("--force starts an execution its session's verification blocks; a continued execution "
                            "is not checked again", hint=again)
    if executor is not None and executor != recorded:
        raise BadInputError(f"{resume_id} runs the {recorded} executor, and a continued execution keeps it",
                            hint=f"{again}, or execute the plan anew with --executor {executor}")


def finish_execution(result: ExecutionOutcome, as_json: bool) -> None:
    finish(result, as_json, lambda out: _describe(out, result), json_object=result.execute_json())


def register(app: typer.Typer) -> None:
    @app.command("execute")
    def execute(
        target: str | None = typer.Argument(None, metavar="SESSION_OR_PLAN",
                                            help="Session id, or a session folder, tasks.jsonl, .task/ folder or "
                                                 "plan.json."),
        executor: str | None = typer.Option(None, "--executor",
                                            help="claude or command (default: the command when "
                                                 "WFQUEUE_EXECUTOR_COMMAND is set, else claude)."),
        parallel: int | None = typer.Option(None, "--parallel", min=1,
                                            help="Tasks in flight at once (default: WFQUEUE_EXECUTE_PARALLEL). "
                                                 "With --continue it replaces the execution's."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the waves and the critical path; write nothing."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Start without asking for confirmation."),
        resume_id: str | None = typer.Option(None, "--continue", metavar="EXEC-ID",
                                             help="Go on with an execution (after a red gate, Ctrl-C or a crash); "
                                                  "completed tasks are not run again."),
        repo: str | None = typer.Option(None, "--repo",
                                        help="Repository the plan changes (default: the one holding the plan)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
        budget: str | None = typer.Option(None, "--budget",
                                          help="The claude executor's spending cap: $2.50 (estimated cost) or 200k "
                                               "(tokens); no model call starts once it is spent. With --continue it "
                                               "replaces the execution's."),
        force: bool = typer.Option(False, "--force",
                                   help="Execute a workflow session whose verification says BLOCK_EXECUTION."),
        no_gate: bool = typer.Option(False, "--no-gate",
                                     help="Merge without running any test after the waves (also needed when "
                                          "no task has a runnable verification command)."),
    ) -> None:
        """Run a plan's tasks in dependency waves on workers, each in its own worktree, merged one at a time into
        the integration branch wfqueue/EXEC-ID, with the gate after each wave. Exit 0 all completed, 1 some
        not, 2 bad input, 3 infrastructure."""
        requested = _executor(executor)
        settings = load_settings()
        ui = TerminalUI()
        if resume_id is not None:
            if target is not None:
                raise BadInputError("--continue takes an execution id, not a plan as well",
                                     hint=f"run `wfqueue execute --continue {resume_id}`")
            root = resolve_repo(repo)
            kind, folder = locate(root, resume_id)
            if kind is not EXECUTE:
                raise BadInputError(f"--continue {resume_id}: that is a {kind.label} session, not an execution",
                                    hint=f"run `wfqueue execute {resume_id}` to execute its plan")
            recorded = records.load(folder)
            refuse_start_options(resume_id, no_gate=no_gate, dry_run=dry_run, force=force, executor=requested,
                                 recorded=recorded.executor)
            stop_after_output()  # `finish` stops the embedded cluster once the outcome is out
            spending_cap = parse_budget_option(budget, "anthropic", settings)
            if spending_cap is not None and recorded.executor != "claude":
                raise BadInputError("--budget caps the claude executor's model calls; this execution runs the "
                                    "command executor", hint="drop --budget")
            stopped = stopped_by_budget(recorded)
            if spending_cap is None and stopped:  # its spent cap would stop them at their first call again
                raise BadInputError(f"{resume_id}: its budget stopped {', '.join(stopped)}, and is spent",
                                    hint=f"give it a larger one: `wfqueue execute --continue {resume_id}"
                                         f"{repo_option(root)} --budget LARGER` (dollars, $5, or tokens, 500k)")
            request = ResumeRequest(session_dir=folder, repo=root, provider="offline", budget=spending_cap,
                                    parallel=parallel)
            finish_execution(ExecuteCoordinator(settings, ui).resume(request), as_json)
            return
        if target is None:
            raise BadInputError("missing SESSION_OR_PLAN", hint="pass a plan to execute, or --continue EXEC-ID")
        plan = load_plan(target, repo)
        schedule = build_schedule(plan.tasks, parallel or settings.execute_parallel)
        gate = [] if no_gate else gate_commands(plan.tasks, settings.execute_test_command)
        check_gate(plan, gate, settings.execute_test_command, dry_run or no_gate)
        if dry_run:
            if as_json:
                json_output.emit(dry_run_payload(plan, schedule, gate))
            else:
                typer.echo(render_schedule(plan, schedule, gate, no_gate))
            return
        if not force:
            refuse_blocked(plan, repo_option(Path(plan.repo)))
        # Files a task of the plan creates are not in HEAD: the plan's checks made sure that whoever modifies or
        # deletes one comes after its creator.
        created = {f for t in plan.tasks for f in t.files.create}
        check_clean_repository(Path(plan.repo), [f for t in plan.tasks for f in t.files.modify + t.files.delete
                                                 if f not in created], sorted(created))
        up = serving_up(settings, Path(plan.repo))
        chosen = choose_executor(settings, requested, up)
        if budget is not None and chosen != "claude":
            raise BadInputError("--budget caps the claude executor's model calls; the command executor's agent "
                                "spends its own", hint="drop --budget, or use --executor claude")
        spending_cap = parse_budget_option(budget, "anthropic", settings)
        check_where_it_runs(settings, chosen, up)
        if not _confirm(ui, plan, schedule, gate, yes, no_gate):
            if as_json:
                json_output.emit(cancelled_payload(plan))
            ui.info("not started; nothing was written")
            raise typer.Exit(0)  # the user's choice, as a plan cancelled at its confirmation: not a failure
        stop_after_output()
        finish_execution(ExecuteCoordinator(settings, ui).start(plan, schedule, chosen, spending_cap,
                                                                untested=no_gate), as_json)
