"""A local Celery worker node: started as a process (or from the command's standby), waited for, stopped."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from wfqueue import prestart
from wfqueue.child_process import READY_POLL_S, STOP_GRACE_S, file_size, log_tail, read_from, stop_process_group
from wfqueue.config_file import settings_file_for_workers
from wfqueue.errors import WorkerStartError
from wfqueue.lifeline import for_child
from wfqueue.settings import WorkerPool
from wfqueue.task_names import ALL_QUEUES

if TYPE_CHECKING:
    from celery import Celery

READY_PING_EVERY_S = 2.0  # seconds between the fallback pings of a starting node (its log line is the signal)


class LocalWorkers:
    """One Celery worker node with ``concurrency`` slots: processes (prefork) or threads."""

    def __init__(self, broker_url: str, concurrency: int, log_dir: Path, env: dict[str, str] | None = None,
                 start_timeout_s: float = 60.0, pool: WorkerPool = "prefork", use_standby: bool = False,
                 queues: tuple[str, ...] = ALL_QUEUES, name: str = "worker") -> None:
        self.broker_url = broker_url
        self.use_standby = use_standby  # Settings.prestart_worker
        self.concurrency = concurrency
        self.pool = pool
        self.log_dir = log_dir
        self.extra_env = env or {}
        self.start_timeout_s = start_timeout_s
        self.queues = queues
        self.name = name  # of its log files: {name}.log, {name}.stderr
        prefix = "wfq" if name == "worker" else f"wfq-{name.removeprefix('worker-')}"
        self.hostname = f"{prefix}-{secrets.token_hex(3)}@{os.uname().nodename}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0  # the log is appended to: an error quotes only what this start wrote
        self._started_at = 0.0  # start_timeout_s counts from here, however late the wait begins
        self._alias_dir: str | None = None  # see _celery_logfile

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    @property
    def stderr_path(self) -> Path:
        """What the worker writes before its log is set up: a bad option, an import error."""
        return self.log_dir / f"{self.name}.stderr"

    def options(self) -> list[str]:
        """``workers.serve``'s options for this node."""
        return ["--queues", ",".join(self.queues), "--concurrency", str(self.concurrency), "--pool", self.pool,
                "--hostname", self.hostname, "--loglevel", "INFO", "--logfile", self._celery_logfile()]

    def _celery_logfile(self) -> str:
        """The log's path as Celery is told it. Celery expands %n, %h, %i... in that name and has no escape
        for a literal %: a repository path holding one is reached through a link in a private folder."""
        if "%" not in str(self.log_path):
            return str(self.log_path)
        if self._alias_dir is None:
            self._alias_dir = tempfile.mkdtemp(prefix="wfq-")
            os.symlink(self.log_path, Path(self._alias_dir) / self.log_path.name)
        return str(Path(self._alias_dir) / self.log_path.name)

    def command(self) -> list[str]:
        return [sys.executable, *prestart.WORKER_MODULE, *self.options()]

    def start(self) -> None:
        """Start the node: the command's standby worker (wfqueue.prestart) if it has one, else a new process."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **settings_file_for_workers(), **self.extra_env, "WFQUEUE_BROKER_URL": self.broker_url}
        self._log_start = file_size(self.log_path)
        self._started_at = time.monotonic()
        standby = prestart.take() if self.use_standby else None
        if standby is not None:
            orders = prestart.StandbyOrders(argv=self.options(), env=env, stderr_path=str(self.stderr_path))
            try:
                prestart.give_orders(standby, orders)
            except OSError:  # it died since it was taken: start one the usual way
                stop_process_group(standby, signal.SIGKILL)
            else:
                self.proc = standby
                return
        with self.stderr_path.open("wb") as stderr:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.command(), env={**env, **for_child()}, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)

    def start_output(self) -> str:
        """The last lines the worker wrote to stderr and to its log, for an error that says why it failed."""
        parts = [text for text in (log_tail(self.stderr_path), log_tail(self.log_path, since=self._log_start))
                 if text.strip() and text != "(no log)"]
        return "\n".join(parts) if parts else "(the worker wrote nothing)"

    def wait_ready(self, app: Celery) -> None:
        """Block until the worker is consuming: its log says ``{hostname} ready.`` (written once the pool
        is up and the queues are consumed), read every 10 ms; a ping now and then in case the log is not
        where we expect it. A ping round trip costs up to its timeout, the log line nothing."""
        assert self.proc is not None
        deadline = self._started_at + self.start_timeout_s
        ready_line = f"{self.hostname} ready.".encode()
        next_ping = time.monotonic() + READY_PING_EVERY_S
        while True:  # looked at once at least: the wait may begin after the deadline, the node long ready
            if self.proc.poll() is not None:
                raise WorkerStartError(f"the worker exited at start (code {self.proc.returncode}):\n"
                                       f"{self.start_output()}", hint=f"see {self.stderr_path} and {self.log_path}")
            if ready_line in read_from(self.log_path, self._log_start):
                return
            if time.monotonic() >= deadline:
                break
            if time.monotonic() >= next_ping:
                if app.control.ping(destination=[self.hostname], timeout=0.2):
                    return
                next_ping = time.monotonic() + READY_PING_EVERY_S
            time.sleep(READY_POLL_S)
        raise WorkerStartError(f"the worker did not answer within {self.start_timeout_s:g}s "
                               f"(WFQUEUE_EMBEDDED_START_TIMEOUT_S):\n{self.start_output()}",
                               hint=f"see {self.stderr_path} and {self.log_path}")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        if self.proc is not None:
            # SIGTERM to the node alone is Celery's warm shutdown: it takes nothing more, and a running task gets
            # the grace period to finish (then it is killed, and delivered again later). Sent to the group, it
            # reached the prefork pool's processes too, and every running agent died at once, its work lost.
            stop_process_group(self.proc, signal.SIGTERM, grace_s, leader_only=True)
            self.proc = None
        if self._alias_dir is not None:
            shutil.rmtree(self._alias_dir, ignore_errors=True)
            self._alias_dir = None
