"""Workflow sessions for the replan tests, and the replan commands run as the CLI runs them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from tests.wfs_factory import make_session, task
from wfqueue.cli.replan_cmd import register
from wfqueue.errors import WfqueueError


def three_tasks(repo: Path, **kwargs: Any) -> Path:
    """IMPL-1 <- IMPL-2 <- IMPL-3 (each depends on the one before)."""
    return make_session(repo, "Add rate limiting", [
        task(1, "Config", ["src/config.py"]),
        task(2, "Limiter", ["src/limiter.py"], [1]),
        task(3, "Client", ["src/client.py"], [2]),
    ], **kwargs)


def tree(folder: Path, skip_backups: bool = False) -> dict[str, str]:
    """sha256 of every file under ``folder`` (optionally without backups and lock files)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and not (skip_backups and (rel.startswith(".process/backup/") or rel.endswith(".lock"))):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def cli(*args: str) -> tuple[int, str, str, BaseException | None]:
    """Run the replan commands like wfqueue.cli.main does: WfqueueError -> its exit code."""
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, list(args), standalone_mode=False)
    exc = result.exception
    if isinstance(exc, WfqueueError):
        return exc.exit_code, result.stdout, str(exc), exc
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    code = result.return_value if isinstance(result.return_value, int) else result.exit_code
    return code, result.stdout, result.stderr, None


def read(folder: Path, rel: str) -> Any:
    return json.loads((folder / rel).read_text(encoding="utf-8"))
