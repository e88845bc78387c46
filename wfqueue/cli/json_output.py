"""The one JSON object a ``--json`` command prints on stdout, and the object printed in its place when the
command ends without it.

A script that runs ``wfqueue ... --json`` parses stdout. Before this, a command that refused its input
(exit 2), lost its broker (exit 3) or was interrupted printed its error on stderr alone, and the script read
an empty stdout as a JSON error of its own. Every ``--json`` command now prints exactly one object: its
result, or ``{"status": "error"|"interrupted", "exit_code": N, "error": "...", "hint": "..."|null}`` (and
the ``session_id`` of the session it ended, once one was under way).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typer

JSON_FLAG = "--json"


class _Printed:
    """Whether this command has printed its object (one command line per process, but tests run many)."""

    done = False


def asked(argv: Sequence[str]) -> bool:
    """Whether the command line asks for ``--json``: the flag before any ``--`` (after it, a requirement's
    text)."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == JSON_FLAG:
            return True
    return False


def begin() -> None:
    """A command line starts: nothing printed yet."""
    _Printed.done = False


def emit(obj: Any) -> None:
    """Print ``obj`` (a JSON-ready value, or text that already is JSON) as the command's one object."""
    typer.echo(obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False))
    _Printed.done = True


def emit_failure(exit_code: int, message: str, hint: str | None = None, *, status: str = "error",
                 session_id: str | None = None) -> None:
    """The object for a command that ended with ``exit_code`` before printing its own (``status``: "error",
    or "interrupted" for a Ctrl-C or a stop signal; ``session_id``: the session it stopped or failed, once one
    was under way); nothing when it did (a partial plan prints its result and exits 1)."""
    if _Printed.done:
        return
    failure: dict[str, Any] = {"status": status, "exit_code": exit_code, "error": message, "hint": hint or None}
    if session_id is not None:
        failure["session_id"] = session_id
    emit(failure)
