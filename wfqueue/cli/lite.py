"""`wfqueue lite-plan`: explore from several angles in parallel, verify, plan tasks.jsonl."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli import plan_common as common
from wfqueue.cli.progress import TerminalUI
from wfqueue.lite.coordinator import LiteCoordinator, LiteRequest
from wfqueue.sessions import read_requirement, resolve_repo
from wfqueue.settings import MAX_EXPLORE_WORKERS


def register(app: typer.Typer) -> None:
    @app.command("lite-plan")
    def lite_plan(
        requirement: str = typer.Argument(..., help="The task, as text or the path of a .md file."),
        repo: str | None = typer.Option(None, "--repo", help=common.REPO_HELP),
        explore: bool = typer.Option(False, "--explore", "-e", help="Explore the code even if not needed."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Skip clarification and confirmation."),
        provider: str | None = typer.Option(None, "--provider", help=common.PROVIDER_HELP),
        workers: int | None = typer.Option(None, "--workers", help=common.workers_help(MAX_EXPLORE_WORKERS)),
        as_json: bool = typer.Option(False, "--json", help=common.JSON_HELP),
        budget: str | None = typer.Option(None, "--budget", help=common.budget_help()),
    ) -> None:
        """Assess the task, explore angles in parallel, verify findings, write tasks.jsonl."""
        settings, spec, spending_cap = common.plan_setup(provider, budget)
        common.check_workers(workers, MAX_EXPLORE_WORKERS)
        request = LiteRequest(requirement=read_requirement(requirement, settings.requirement_max_bytes),
                              repo=resolve_repo(repo), provider=spec, explore=explore, yes=yes, workers=workers,
                              budget=spending_cap)
        result = LiteCoordinator(settings, TerminalUI()).run(request)

        def describe(out: Console) -> None:
            explored = [angle for angle in result.angles if angle not in result.failed_angles]  # failed: listed below
            out.print(f"[bold]{result.status}[/]: {result.tasks} tasks ({result.complexity}; "
                      f"angles: {escape(', '.join(explored) or 'none')})")
            common.failed_angles(out, result.failed_angles)
            common.stopped_or(out, result, f"tasks:   {escape(result.session_dir)}/tasks.jsonl")
            out.print(f"plan:    {escape(result.session_dir)}/plan.md")

        common.finish(result, as_json, describe)
