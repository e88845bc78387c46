"""`wfqueue up`: embedded Redis, workers, beat and Flower in the foreground until Ctrl-C."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape

from wfqueue.beat_schedule_file import schedule_folder
from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.child_process import stop_process_group
from wfqueue.cli.beat_cmd import beat_argv
from wfqueue.cli.flower_cmd import flower_auth, flower_command, refuse_unusable_listen
from wfqueue.cli.stop_signals import to_handle
from wfqueue.embedded import EmbeddedCluster
from wfqueue.errors import ConfigError, WorkerStartError
from wfqueue.lifeline import for_child
from wfqueue.node_keeper import NodeKeeper, exit_described
from wfqueue.sessions import queue_dir, resolve_repo
from wfqueue.settings import load_settings
from wfqueue.settings_checks import MAX_SLOTS, descriptors_for, mask_url, redelivery_overlap
from wfqueue.up_cluster import UP_FILE, UpCluster, UpWorkerSettings, announced, running_up

# Threads of the control queue's own node: chord callbacks of the plans up runs, and beat's maintenance, which
# must run while agents fill every slot of the main node (the watchdog exists for that case).
CONTROL_SLOTS = 2


FLOWER_START_TIMEOUT_S = 30.0  # from its start to answering its health check
FLOWER_POLL_S = 0.1


def wait_for_flower(flower: subprocess.Popen[bytes], address: str, port: int, log: Path,
                    stop: threading.Event) -> None:
    """Until Flower answers its health check, so that the banner after it is true; its exit (a port in use) or
    its silence is an error naming its log. Ctrl-C (``stop``) ends the wait at once."""
    host = "127.0.0.1" if address in ("", "0.0.0.0") else address  # listening everywhere: ask here
    url = f"http://{host}:{port}/healthcheck"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an http_proxy
    deadline = time.monotonic() + FLOWER_START_TIMEOUT_S
    while time.monotonic() < deadline and not stop.is_set():
        if flower.poll() is not None:
            raise WorkerStartError(f"Flower exited at start (code {flower.returncode})",
                                   hint=f"see {log}; another program may listen on port {port} (--flower-port)")
        try:
            with direct.open(url, timeout=1) as answer:
                # Its own Flower's answer: another up's, started in the same moment on the same port, answered
                # first while this one's failed to bind, and the banner named the other's.
                if answer.status == 200 and listens_on(flower.pid, port):
                    return
        except OSError:  # not listening yet
            pass
        except http.client.HTTPException as exc:  # something other than Flower answers there
            raise WorkerStartError(f"the program on port {port} does not answer as Flower ({type(exc).__name__})",
                                   hint=f"give Flower another port (--flower-port); see {log}") from None
        stop.wait(FLOWER_POLL_S)
    if stop.is_set():
        return  # up's loop sees the stop and unwinds
    raise WorkerStartError(f"Flower did not answer on {url} within {FLOWER_START_TIMEOUT_S:.0f}s", hint=f"see {log}")


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (Linux's /proc; True where it cannot be
    read: the health check decides alone there)."""
    try:
        listening = {fields[9] for table in ("/proc/net/tcp", "/proc/net/tcp6")
                     for fields in (line.split() for line in Path(table).read_text().splitlines()[1:])
                     if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port}  # 0A: LISTEN
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except (OSError, ValueError, IndexError):
        return True
    held = set()
    for fd in fds:
        with contextlib.suppress(OSError):  # closed since it was listed
            held.add(os.readlink(fd))
    return any(f"socket:[{inode}]" in held for inode in listening)


def watch(cluster: EmbeddedCluster, keepers: list[NodeKeeper], children: dict[str, subprocess.Popen[bytes]],
          queue: Path) -> None:
    """One look at everything up runs: a dead worker node is replaced; a dead Redis, beat or Flower ends up."""
    redis_exit = cluster.redis.proc.poll() if cluster.redis.proc is not None else None
    if redis_exit is not None:
        raise WorkerStartError(f"the embedded Redis exited ({exit_described(redis_exit)})",
                               hint=f"see {queue / 'redis' / 'redis.log'}; run `wfqueue up` again: what was queued "
                                    "is kept in its append-only file")
    for keeper in keepers:
        keeper.check()
    for name, child in children.items():
        if child.poll() is not None:
            raise WorkerStartError(f"{name} exited ({exit_described(child.returncode)})",
                                   hint=f"see {queue / 'beat-flower.log'}")


class Reporter:
    """What the node keeper reports, on up's console."""

    def __init__(self, out: Console) -> None:
        self.out = out

    def info(self, message: str) -> None:
        self.out.print(message, markup=False)


