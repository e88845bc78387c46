"""`wfqueue replan` (change a workflow session's plan, with backup and rollback) and
`wfqueue sessions` (list workflow sessions).

Questions, the impact analysis and messages go to stderr, so ``--json`` leaves
stdout to the one JSON object.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.prompt import Prompt
from rich.table import Table

from wfqueue.cli import json_output
from wfqueue.cli.plan_common import REPO_DEFAULT, keep_whole, print_table
from wfqueue.cli.progress import ask_choice
from wfqueue.errors import BadInputError
from wfqueue.plan_check import default_repo
from wfqueue.planted import refuse_planted
from wfqueue.sessions import read_requirement, resolve_repo
from wfqueue.settings import load_settings
from wfqueue.workflow_session.replan.apply import ReplanSummary, run_replan
from wfqueue.workflow_session.replan.intent import task_id_argument
from wfqueue.workflow_session.replan.restore import restore, session_rows
from wfqueue.workflow_session.replan.select import Decision, Question


class TerminalReplanUI:
    """The replan's questions on a terminal (rich prompts on stderr)."""

    def __init__(self, quiet: bool = False) -> None:
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.quiet = quiet

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]wfqueue:[/] {escape(message)}", markup=True)

    def ask(self, question: Question) -> list[str]:
        self.console.print(f"[bold]{escape(question.text)}[/]", markup=True)
        for n, option in enumerate(question.options, start=1):
            self.console.print(f"  {n}. {option.label}", markup=False)
        default = ",".join(str(n) for n, o in enumerate(question.options, start=1) if o.value in question.default)
        hint = "numbers, comma-separated" if question.multi else "a number"
        values = {o.value for o in question.options}
        while True:  # an answer that is not one of the options is asked again, not taken for the default
            answer = Prompt.ask(f"choose {hint}", default=default, console=self.console)
            chosen, wrong = [], []
            for part in (p.strip() for p in answer.replace("，", ",").split(",")):
                if part.isdigit() and 1 <= int(part) <= len(question.options):
                    chosen.append(question.options[int(part) - 1].value)
                elif part in values:
                    chosen.append(part)
                elif part:
                    wrong.append(part)
            if wrong or (not question.multi and len(chosen) > 1):
                said = f"not an option: {', '.join(wrong)}" if wrong else "one number only"
                self.console.print(escape(f"{said} (choose from 1 to {len(question.options)})"))
                continue
            return chosen

    def ask_text(self, prompt: str) -> str:
        return Prompt.ask(escape(prompt), default="", console=self.console)

    def show_impact(self, text: str) -> None:
        self.console.print(text, markup=False)

    def confirm(self, text: str) -> Decision:
        return ask_choice(self.console, text, ("confirm", "adjust", "cancel"), "confirm")


def render_summary(summary: ReplanSummary) -> str:
    """The change summary (seed step 6.6.2)."""
    if summary.status == "unchanged":
        return f"{summary.session_id}: nothing changed (the session already matches the request)"
    lines = ["## Replan Complete", f"Session:   {summary.session_id}", f"Timestamp: {summary.timestamp}",
             f"Backup:    {summary.backup}", f"Scope:     {summary.scope}",
             f"Reason:    {' '.join(summary.reason.split())}", f"Modified:  {', '.join(summary.files) or '-'}",
             f"Added:     {', '.join(summary.added) or '-'}", f"Updated:   {', '.join(summary.updated) or '-'}",
             f"Deleted:   {', '.join(summary.deleted) or '-'} (kept in the backup)"]
    if summary.execution_config:
        lines.append(f"Execution: {summary.execution_config}")
    lines += [f"Dependents of {tid}: {', '.join(ids)}" for tid, ids in summary.dependents.items()]
    lines += [f"warning: {w}" for w in summary.warnings]
    lines.append(f"Rollback:  {summary.rollback}")
    return "\n".join(lines)


