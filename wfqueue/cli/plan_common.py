"""What the plan commands (collab-plan, lite-plan, plan, resume) share: their common options,
reading the provider and budget, and printing an outcome (or its `--json` object) and exiting.

An embedded Redis and its workers are stopped after the outcome is printed, not before: the user
reads the result while they shut down (the command still exits only once they are gone)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wfqueue.cli import json_output
from wfqueue.errors import BadInputError
from wfqueue.metering import BUDGET_HELP, budget_resume_hint, parse_budget_option
from wfqueue.plan_check import default_repo
from wfqueue.providers import check_provider_spec
from wfqueue.runtime import resume_command, stop_after_output, stop_deferred
from wfqueue.sessions import repo_option
from wfqueue.settings import Settings, load_settings
from wfqueue.usage import Budget
from wfqueue.workflow.contract import PlanOutcome

PROVIDER_HELP = "offline (deterministic, no API key) or anthropic; default: anthropic when ANTHROPIC_API_KEY is set"
# What --repo means when it is left out (wfqueue.sessions.project_of).
REPO_DEFAULT = "default: the nearest folder holding .workflow/ from the cwd up to its git top level, else the top"
REPO_HELP = f"Repository to plan ({REPO_DEFAULT})."
JSON_HELP = "Print one JSON object on stdout and nothing else there."


def workers_help(limit: int, default: str = "WFQUEUE_MAX_AGENTS") -> str:
    return f"Embedded mode: worker processes, 1..{limit} (default: {default})."


def check_workers(workers: int | None, limit: int) -> None:
    """Refuse a --workers count outside 1..``limit`` before anything starts."""
    if workers is not None and not 1 <= workers <= limit:
        raise BadInputError(f"--workers {workers} is out of range", hint=f"use 1..{limit}")


def budget_help(extra: str = "") -> str:
    return BUDGET_HELP + (f" {extra}" if extra else "")


def plan_setup(provider: str | None, budget: str | None,
               settings: Settings | None = None) -> tuple[Settings, str, Budget | None]:
    """The settings (loaded unless given), the provider spec (checked) and the parsed --budget."""
    settings = settings or load_settings()
    spec = check_provider_spec(provider or settings.effective_provider())
    spending_cap = parse_budget_option(budget, spec, settings)
    stop_after_output()  # `finish` stops the embedded cluster once the outcome is out
    return settings, spec, spending_cap


def finish(result: PlanOutcome, as_json: bool, describe: Callable[[Console], None],
           json_object: dict[str, Any] | None = None) -> None:
    """Print the outcome: the `--json` object on stdout (``json_object`` when the command prints its own
    fields), or ``describe`` and the usage line; exit with the outcome's code (0, or 1 for partial and
    failed). An embedded cluster is stopped after the output is flushed, before the exit."""
    printed = False
    try:
        if as_json:
            json_output.emit(result.json_line() if json_object is None else json_object)
        else:
            out = Console(highlight=False, soft_wrap=True)
            describe(out)
            if result.usage:
                out.print(f"usage:   {escape(result.usage)}")
            if result.budget_spent():  # a resume without a larger --budget would stop at the same cap
                folder = Path(result.session_dir)
                out.print(escape(budget_resume_hint(result.session_id, repo_option(default_repo(folder)))))
        if result.stop_hint:  # on stderr, as a refusal's hint: stdout may be the one JSON object
            typer.echo(f"hint: {result.stop_hint}", err=True)
        sys.stdout.flush()  # a pipe buffers: the result must not wait for the shutdown
        printed = True
    finally:
        try:
            stop_deferred()
        except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) while Redis and the workers stop: they were killed
            if not printed:
                raise
    # The outcome is out: a Ctrl-C during the shutdown only hurried it, and must not turn a completed plan
    # into exit 130 for the script that reads the result.
    raise typer.Exit(result.exit_code)


def failed_angles(out: Console, failed: dict[str, str], session_dir: str = "", kept: str | None = None) -> None:
    """The exploration angles a plan went without: its findings are missing from the plan (partial). For a workflow
    session (in ``session_dir``), what its resume does about them (the angle's own reason says "run the plan
    again", which sent the user round to a resume that answered the same partial plan); ``kept``: why that resume
    kept it as it is."""
    for angle, reason in failed.items():
        out.print(f"[red]skipped angle[/]: {escape(angle)}: {escape(reason)}")
    folder = Path(session_dir)
    if not failed or not session_dir or not folder.name.startswith("WFS-"):
        return
    them = "it" if len(failed) == 1 else "them"
    if kept is None:
        # With --repo where the current folder would not find the session (it said "no session" there).
        said = (f"{resume_command(folder.name, default_repo(folder))} explores {them} again and makes the plan again "
                "with the findings (unless its task files are changed first: a replan or an edit keeps the plan as it "
                "is)")
    else:
        said = (f"its tasks were generated without {them}, and it is not planned again: {kept}. Plan the requirement "
                "again (`wfqueue plan`, a new session; this one is kept) for a plan with every angle, or go on with "
                "this one as it is")
    out.print(escape(said), soft_wrap=True)


def stopped_or(out: Console, result: PlanOutcome, otherwise: str) -> None:
    """Why planning stopped early (a spent budget), or ``otherwise`` (where the plan is)."""
    out.print(f"[red]{escape(result.stopped)}[/]" if result.stopped else otherwise)


# The widest line a piped table is given (an error text in a cell folds within it).
MAX_PIPED_WIDTH = 400


def print_table(out: Console, table: Table) -> None:
    """``table`` on ``out``; where no person reads it (a pipe, a file, a CI log: rich assumes 80 columns there)
    as wide as its cells need, up to MAX_PIPED_WIDTH, instead of squeezing columns to `…` or nothing. A
    terminal keeps its width: there the person can widen it."""
    if not out.is_terminal:
        needed = out.measure(table, options=out.options.update(width=MAX_PIPED_WIDTH)).maximum
        if needed > out.width:
            # A console of its own: rich clamps a print's width to the console's.
            Console(file=out.file, width=min(needed, MAX_PIPED_WIDTH), highlight=False).print(table, crop=False)
            return
    out.print(table)


def keep_whole(table: Table, *headers: str) -> None:
    """Never wrap or shorten these columns (ids, states): a terminal may be 80 columns wide, and an id cut to
    `CPLAN-add-s…` cannot be copied into the next command. The other columns fold instead."""
    for column in table.columns:
        if column.header in headers:
            column.no_wrap, column.overflow = True, "ignore"
