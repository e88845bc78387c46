"""`wfqueue worker`: a Celery worker node for the explore, plan, control and execute queues."""

from __future__ import annotations

import os
import sys

import typer

from wfqueue.celery_command import checked_loglevel
from wfqueue.errors import ConfigError
from wfqueue.fsio import check_writable
from wfqueue.prestart import WORKER_MODULE
from wfqueue.settings import CELERY_POOLS, load_settings
from wfqueue.settings_checks import MAX_SLOTS, before_exec, descriptors_for, redelivery_overlap
from wfqueue.state import refuse_wrong_credentials
from wfqueue.task_names import ALL_QUEUES
from wfqueue.transport.checkouts import cache_dir


def register(app: typer.Typer) -> None:
    @app.command("worker")
    def worker(
        hostname: str | None = typer.Option(None, "--hostname", "-n", help="Celery node name (default: celery@HOST)."),
        concurrency: int | None = typer.Option(
            None, "--concurrency", "-c", min=1, max=MAX_SLOTS,
            help="Pool slots (default: WFQUEUE_WORKER_CONCURRENCY, else one process per CPU or 100 threads)."),
        pool: str | None = typer.Option(
            None, "--pool", "-P",
            help="prefork, threads or solo (default: WFQUEUE_WORKER_POOL; auto: threads when the provider is remote)."),
        queues: str = typer.Option(",".join(ALL_QUEUES), "--queues", "-Q", help="Queues to consume."),
        loglevel: str = typer.Option("INFO", "--loglevel", "-l", help="DEBUG, INFO, WARNING, ERROR, CRITICAL."),
    ) -> None:
        """Run a worker against WFQUEUE_BROKER_URL (like `celery -A workers.app worker`, faster to start)."""
        settings = load_settings()
        if settings.broker_url is None:
            raise ConfigError(
                "WFQUEUE_BROKER_URL is not set: a standalone worker needs a shared broker",
                hint="export WFQUEUE_BROKER_URL=redis://HOST:6379/0 (plan commands start their own workers otherwise)",
            )
        unknown = sorted(set(queues.split(",")) - set(ALL_QUEUES))
        if unknown:
            raise ConfigError(f"unknown queue(s): {', '.join(unknown)}", hint=f"choose from {', '.join(ALL_QUEUES)}")
        if pool is not None and pool not in CELERY_POOLS:
            raise ConfigError(f"unknown pool {pool!r}", hint=f"choose {', '.join(CELERY_POOLS)}")
        level = checked_loglevel(loglevel)  # before the broker is asked anything
        chosen = pool or settings.effective_worker_pool()
        slots = settings.worker_slots(concurrency, chosen)
        too_many = descriptors_for(chosen, slots)
        if too_many:
            raise ConfigError(too_many, hint="lower --concurrency (or WFQUEUE_WORKER_CONCURRENCY), or raise the "
                                             "open-file limit of the worker's service")
        # Where a worker without the shared disk keeps repositories: a file there (or a read-only folder) made it
        # start "ready", then fail every such task.
        if settings.shared_disk is not True:  # a worker told it shares the disk never copies a repository there
            check_writable(cache_dir(settings),
                           hint="point WFQUEUE_WORKER_CACHE_DIR at a folder this worker may write")
        refuse_wrong_credentials(settings)
        overlap = redelivery_overlap(settings.visibility_timeout_s, settings.agent_time_limit_s)
        if overlap:
            print(overlap, file=sys.stderr)
        argv = [sys.executable, *WORKER_MODULE, "--queues", queues, "--loglevel", level,
                "--pool", chosen, "--concurrency", str(slots)]
        if hostname:
            argv += ["--hostname", hostname]
        before_exec()
        os.execv(sys.executable, argv)  # the worker replaces this process: signals reach Celery directly
