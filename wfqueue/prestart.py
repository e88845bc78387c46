"""A standby worker: the embedded worker's interpreter loads while the command is still loading its own code.

In embedded mode a plan command first spends about 0.7 s importing itself, then starts Redis and a worker
node. The node's interpreter needs another 0.5 s to load, or 1.2 s with the Anthropic SDK (2 cores,
docs/BENCHMARKS.md), before it consumes, and all of that used to be waited for in turn.

The ``wfqueue`` entry point (wfqueue.cli.entry) calls ``begin`` before anything heavy is imported. When the
command line names a command that may start an embedded cluster, ``begin`` starts ``python -P -m
workers.serve --standby``. That process loads the worker's modules (workers.preload) on another core, then
waits for its orders on stdin. ``LocalWorkers.start`` takes it (``take``) and sends the orders it would
otherwise have started a worker with: options, environment and the path for stderr. Nothing about the node
(pool, slots, environment) is decided before the command has read its settings.

A command that starts no cluster (a broker URL, a running `wfqueue up`, ``--help``, the setting
``prestart_worker`` false) gets no standby when its command line, environment and files say so. When the
guess was wrong, the standby is killed by pid as soon as the command's runtime starts no cluster of its own
(wfqueue.runtime.broker_runtime), or when the command exits (bad input, say): it holds nothing worth a wait.
If the command is killed outright before it gave its orders, the pipe closes and the standby leaves on its
own; once it has its orders it is the command's worker node, stopped like any other.

Only the standard library is imported here: this module runs before the command's own imports.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from wfqueue.config_file import config_file
from wfqueue.lifeline import for_child
from wfqueue.pids import process_exists

STANDBY_FLAG = "--standby"
# How every worker node is started. -P: without the current folder on sys.path, where a repository's own
# ``workers`` package (a common name) would be imported instead of wfqueue's.
WORKER_MODULE = ("-P", "-m", "workers.serve")
# Commands that may start an embedded cluster (wfqueue.runtime.broker_runtime); tests/unit/test_prestart.py
# checks that each is a command of the CLI.
COMMANDS = frozenset({"collab-plan", "lite-plan", "plan", "execute", "resume"})
HELP_FLAGS = frozenset({"--help"})
FALSE_WORDS = frozenset({"0", "false", "f", "no", "n", "off"})  # what pydantic reads as False
# Where a running `wfqueue up` announces itself in a repository (wfqueue.up_cluster; a test keeps them equal).
UP_ANNOUNCEMENT = Path(".workflow") / ".queue" / "up.json"


class StandbyOrders:
    """What a standby worker becomes: ``python -m workers.serve ARGV`` with ``env``, stderr into a file.

    A plain class, not a dataclass: importing dataclasses would delay the standby's start by 8 ms."""

    __slots__ = ("argv", "env", "stderr_path")

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: str) -> None:
        self.argv, self.env, self.stderr_path = argv, env, stderr_path

    def _fields(self) -> tuple[list[str], dict[str, str], str]:
        return self.argv, self.env, self.stderr_path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StandbyOrders) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable fields, as a dataclass with eq has none

    def __repr__(self) -> str:
        return f"StandbyOrders(argv={self.argv!r}, env=<{len(self.env)} variables>, stderr_path={self.stderr_path!r})"

    def encode(self) -> bytes:
        return (json.dumps({"argv": self.argv, "env": self.env, "stderr_path": self.stderr_path}) + "\n").encode()

    @classmethod
    def decode(cls, line: bytes) -> StandbyOrders:
        data = json.loads(line)
        return cls(argv=[str(arg) for arg in data["argv"]], env={str(k): str(v) for k, v in data["env"].items()},
                   stderr_path=str(data["stderr_path"]))


def variable(environ: Mapping[str, str], name: str) -> str | None:
    """Environment variable ``name`` (upper case) matched without regard to case, as the settings match them."""
    value = environ.get(name)
    if value is None:
        value = next((found for key, found in environ.items() if key.upper() == name), None)
    return value


