"""`wfqueue worker`: a Celery worker for the explore, plan and control queues."""

from __future__ import annotations

import os
import sys

import typer

from wfqueue.errors import ConfigError
from wfqueue.settings import load_settings
from wfqueue.task_names import ALL_QUEUES


def register(app: typer.Typer) -> None:
    @app.command("worker")
    def worker(
        hostname: str | None = typer.Option(None, "--hostname", "-n", help="Celery node name (default: wfq@HOST)."),
        concurrency: int | None = typer.Option(None, "--concurrency", "-c", min=1, help="Pool processes."),
        queues: str = typer.Option(",".join(ALL_QUEUES), "--queues", "-Q", help="Queues to consume."),
        loglevel: str = typer.Option("INFO", "--loglevel", "-l"),
    ) -> None:
        """Run a worker against WFQUEUE_BROKER_URL (same as `celery -A workers.app worker`)."""
        settings = load_settings()
        if settings.broker_url is None:
            raise ConfigError(
                "WFQUEUE_BROKER_URL is not set: a standalone worker needs a shared broker",
                hint="export WFQUEUE_BROKER_URL=redis://HOST:6379/0 (plan commands start their own workers otherwise)",
            )
        unknown = sorted(set(queues.split(",")) - set(ALL_QUEUES))
        if unknown:
            raise ConfigError(f"unknown queue(s): {', '.join(unknown)}", hint=f"choose from {', '.join(ALL_QUEUES)}")
        argv = [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--queues", queues,
                "--loglevel", loglevel, "--events"]
        if hostname:
            argv += ["--hostname", hostname]
        concurrency = concurrency or settings.worker_concurrency
        if concurrency:
            argv += ["--concurrency", str(concurrency)]
        os.execv(sys.executable, argv)  # the worker replaces this process: signals reach Celery directly
