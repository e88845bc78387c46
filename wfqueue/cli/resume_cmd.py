"""`wfqueue resume SESSION`: finish an interrupted collab, lite or workflow session."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli.locate import locate
from wfqueue.cli.progress import TerminalUI
from wfqueue.collab.coordinator import CollabCoordinator, PlanResult
from wfqueue.lite.coordinator import LiteCoordinator, LiteResult
from wfqueue.metering import BUDGET_HELP, parse_budget_option
from wfqueue.providers import check_provider_spec
from wfqueue.sessions import resolve_repo
from wfqueue.settings import load_settings
from wfqueue.workflow_session.coordinator import PlanRequest, WfsCoordinator, WfsResult


def register(app: typer.Typer) -> None:
    @app.command("resume")
    def resume(
        session: str = typer.Argument(..., help="A CPLAN-*, lite-plan or WFS-* session id."),
        repo: str | None = typer.Option(None, "--repo", help="Repository (default: git top level of the cwd)."),
        provider: str | None = typer.Option(None, "--provider", help="Used only if the session did not record one."),
        budget: str | None = typer.Option(None, "--budget", help=BUDGET_HELP + " Replaces the session's budget."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
    ) -> None:
        """Re-enqueue only the work an interrupted session is missing, then finish it."""
        settings = load_settings()
        root = resolve_repo(repo)
        kind, folder = locate(root, session)
        spec = check_provider_spec(provider or settings.effective_provider())
        spending_cap = parse_budget_option(budget, spec, settings)
        ui = TerminalUI()
        result: PlanResult | LiteResult | WfsResult
        if kind == "collab":
            result = CollabCoordinator(settings, ui).resume(folder, root, spec, budget=spending_cap)
        elif kind == "lite":
            result = LiteCoordinator(settings, ui).resume(folder, root, spec, budget=spending_cap)
        else:
            result = WfsCoordinator(settings, ui).run(
                PlanRequest(repo=root, provider=spec, yes=True, session=session, budget=spending_cap))
        payload = result.model_dump(include={"session_id", "session_dir", "status", "tasks", "conflicts"})
        if as_json:
            typer.echo(json.dumps(payload, ensure_ascii=False))
        else:
            out = Console(highlight=False, soft_wrap=True)
            out.print(f"[bold]{result.status}[/]: {result.tasks} tasks, {result.conflicts} conflicts"
                      f" — {result.session_dir}")
            for area, reason in getattr(result, "failures", {}).items():  # collab plans name each failed agent
                out.print(f"[red]failed area[/]: {area}: {escape(reason)}")
        raise typer.Exit(result.exit_code)
