"""Helpers for integration tests: the real CLI in a subprocess, real Redis, real worker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from wfqueue.child_process import stop_process_group
from wfqueue.embedded import EmbeddedRedis

T = TypeVar("T")


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict:
        return json.loads(self.stdout)


def wait_until(predicate: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy and return that; fail naming ``what`` if it
    never does. The timeout only bounds a broken run: a passing test waits for its condition, not a clock."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(interval_s)


# The offline planner sizes a plan by what the requirement names: this one names a file in each of the sample
# repository's four packages, so a 4-agent collab-plan gets the areas api, auth, notes-api and storage.
FOUR_AREAS = ("Add per-user rate limiting to the API: notes_api/api/handlers.py, notes_api/auth/users.py, "
              "notes_api/storage/cache.py and notes_api/server.py")


def wfqueue_env(shared_disk: bool = True, **extra: str) -> dict[str, str]:
    """This environment without any wfqueue setting, plus ``extra``. The workers tests start run on this machine
    and read the repository in place (WFQUEUE_SHARED_DISK=true, which embedded mode assumes anyway); the tests
    of workers without the coordinator's disk pass ``shared_disk=False``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    if shared_disk:
        env["WFQUEUE_SHARED_DISK"] = "true"
    env.update(extra)
    return env


@dataclass
class Cluster:
    """A Redis and one ``wfqueue worker`` shared by a module's plans; ``env`` points a CLI at them."""

    env: dict[str, str]
    log: Path

    def worker_log(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def run(self, *args: str, timeout: float = 180) -> CliRun:
        """The real CLI in a subprocess, pointed at this cluster."""
        return run_cli(*args, env=self.env, timeout=timeout)


@contextlib.contextmanager
def shared_cluster(root: Path, name: str, concurrency: int, **env: str) -> Iterator[Cluster]:
    """An embedded Redis and one worker process (its own process group), started once for a module whose plans
    do not need a cluster of their own: an embedded plan starts and stops both every time. A session id is
    unique per repository only; a new session resets whatever an earlier one of the same id left in Redis."""
    redis = EmbeddedRedis(root / "broker")
    redis.start()
    cluster = Cluster(wfqueue_env(WFQUEUE_BROKER_URL=redis.url, **env), root / "worker.log")
    try:
        with cluster.log.open("wb") as out:
            worker = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "worker", "--concurrency",
                                       str(concurrency), "--hostname", f"{name}@%h", "--loglevel", "WARNING"],
                                      env=cluster.env, stdout=out, stderr=out, start_new_session=True)
        try:
            yield cluster
        finally:
            stop_process_group(worker)
    finally:
        redis.stop()


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 180,
            entry: str = "wfqueue.cli.main") -> CliRun:
    """The CLI in a subprocess. ``entry="wfqueue"`` runs the installed command's entry point, which starts a
    standby worker (wfqueue.prestart); the default runs the command line alone."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", entry, *args], env=env or wfqueue_env(),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return CliRun(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


@contextlib.contextmanager
def cli_process(*args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """The CLI started in a subprocess (no terminal on stdin, output piped) for a test that acts while it runs;
    killed and reaped if it still runs when the block ends (a failed wait must not leave it behind)."""
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", *args], env=env or wfqueue_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def run_cli_in_process(capture: pytest.CaptureFixture[str], patch: pytest.MonkeyPatch, *args: str,
                       env: dict[str, str] | None = None) -> CliRun:
    """The CLI's entry point, ``wfqueue.cli.main.main(args)``, in this process with ``env`` (WFQUEUE_*,
    ANTHROPIC_*) set: for inputs refused before any broker or worker is needed, where a CLI process would
    spend one to two seconds of CPU starting up. An exception escaping ``main`` is reported as the
    traceback a user would see (exit 1)."""
    from wfqueue.cli.main import main

    capture.readouterr()
    started = time.monotonic()
    escaped = ""
    with patch.context() as scoped:
        for name, value in (env or {}).items():
            scoped.setenv(name, value)
        try:
            code = main(list(args))
        except BaseException:  # noqa: BLE001 - what a user would see as a traceback
            code, escaped = 1, traceback.format_exc()
    captured = capture.readouterr()
    return CliRun(code, captured.out, captured.err + escaped, time.monotonic() - started)


class QuietUI:
    """A reporter (wfqueue.runtime.Reporter) that shows nothing."""

    def info(self, message: str) -> None: ...


def parent_of(pid: int) -> int:
    """The parent of a live process ``pid`` (a task's subprocess: its worker's pool process)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def kill_processes_mentioning(marker: str) -> None:
    """SIGKILL what :func:`processes_mentioning` lists: a node whose command was killed is ending by itself
    meanwhile (its lifeline), so one gone before its kill is no failure."""
    for line in processes_mentioning(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


def processes_mentioning(marker: str) -> list[str]:
    """Live processes whose command line mentions ``marker`` (e.g. a queue dir) or that run inside it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        # redis-server rewrites its command line, but it runs inside its data directory
        if (marker in cmdline or cwd.startswith(marker)) and state != "Z":
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def write_script(path: Path, **script: object) -> str:
    path.write_text(json.dumps(script), encoding="utf-8")
    return f"scripted:{path}"


def session_dir(result: CliRun) -> Path:
    return Path(result.json()["session_dir"])
