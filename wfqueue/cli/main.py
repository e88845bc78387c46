"""Entry point: builds the Typer app and turns wfqueue errors into exit codes.

Exit codes: 0 complete, 1 partial plan, 2 bad input, 3 infrastructure,
130 interrupted.
"""

from __future__ import annotations

import sys

import click
import typer
import typer._click.exceptions as typer_click_exceptions
from rich.console import Console

from wfqueue.cli import (
    beat_cmd,
    collab,
    config_cmd,
    flower_cmd,
    lite,
    plan_cmd,
    replan_cmd,
    resume_cmd,
    status,
    up_cmd,
    validate,
    verify_cmd,
    worker,
)
from wfqueue.errors import WfqueueError

app = typer.Typer(
    name="wfqueue",
    help="Plan large software changes with many planning agents running as Celery tasks on Redis.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
collab.register(app)
lite.register(app)
plan_cmd.register(app)
verify_cmd.register(app)
replan_cmd.register(app)
resume_cmd.register(app)
validate.register(app)
worker.register(app)
beat_cmd.register(app)
flower_cmd.register(app)
up_cmd.register(app)
status.register(app)
config_cmd.register(app)


def main(argv: list[str] | None = None) -> int:
    err = Console(stderr=True)
    try:
        code = app(args=argv, standalone_mode=False)
    except WfqueueError as exc:
        err.print(f"[bold red]error:[/] {exc.message}", highlight=False, markup=True, soft_wrap=True)
        if exc.hint:
            err.print(f"[dim]hint:[/] {exc.hint}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort, typer.Abort):
        err.print("interrupted")
        return 130
    except (click.exceptions.ClickException, typer_click_exceptions.ClickException) as exc:
        # Typer vendors its own copy of click: usage errors come from either.
        exc.show()
        usage = isinstance(exc, (click.exceptions.UsageError, typer_click_exceptions.UsageError))
        return 2 if usage else exc.exit_code
    except (click.exceptions.Exit, typer.Exit) as exc:
        return exc.exit_code
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
