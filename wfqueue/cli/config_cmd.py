"""`wfqueue config`: the effective settings, secrets masked."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wfqueue.cli import json_output
from wfqueue.settings import load_settings


def register(app: typer.Typer) -> None:
    @app.command("config")
    def config(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
        """Print the effective settings (environment, config file, defaults) with secrets masked."""
        shown = load_settings().masked()
        if as_json:
            json_output.emit(json.dumps(shown, indent=2, default=str))
            return
        table = Table("setting", "value", title="wfqueue settings (env prefix WFQUEUE_)")
        for name, value in shown.items():
            table.add_row(name, "-" if value is None else escape(str(value)))
        Console().print(table)
