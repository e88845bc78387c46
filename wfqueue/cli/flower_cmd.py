"""`wfqueue flower`: Flower on wfqueue's Celery app, never with an open API by accident.

Flower's API can revoke tasks and shut workers down, so it is served only with
basic auth (WFQUEUE_FLOWER_BASIC_AUTH or Flower's own FLOWER_BASIC_AUTH), unless
WFQUEUE_FLOWER_UNAUTHENTICATED_API=true says otherwise. Credentials travel in
the environment, not on the command line where `ps` would show them.
"""

from __future__ import annotations

import os
import sys

import typer

from wfqueue.celery_command import celery_argv
from wfqueue.errors import ConfigError
from wfqueue.settings import Settings, load_settings
from wfqueue.state import refuse_wrong_credentials


def flower_auth(settings: Settings) -> dict[str, str]:
    """Flower's authentication variables for these settings, or ConfigError (checked before anything starts)."""
    if settings.flower_basic_auth is not None:
        credentials = settings.flower_basic_auth.get_secret_value()
        # Flower splits the value on commas into user:password pairs: a comma in a password would make a pair of
        # its own, and the password Flower checks would not be the one chosen.
        for pair in credentials.split(","):
            user, _, password = pair.partition(":")
            if not user or not password:
                raise ConfigError(f"WFQUEUE_FLOWER_BASIC_AUTH: {pair!r} is not user:password with both set",
                                  hint="give user:password, or several separated by commas (so a password "
                                       "cannot hold a comma)")
        return {"FLOWER_BASIC_AUTH": credentials}
    if settings.flower_unauthenticated_api:
        return {"FLOWER_UNAUTHENTICATED_API": "true"}
    raise ConfigError(
        "refusing to start Flower without credentials: its API can revoke tasks and shut workers down",
        hint="set WFQUEUE_FLOWER_BASIC_AUTH=user:password (or WFQUEUE_FLOWER_UNAUTHENTICATED_API=true on a trusted "
             "network)",
    )


def flower_command(settings: Settings, port: int, address: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start Flower for these settings."""
    if settings.broker_url is None:
        raise ConfigError("WFQUEUE_BROKER_URL is not set: Flower watches a shared broker",
                          hint="export WFQUEUE_BROKER_URL=redis://..., or use `wfqueue up` for everything at once")
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWER_BASIC_AUTH", "FLOWER_UNAUTHENTICATED_API")}
    env.update(flower_auth(settings))
    argv = celery_argv("workers.app", "flower", f"--port={port}", f"--address={address}")
    return argv, env


def register(app: typer.Typer) -> None:
    @app.command("flower")
    def flower(
        port: int | None = typer.Option(None, "--port", help="Port (default: WFQUEUE_FLOWER_PORT, 5555)."),
        address: str | None = typer.Option(None, "--address",
                                           help="Address (default: WFQUEUE_FLOWER_ADDRESS, 127.0.0.1)."),
    ) -> None:
        """Start Flower (monitoring UI, /api, /metrics for Prometheus) with basic auth from settings."""
        settings = load_settings()
        argv, env = flower_command(settings, port or settings.flower_port, address or settings.flower_address)
        refuse_wrong_credentials(settings)  # Flower retried a refused password for ever, its API serving nothing
        os.execve(sys.executable, argv, env)  # Flower replaces this process: signals reach it directly
