"""`wfqueue status [SESSION]`: sessions of a repository, or one session per agent."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from wfqueue.collab.inspect import SessionStatus, read_session
from wfqueue.sessions import find_collab_session, planning_root, resolve_repo
from wfqueue.settings import Settings, load_settings
from wfqueue.state import SessionState, connect


def _live_agents(settings: Settings, status: SessionStatus) -> dict[str, dict[str, Any]] | None:
    """Agent states from a shared broker; embedded sessions have only their files."""
    if settings.broker_url is None:
        return None
    state = SessionState(connect(settings), status.session_id, settings.state_ttl_s)
    return state.agents([a.focus_area for a in status.agents])


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        session: str = typer.Argument(None, help="A session id (default: list the repository's sessions)."),
        repo: str = typer.Option(None, "--repo", help="Repository (default: git top level of the cwd)."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Show sessions, or one session's agents: state, worker, tasks, errors."""
        settings = load_settings()
        root = resolve_repo(repo)
        out = Console(highlight=False)
        if session is None:
            folder = planning_root(root)
            rows = [read_session(p) for p in sorted(folder.iterdir()) if p.is_dir()] if folder.is_dir() else []
            if as_json:
                typer.echo(json.dumps([r.model_dump(exclude={"agents"}) for r in rows], ensure_ascii=False))
                return
            table = Table("session", "status", "agents", "tasks", "conflicts", title=str(folder))
            for r in rows:
                table.add_row(r.session_id, r.status, str(len(r.agents)), str(r.tasks), str(r.conflicts))
            out.print(table if rows else f"no sessions under {folder}")
            return
        folder = find_collab_session(root, session)
        current = read_session(folder)
        live = _live_agents(settings, current)
        if live:
            current = read_session(folder, live)
        if as_json:
            typer.echo(json.dumps(current.model_dump(), ensure_ascii=False))
            return
        out.print(f"[bold]{current.session_id}[/]: {current.status}, {current.tasks} tasks, {current.conflicts} conflicts")
        table = Table("agent", "state", "tasks", "worker", "pid", "error")
        for agent in current.agents:
            table.add_row(agent.focus_area, agent.state, str(agent.tasks), agent.worker or "", str(agent.pid or ""),
                          agent.error or "")
        out.print(table)
