"""`wfqueue flower`: Flower on wfqueue's Celery app, never with an open API by accident.

Flower's API can revoke tasks and shut workers down, so it is served only with
basic auth (WFQUEUE_FLOWER_BASIC_AUTH or Flower's own FLOWER_BASIC_AUTH), unless
WFQUEUE_FLOWER_UNAUTHENTICATED_API=true says otherwise. Credentials travel in
the environment, not on the command line where `ps` would show them.
"""

from __future__ import annotations

import errno
import os
import socket
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
        pairs = credentials.split(",")
        for number, pair in enumerate(pairs, start=1):
            user, _, password = pair.partition(":")
            if not user or not password:
                which = f"its pair {number} of {len(pairs)}" if len(pairs) > 1 else "it"
                # Not quoted: a pair without a colon may be a password alone.
                raise ConfigError(f"WFQUEUE_FLOWER_BASIC_AUTH: {which} is not user:password with both set "
                                  f"({'a user' if user else 'no user'}, {'a password' if password else 'no password'})",
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


def refuse_unusable_listen(address: str, port: int, *, option: str,
                           address_from: str = "WFQUEUE_FLOWER_ADDRESS") -> None:
    """Refuse, before anything starts, an address and port Flower could not listen on: a port another program
    holds (its health check would be answered by that program: another `wfqueue up`'s Flower, on the default port
    every up shares), an address that does not resolve or is not this machine's. Found by Flower itself, each was
    an exit seconds later whose hint blamed the port. ``option`` is the command's port option, for the hint;
    ``address_from`` where the address came from (the setting, or `--address`)."""
    try:  # the family as the name resolves (a host name of this machine may have IPv6 addresses only)
        family, _, _, _, where = socket.getaddrinfo(address or "0.0.0.0", port, type=socket.SOCK_STREAM,
                                                    flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"Flower's address {address!r} ({address_from}) cannot be resolved: "
                          f"{exc.strerror}",
                          hint="give an address or host name of this machine, such as 127.0.0.1 (this machine "
                               "only) or 0.0.0.0 (every interface)") from None
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Flower binds: a closing socket is no owner
        try:
            probe.bind(where)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"Flower's port {port} is in use: another program listens on {address}:{port} "
                                  "(another `wfqueue up`, whose Flower every up starts on the same default port?)",
                                  hint=f"choose a free port with {option} (or WFQUEUE_FLOWER_PORT)") from None
            raise ConfigError(f"Flower cannot listen on {address}:{port}: {exc.strerror or exc}",
                              hint=f"give an address of this machine ({address_from}) and a port you may use "
                                   f"({option}; below 1024 needs privileges)") from None


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
        port: int | None = typer.Option(None, "--port", min=1, max=65535,
                                        help="Port (default: WFQUEUE_FLOWER_PORT, 5555)."),
        address: str | None = typer.Option(None, "--address",
                                           help="Address (default: WFQUEUE_FLOWER_ADDRESS, 127.0.0.1)."),
    ) -> None:
        """Start Flower (monitoring UI, /api, /metrics for Prometheus) with basic auth from settings."""
        settings = load_settings()
        port = settings.flower_port if port is None else port
        given = address is not None
        address = settings.flower_address if address is None else address
        argv, env = flower_command(settings, port, address)
        refuse_unusable_listen(address, port, option="--port",
                               address_from="--address" if given else "WFQUEUE_FLOWER_ADDRESS")
        # Flower retried a refused password for ever, its API serving nothing; it only watches: writes need not pass.
        refuse_wrong_credentials(settings, writing=False)
        os.execve(sys.executable, argv, env)  # Flower replaces this process: signals reach it directly
