"""`wfqueue lite-plan`: explore from several angles in parallel, verify, plan tasks.jsonl."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli.progress import TerminalUI
from wfqueue.lite.coordinator import LiteCoordinator, LiteRequest
from wfqueue.metering import BUDGET_HELP, parse_budget_option
from wfqueue.providers import check_provider_spec
from wfqueue.sessions import read_requirement, resolve_repo
from wfqueue.settings import load_settings


def register(app: typer.Typer) -> None:
    @app.command("lite-plan")
    def lite_plan(
        requirement: str = typer.Argument(..., help="The task, as text or the path of a .md file."),
        repo: str | None = typer.Option(None, "--repo", help="Repository to plan (default: git top level of the cwd)."),
        explore: bool = typer.Option(False, "--explore", "-e", help="Explore the code even if not needed."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Skip clarification and confirmation."),
        provider: str | None = typer.Option(None, "--provider", help="offline or anthropic."),
        workers: int | None = typer.Option(None, "--workers", min=1,
                                           help="Embedded mode: worker processes (default 4)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
        budget: str | None = typer.Option(None, "--budget", help=BUDGET_HELP),
    ) -> None:
        """Assess the task, explore angles in parallel, verify findings, write tasks.jsonl."""
        settings = load_settings()
        spec = check_provider_spec(provider or settings.effective_provider())
        spending_cap = parse_budget_option(budget, spec, settings)
        request = LiteRequest(
            requirement=read_requirement(requirement, settings.requirement_max_bytes),
            repo=resolve_repo(repo),
            provider=spec,
            explore=explore,
            yes=yes,
            workers=workers,
            budget=spending_cap,
        )
        result = LiteCoordinator(settings, TerminalUI()).run(request)
        if as_json:
            typer.echo(json.dumps(result.model_dump(include={"session_id", "session_dir", "status", "tasks",
                                                              "conflicts"}), ensure_ascii=False))
        else:
            out = Console(highlight=False, soft_wrap=True)
            out.print(f"[bold]{result.status}[/]: {result.tasks} tasks ({result.complexity}; "
                      f"angles: {', '.join(result.angles) or 'none'})")
            for angle, reason in result.failed_angles.items():
                out.print(f"[red]skipped angle[/]: {angle}: {reason}")
            if result.stopped:
                out.print(f"[red]{escape(result.stopped)}[/]")
            else:
                out.print(f"tasks:   {result.session_dir}/tasks.jsonl")
            out.print(f"plan:    {result.session_dir}/plan.md")
            if result.usage:
                out.print(f"usage:   {escape(result.usage)}")
        raise typer.Exit(result.exit_code)