def register(app: typer.Typer) -> None:
    @app.command("up")
    def up(
        repo: str = typer.Option(None, "--repo", help="Repository whose .workflow/.queue holds the broker's data."),
        workers: int = typer.Option(
            None, "--workers", min=1, max=MAX_SLOTS,
            help="Worker pool slots (default: one process per CPU, or 100 threads when the provider is remote)."),
        port: int | None = typer.Option(None, "--flower-port", min=1, max=65535,
                                        help="Flower's port (default: WFQUEUE_FLOWER_PORT)."),
    ) -> None:
        """Run everything on this machine: Redis, workers, beat, Flower. Ctrl-C stops it all."""
        settings = load_settings()
        if not settings.embedded:
            raise ConfigError("`wfqueue up` runs its own embedded broker, but WFQUEUE_BROKER_URL is set",
                              hint="unset it, or start `wfqueue worker`, `wfqueue beat` and `wfqueue flower` instead")
        root = resolve_repo(repo)
        flower_auth(settings)  # refused before a Redis is started for nothing
        schedule_folder(settings.beat_schedule_file)  # beat's, likewise
        # Refuses a repository that brings its own runtime files (wfqueue.planted), before anything is written there.
        running = running_up(root)
        if running is not None:
            raise WorkerStartError(f"{running.named()} already runs (broker {mask_url(running.broker_url)})",
                                   hint="plan commands there use it as it is; to start it again, stop it first "
                                        "(Ctrl-C in its terminal)")
        if port is None:
            port = settings.flower_port
        if port == settings.embedded_redis_port:  # free now, both would take it: Flower's start then failed oddly
            raise ConfigError(f"Flower's port {port} is also the embedded Redis's (WFQUEUE_EMBEDDED_REDIS_PORT)",
                              hint="give Flower another port (--flower-port or WFQUEUE_FLOWER_PORT), or Redis another")
        refuse_unusable_listen(settings.flower_address, port, option="--flower-port")
        too_many = descriptors_for(settings.effective_worker_pool(), settings.worker_slots(workers))
        if too_many:
            raise ConfigError(too_many, hint="lower --workers (or WFQUEUE_WORKER_CONCURRENCY)")
        out = Console(highlight=False, soft_wrap=True)
        overlap = redelivery_overlap(settings.visibility_timeout_s, settings.agent_time_limit_s)
        if overlap:
            Console(stderr=True, highlight=False, soft_wrap=True).print(overlap, markup=False)
        stop = threading.Event()
        for sig in to_handle((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):  # SIGHUP: its terminal was closed
            signal.signal(sig, lambda *_: stop.set())
        with EmbeddedCluster(queue_dir(root), concurrency=settings.worker_slots(workers),
                             redis_port=settings.embedded_redis_port, start_timeout_s=settings.embedded_start_timeout_s,
                             pool=settings.effective_worker_pool(), control_slots=CONTROL_SLOTS,
                             for_up=True) as cluster:
            url = cluster.start_redis()
            live = settings.model_copy(update={"broker_url": SecretStr(url)})
            flower_argv, flower_env = flower_command(live, port, settings.flower_address)
            celery_app = create_app(live)
            try:
                cluster.start_workers(celery_app)
            finally:
                release_result_subscriptions(celery_app)
            keepers = [NodeKeeper(cluster, celery_app, Reporter(out), control=control) for control in (False, True)]
            env = {**os.environ, "WFQUEUE_BROKER_URL": url, **for_child()}  # they end with up, even if it is killed
            log = open(queue_dir(root) / "beat-flower.log", "ab")  # noqa: SIM115 - closed below
            children = {
                "beat": subprocess.Popen(beat_argv(live, "INFO"), env=env, stdout=log, stderr=log,
                                         start_new_session=True),
                "Flower": subprocess.Popen(flower_argv, env={**flower_env, "WFQUEUE_BROKER_URL": url, **for_child()},
                                           stdout=log, stderr=log, start_new_session=True),
            }
            try:
                wait_for_flower(children["Flower"], settings.flower_address, port,
                                queue_dir(root) / "beat-flower.log", stop)
                # Plan commands in this repository find it there and use this cluster (wfqueue.up_cluster).
                on_workers = UpWorkerSettings(executor_command=settings.executor_command,
                                              anthropic_key=settings.has_anthropic_credentials())
                if not stop.is_set():  # Ctrl-C while Flower started: no banner, straight to the stop
                    with announced(root, UpCluster(pid=os.getpid(), broker_url=url, workers=cluster.concurrency,
                                                   worker_settings=on_workers)):
                        out.print(escape(f"broker:  {mask_url(url)} (plan commands in {root} use it; elsewhere, "
                                         "export WFQUEUE_BROKER_URL with WFQUEUE_SHARED_DISK=true)"))
                        if cluster.redis.password:
                            out.print(escape(f"tcp:     {mask_url(cluster.redis.tcp_url('127.0.0.1'))} (its "
                                             f"password: broker_url in {queue_dir(root) / UP_FILE}, readable by "
                                             "you only)"))
                        out.print(f"flower:  http://{settings.flower_address}:{port}/")
                        out.print(escape(f"logs:    {queue_dir(root)}"))
                        out.print("Ctrl-C stops Redis, the workers, beat and Flower.")
                        while not stop.wait(0.5):
                            try:
                                watch(cluster, keepers, children, queue_dir(root))
                            except WorkerStartError:
                                if cluster.redis.proc is None or cluster.redis.proc.poll() is not None:
                                    # Its Redis is gone: no warm shutdown that would only keep the repository's
                                    # lock (and plan commands out) for seconds more. Else the warm stop below
                                    # lets Redis write what the agents saved last.
                                    cluster.kill()
                                raise
            finally:
                for child in children.values():
                    stop_process_group(child)
                log.close()
        with contextlib.suppress(OSError):  # after a hangup (its terminal closed) there is no terminal to tell
            out.print("stopped")
