"""`wfqueue collab-plan`: a collaborative plan by parallel planning agents."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli import plan_common as common
from wfqueue.cli.progress import TerminalUI
from wfqueue.collab.coordinator import CollabCoordinator, CollabRequest
from wfqueue.errors import BadInputError
from wfqueue.sessions import read_requirement, resolve_repo
from wfqueue.settings import MAX_AGENTS_LIMIT, MAX_COLLAB_WORKERS


def register(app: typer.Typer) -> None:
    @app.command("collab-plan")
    def collab_plan(
        requirement: str = typer.Argument(..., help="The requirement, as text or the path of a .md file."),
        repo: str | None = typer.Option(None, "--repo", help=common.REPO_HELP),
        max_agents: int | None = typer.Option(None, "--max-agents",
                                              help=f"Most sub-domains / agents, 2..{MAX_AGENTS_LIMIT}."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Accept the split without asking."),
        provider: str | None = typer.Option(None, "--provider", help=common.PROVIDER_HELP),
        workers: int | None = typer.Option(None, "--workers",
                                           help=common.workers_help(MAX_COLLAB_WORKERS, "one per agent")),
        as_json: bool = typer.Option(False, "--json", help=common.JSON_HELP),
        budget: str | None = typer.Option(None, "--budget", help=common.budget_help()),
    ) -> None:
        """Split a requirement into sub-domains, plan them in parallel, detect conflicts."""
        settings, spec, spending_cap = common.plan_setup(provider, budget)
        agents = settings.max_agents if max_agents is None else max_agents
        if not 2 <= agents <= MAX_AGENTS_LIMIT:
            raise BadInputError(f"--max-agents {agents} is out of range", hint=f"use 2..{MAX_AGENTS_LIMIT}")
        common.check_workers(workers, MAX_COLLAB_WORKERS)
        request = CollabRequest(requirement=read_requirement(requirement, settings.requirement_max_bytes),
                                repo=resolve_repo(repo), max_agents=agents, provider=spec, yes=yes, workers=workers,
                                budget=spending_cap)
        result = CollabCoordinator(settings, TerminalUI()).run(request)

        def describe(out: Console) -> None:
            if result.status == "cancelled":
                out.print(f"cancelled; nothing was planned. Session folder: {escape(result.session_dir)}")
                return
            out.print(f"[bold]{result.status}[/]: {result.tasks} tasks, {result.conflicts} conflicts")
            for area in result.failed_areas:
                out.print(f"[red]failed area[/]: {area}: {escape(result.failures.get(area, 'see plan.md'))}")
            if result.stopped:  # no split (the understanding failed), or no agent planned a task
                out.print(f"[red]{escape(result.stopped)}[/]")
            out.print(f"plan:    {escape(result.session_dir)}/plan.md")
            out.print(f"session: {escape(result.session_dir)}")

        common.finish(result, as_json, describe)
