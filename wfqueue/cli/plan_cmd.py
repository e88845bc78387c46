"""`wfqueue plan`: a workflow session (WFS-*) in four phases, then the verification gate."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from wfqueue.cli import plan_common as common
from wfqueue.cli.progress import TerminalUI
from wfqueue.sessions import read_requirement, resolve_repo
from wfqueue.settings import MAX_EXPLORE_WORKERS
from wfqueue.workflow_session.coordinator import GateChoice, PlanRequest, WfsCoordinator, WfsResult
from wfqueue.workflow_session.models import GATES_READY


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(
        requirement: str | None = typer.Argument(None,
                                                 help="Text, or a .md file; leave out with --session to continue."),
        repo: str | None = typer.Option(None, "--repo", help=common.REPO_HELP),
        session: str | None = typer.Option(None, "--session", help="Continue (or reuse) this WFS session."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Recommended choices everywhere; verify and stop."),
        provider: str | None = typer.Option(None, "--provider", help=common.PROVIDER_HELP),
        workers: int | None = typer.Option(None, "--workers", help=common.workers_help(MAX_EXPLORE_WORKERS)),
        as_json: bool = typer.Option(False, "--json", help=common.JSON_HELP),
        budget: str | None = typer.Option(None, "--budget", help=common.budget_help(
            "With --session it replaces the session's budget; left out, the session keeps its own.")),
    ) -> None:
        """Session, context (parallel exploration), conflict resolution if risky, IMPL tasks; then verify."""
        settings, spec, spending_cap = common.plan_setup(provider, budget)
        common.check_workers(workers, MAX_EXPLORE_WORKERS)
        request = PlanRequest(
            requirement=read_requirement(requirement, settings.requirement_max_bytes) if requirement else None,
            repo=resolve_repo(repo), provider=spec, yes=yes, session=session, workers=workers, budget=spending_cap)
        ui = TerminalUI()
        result = WfsCoordinator(settings, ui).run(request)
        gated, next_step = gate_after(result, "verify" if yes else None, ui)
        common.finish(gated, as_json, lambda out: describe_session(out, gated, next_step))


def gate_after(result: WfsResult, choice: GateChoice | None, ui: TerminalUI) -> tuple[WfsResult, str]:
    """``result`` with the verification's gate when ``choice`` (None: ask) is to verify, and what the gate asks
    for next: after `plan`, and after `resume -y` of a workflow session, which verified nothing."""
    if result.stopped:  # a plan stopped by its budget, or a step the model failed, has no tasks to verify yet
        return result, ""
    if (choice or ui.gate()) != "verify":
        return result, ""
    from wfqueue.workflow_session.verify.run import (  # the verify command's module; loaded only when used
        NEXT_STEPS,
        verify_session,
    )

    report = verify_session(Path(result.session_dir))
    ui.info(f"verification: {report.quality_gate} (coverage {report.coverage.describe()}); "
            f"report: {result.session_dir}/.process/PLAN_VERIFICATION.md")
    return result.model_copy(update={"gate": report.quality_gate}), NEXT_STEPS[report.quality_gate]


def describe_session(out: Console, result: WfsResult, next_step: str) -> None:
    """A workflow session's outcome as the terminal shows it."""
    gate = result.gate
    out.print(f"[bold]{result.status}[/]: {result.tasks} tasks, {result.conflicts} conflicts resolved"
              + (f", gate {gate}" if gate else ""))
    common.failed_angles(out, result.failed_angles, result.session_dir, result.kept_partial)
    common.stopped_or(out, result, f"plan:    {escape(result.session_dir)}/IMPL_PLAN.md")
    out.print(f"session: {escape(result.session_dir)}")
    if gate and gate not in GATES_READY:  # it exits 1 for that: say what the gate asks for
        out.print(f"next:    {escape(next_step)}")