def _split_arguments(first: str | None, second: str | None) -> tuple[str | None, str | None]:
    """``[IMPL-N] "what changes"`` -> (task id, text)."""
    task_id = task_id_argument(first)
    if task_id is not None:
        return task_id, second
    if second is not None:
        raise BadInputError(f"two arguments given, but {first!r} is not a task id",
                            hint='task mode: wfqueue replan IMPL-2 "what changes"; session mode: one argument')
    return None, first


def register(app: typer.Typer) -> None:
    @app.command("replan")
    def replan(
        first: str | None = typer.Argument(None, metavar="[IMPL-N]",
                                           help="Task to replan (task mode); omit for the session."),
        second: str | None = typer.Argument(None, metavar="[CHANGE]", help="What changes: text or a .md/.txt file."),
        session: str | None = typer.Option(None, "--session", help="Session id (default: the active session)."),
        repo: str | None = typer.Option(None, "--repo", help=f"Repository ({REPO_DEFAULT})."),
        yes: bool = typer.Option(False, "--yes", "-y", help="No questions: safe defaults, auto-confirm."),
        interactive: bool = typer.Option(False, "--interactive", help="Ask the clarification questions."),
        restore_dir: str | None = typer.Option(None, "--restore", metavar="BACKUP_DIR",
                                               help="Put a replan backup back."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
    ) -> None:
        """Change a workflow session's plan: backup first, apply, validate, roll back on failure."""
        settings = load_settings()
        ui = TerminalReplanUI(quiet=False)
        if restore_dir is not None:
            if first is not None or second is not None:
                raise BadInputError("--restore takes no task id or change text",
                                    hint="wfqueue replan --restore BACKUP_DIR --session WFS-x")
            if restore_dir.startswith("-"):  # `--restore --json`: the option took the next one as its folder
                raise BadInputError(f"--restore needs a backup folder, not {restore_dir!r}",
                                    hint="wfqueue replan --restore BACKUP_DIR [--session WFS-x] [--json]")
            backup = Path(restore_dir).expanduser()
            # Restore from anywhere: the repository is the one the backup lives in.
            root = resolve_repo(repo) if repo is not None else default_repo(backup)
            refuse_planted(root)
            result = restore(root, backup, session, settings.lock_timeout_s)
            if as_json:
                json_output.emit(result.model_dump())
            else:
                typer.echo(f"restored {result.session_id} from {result.backup}: {', '.join(result.restored) or '-'}"
                           + (f"; removed {', '.join(result.removed)}" if result.removed else "")
                           + (f"; what it replaced is kept in {result.kept}" if result.kept else ""))
            return
        task_id, text = _split_arguments(first, second)
        if text is not None and text.strip():
            text = read_requirement(text, settings.requirement_max_bytes)
        ask = interactive or not yes
        if interactive and yes:
            ui.info("--interactive overrides --yes: asking the questions")
        if ask and not sys.stdin.isatty():
            ui.info("stdin is not a terminal: no questions asked, the safe defaults apply (-y skips this notice)")
            ask = False
        root = resolve_repo(repo)
        refuse_planted(root)
        summary = run_replan(root, text, ui, task_id=task_id, session_id=session, interactive=ask,
                             tools=tuple(settings.replan_tools), lock_timeout_s=settings.lock_timeout_s)
        if as_json:
            json_output.emit(summary.model_dump())
        else:
            typer.echo(render_summary(summary))

    @app.command("sessions")
    def sessions(
        repo: str | None = typer.Option(None, "--repo", help=f"Repository ({REPO_DEFAULT})."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """List workflow sessions: id, status, tasks, created, last replan."""
        root = resolve_repo(repo)
        rows = session_rows(root)
        if as_json:
            json_output.emit({"repo": str(root), "sessions": [r.model_dump() for r in rows]})
            return
        out = Console(highlight=False)
        if not rows:
            out.print(escape(f"no workflow sessions under {root}/.workflow/active"))
            return
        table = Table("session", "status", "tasks", "created", "last replan")
        keep_whole(table, "session", "status")
        for r in rows:
            status = r.status if not r.error else f"{r.status}: {r.error}"
            table.add_row(escape(r.session_id), escape(status), str(r.tasks), r.created_at or "-", r.last_replan or "-")
        print_table(out, table)
