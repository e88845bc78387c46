"""`wfqueue plan`: a workflow session (WFS-*) in four phases, then the verification gate."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli.progress import TerminalUI
from wfqueue.metering import BUDGET_HELP, parse_budget_option
from wfqueue.providers import check_provider_spec
from wfqueue.sessions import read_requirement, resolve_repo
from wfqueue.settings import load_settings
from wfqueue.workflow_session.coordinator import PlanRequest, WfsCoordinator


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(
        requirement: str | None = typer.Argument(None,
                                                 help="Text, or a .md file; leave out with --session to continue."),
        repo: str | None = typer.Option(None, "--repo", help="Repository (default: git top level of the cwd)."),
        session: str | None = typer.Option(None, "--session", help="Continue (or reuse) this WFS session."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Recommended choices everywhere; verify and stop."),
        provider: str | None = typer.Option(None, "--provider", help="offline or anthropic."),
        workers: int | None = typer.Option(None, "--workers", min=1,
                                           help="Embedded mode: worker processes (default 4)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
        budget: str | None = typer.Option(None, "--budget", help=BUDGET_HELP + " With --session it replaces the "
                                   "session's budget; left out, the session keeps its own."),
    ) -> None:
        """Session, context (parallel exploration), conflict resolution if risky, IMPL tasks; then verify."""
        settings = load_settings()
        spec = check_provider_spec(provider or settings.effective_provider())
        spending_cap = parse_budget_option(budget, spec, settings)
        request = PlanRequest(
            requirement=read_requirement(requirement, settings.requirement_max_bytes) if requirement else None,
            repo=resolve_repo(repo),
            provider=spec,
            yes=yes,
            session=session,
            workers=workers,
            budget=spending_cap,
        )
        ui = TerminalUI()
        result = WfsCoordinator(settings, ui).run(request)
        # A plan stopped by its budget has no tasks to verify yet.
        choice = "stop" if result.stopped else "verify" if yes else ui.gate()
        gate = None
        if choice == "verify":
            from wfqueue.workflow_session.verify.run import (
                verify_session,  # the verify command's module; loaded only when used
            )

            report = verify_session(Path(result.session_dir))
            gate = report.quality_gate
            ui.info(f"verification: {gate} (coverage {report.coverage.percent:.0f}%); "
                    f"report: {result.session_dir}/.process/PLAN_VERIFICATION.md")
        result = result.model_copy(update={"gate": gate})
        if as_json:
            typer.echo(json.dumps(result.model_dump(include={"session_id", "session_dir", "status", "tasks",
                                                              "conflicts"}), ensure_ascii=False))
        else:
            out = Console(highlight=False, soft_wrap=True)
            out.print(f"[bold]{result.status}[/]: {result.tasks} tasks, {result.conflicts} conflicts resolved"
                      + (f", gate {gate}" if gate else ""))
            if result.stopped:
                out.print(f"[red]{escape(result.stopped)}[/]")
            else:
                out.print(f"plan:    {result.session_dir}/IMPL_PLAN.md")
            out.print(f"session: {result.session_dir}")
            if result.usage:
                out.print(f"usage:   {escape(result.usage)}")
        raise typer.Exit(result.exit_code)
