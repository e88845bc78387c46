"""`wfqueue verify`: check a workflow session's plan and print its quality gate.

Exit codes: 0 PROCEED / PROCEED_WITH_CAUTION, 1 PROCEED_WITH_FIXES / BLOCK_EXECUTION,
2 bad input (unknown session, bad --repo, a session still being planned: raised as BadInputError, mapped by
main()).
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wfqueue.cli import json_output
from wfqueue.cli.plan_common import REPO_DEFAULT
from wfqueue.planted import refuse_planted
from wfqueue.sessions import resolve_repo
from wfqueue.workflow_session.models import GATES_READY
from wfqueue.workflow_session.session import PROCESS_DIR, find_session
from wfqueue.workflow_session.verify.run import FINDINGS_FILE, REPORT_FILE, VerificationReport, verify_session

GATE_STYLE = {"PROCEED": "green", "PROCEED_WITH_CAUTION": "yellow", "PROCEED_WITH_FIXES": "red",
              "BLOCK_EXECUTION": "bold red"}
COLOUR_STYLE = {"GREEN": "green", "YELLOW": "yellow", "RED": "red", "UNMEASURED": "yellow"}
SEVERITY_STYLE = {"CRITICAL": "bold red", "HIGH": "red", "MEDIUM": "yellow", "LOW": "dim"}


def exit_code_for(report: VerificationReport) -> int:
    """0 when execution may start, 1 when findings must be fixed first."""
    return 0 if report.quality_gate in GATES_READY else 1


def _print(report: VerificationReport, report_path: str) -> None:
    out = Console(highlight=False)
    cov = report.coverage
    # Summaries quote task titles and notes: escape them so "[x]" or "[/]" is text, not rich markup.
    out.print(f"[bold]{escape(report.session_id)}[/]: quality gate "
              f"[{GATE_STYLE[report.quality_gate]}]{report.quality_gate}[/]")
    out.print(f"coverage: [{COLOUR_STYLE[cov.colour]}]{cov.describe()}[/]"
              + (f", missing: {escape(', '.join(cov.missing))}" if cov.missing else ""))
    out.print(", ".join(f"{n} {s.lower()}" for s, n in report.counts.items())
              + (f"; tiers {', '.join(map(str, report.skipped_tiers))} skipped" if report.skipped_tiers else "")
              + (f"; {report.omitted} omitted by limits" if report.omitted else ""))
    if report.findings:
        table = Table("id", "dim", "severity", "location", "summary")
        for f in report.findings:
            table.add_row(f.id, f.dimension, f"[{SEVERITY_STYLE[f.severity]}]{f.severity}[/]",
                          escape(", ".join(f.location)), escape(f.summary))
        out.print(table)
    else:
        out.print("no findings")
    out.print(f"report: {escape(report_path)}")


def register(app: typer.Typer) -> None:
    @app.command("verify")
    def verify(
        session: str | None = typer.Option(None, "--session", help="Session id WFS-... (default: the active session)."),
        repo: str | None = typer.Option(None, "--repo", help=f"Repository ({REPO_DEFAULT})."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else there."),
    ) -> None:
        """Verify a workflow plan (read-only) and print its quality gate. Exit 1 when fixes are needed."""
        root = resolve_repo(repo)
        refuse_planted(root)
        folder = find_session(root, session)
        report = verify_session(folder)
        report_path = str(folder / PROCESS_DIR / REPORT_FILE)
        if as_json:
            payload = {**report.model_dump(mode="json"), "report": report_path,
                       "findings_file": str(folder / PROCESS_DIR / FINDINGS_FILE)}
            json_output.emit(payload)
        else:
            _print(report, report_path)
        raise typer.Exit(exit_code_for(report))
