"""`wfqueue resume SESSION`: finish an interrupted session of any workflow kind (wfqueue.workflow.registry)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli import plan_common as common
from wfqueue.cli.execute_cmd import finish_execution
from wfqueue.cli.plan_cmd import describe_session, gate_after
from wfqueue.cli.progress import TerminalUI
from wfqueue.execute.outcome import ExecutionOutcome
from wfqueue.session_check import check_session_files
from wfqueue.sessions import resolve_repo
from wfqueue.settings import load_settings
from wfqueue.workflow.base import check_credentials
from wfqueue.workflow.contract import ResumeRequest
from wfqueue.workflow.registry import locate
from wfqueue.workflow_session.coordinator import WfsResult


def register(app: typer.Typer) -> None:
    @app.command("resume")
    def resume(
        session: str = typer.Argument(..., help="A CPLAN-*, lite-plan or WFS-* session id, or an EXEC-* id."),
        repo: str | None = typer.Option(None, "--repo", help=f"Repository ({common.REPO_DEFAULT})."),
        provider: str | None = typer.Option(None, "--provider",
                                            help="Finish with this provider (default: the one the session was "
                                                 "planned with)."),
        budget: str | None = typer.Option(None, "--budget", help=common.budget_help("Replaces the session's budget.")),
        as_json: bool = typer.Option(False, "--json", help=common.JSON_HELP),
        yes: bool = typer.Option(False, "--yes", "-y",
                                 help="Accept a lite plan stopped at its allow/modify/cancel question without "
                                      "asking; verify a workflow session once planned, as `plan -y` does."),
    ) -> None:
        """Re-enqueue only the work an interrupted session is missing, then finish it."""
        settings = load_settings()
        root = resolve_repo(repo)
        kind, folder = locate(root, session)
        check_session_files(folder)
        settings, spec, spending_cap = common.plan_setup(provider, budget, settings)
        if provider is not None:  # refused before the session records it: every later resume would use it
            check_credentials(settings, spec, root)
        ui = TerminalUI()
        result = kind.resume(settings, ui,
                             ResumeRequest(session_dir=folder, repo=root, provider=spec, budget=spending_cap,
                                           provider_chosen=provider is not None, yes=yes))
        if isinstance(result, ExecutionOutcome):  # an execution says what an execution says, as `execute` does
            finish_execution(result, as_json)
            return
        if isinstance(result, WfsResult):  # as `plan --session` ends: with -y, verified (it said gate null, exit 0)
            gated, next_step = gate_after(result, "verify", ui) if yes else (result, "")
            common.finish(gated, as_json, lambda out: describe_session(out, gated, next_step))
            return

        def describe(out: Console) -> None:
            out.print(f"[bold]{result.status}[/]: {result.tasks} tasks, {result.conflicts} conflicts"
                      f" — {escape(result.session_dir)}")
            for area, reason in getattr(result, "failures", {}).items():  # collab plans name each failed agent
                out.print(f"[red]failed area[/]: {area}: {escape(reason)}")
            common.failed_angles(out, getattr(result, "failed_angles", {}), result.session_dir,  # lite and workflow
                                 getattr(result, "kept_partial", None))

        common.finish(result, as_json, describe)