def early_setting(name: str, environ: Mapping[str, str]) -> str | None:
    """Setting ``name`` as wfqueue.settings would find it, environment first, then the TOML file, read with
    the standard library before the settings are built. A guess at most: the built settings still decide."""
    value = variable(environ, "WFQUEUE_" + name.upper())
    if value is not None:
        return value
    path = config_file(environ)
    if path is None:
        return None
    import tomllib  # only when there is a file to read: it costs a start without one 20 ms

    try:
        found = tomllib.loads(path.read_text(encoding="utf-8")).get(name)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # the settings will say what is wrong with it
    return None if found is None else str(found)


def wanted(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether a command line may start an embedded cluster, judged before the settings are read.

    A wrong guess costs only the standby's start on an otherwise idle core: a "yes" that starts no cluster
    ends the standby unused; a "no" starts the worker the usual way."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command not in COMMANDS or HELP_FLAGS.intersection(argv):
        return False
    if (early_setting("prestart_worker", environ) or "").strip().lower() in FALSE_WORDS:
        return False
    if (early_setting("broker_url", environ) or "").strip():  # no embedded cluster (blank means unset)
        return False
    return not up_announced(argv)  # its workers serve the plan: a standby would take a core from them


def up_announced(argv: Sequence[str], cwd: Path | None = None) -> bool:
    """Whether a live `wfqueue up` announces itself in the command's repository: ``--repo``, else the nearest
    folder from the cwd up to its git top level that holds ``.workflow``, else that top level, as the command
    finds it (sessions.project_of). Its file is trusted while its process lives (up_cluster.running_up also
    asks its Redis, too slow a question for here)."""
    repo = _repo_option(argv)
    if repo is not None:
        folders = [Path(repo)]
    else:
        here = Path.cwd() if cwd is None else cwd
        folders = [here, *here.parents]
    for folder in folders:
        try:
            pid = int(json.loads((folder / UP_ANNOUNCEMENT).read_text(encoding="utf-8"))["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            if repo is None and ((folder / UP_ANNOUNCEMENT.parts[0]).is_dir() or (folder / ".git").exists()):
                return False  # the command's repository, and no `wfqueue up` there
            continue
        return process_exists(pid)
    return False


def _repo_option(argv: Sequence[str]) -> str | None:
    for index, arg in enumerate(argv):
        if arg == "--repo" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--repo="):
            return arg.split("=", 1)[1]
    return None


class _Standby:
    proc: subprocess.Popen[bytes] | None = None


_standby = _Standby()


def begin(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> None:
    """Start a standby worker if ``argv`` (the command line after the program name) may need one."""
    environ = os.environ if environ is None else environ
    try:
        if _standby.proc is not None or not wanted(argv, environ):
            return
    except Exception:  # noqa: BLE001 - a guess that fails (a deleted current folder, say) is a "no":
        return  # the command itself then says what is wrong, as it would without a standby
    try:
        _standby.proc = subprocess.Popen(
            [sys.executable, *WORKER_MODULE, STANDBY_FLAG], stdin=subprocess.PIPE, env={**os.environ, **for_child()},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return  # the worker is started the usual way
    atexit.register(discard)


def take() -> subprocess.Popen[bytes] | None:
    """The standby worker, still waiting for its orders, or None. Taken once: the caller now owns it."""
    proc, _standby.proc = _standby.proc, None
    if proc is not None and proc.poll() is not None:
        if proc.stdin is not None:
            proc.stdin.close()
        return None  # it failed to load; the caller starts a worker the usual way and sees why
    return proc


def give_orders(proc: subprocess.Popen[bytes], orders: StandbyOrders) -> None:
    """Make a taken standby the worker ``orders`` describe. Raises OSError if it is gone."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(orders.encode())
        proc.stdin.flush()
    finally:
        proc.stdin.close()


def discard() -> None:
    """Kill a standby nobody took (its process group: it has no children yet, but a pool's would go too)."""
    proc, _standby.proc = _standby.proc, None
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    if proc.stdin is not None:
        proc.stdin.close()
