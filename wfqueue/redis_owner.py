"""One embedded Redis per repository at a time, owned by the command that runs it.

The command that starts a repository's embedded Redis (a plan command, or `wfqueue up`) holds an exclusive
``flock`` on ``.workflow/.queue/redis/redis.lock`` until it has stopped that Redis. Two commands starting at
the same moment used to read the pid file, both find nothing, and start two servers on one socket and one
append-only file, which then broke each other. The kernel drops the lock when its holder dies, however it
dies, so a lock that can be taken means no live command owns the folder: a Redis still running there (its
pid file, its current directory this folder) was left by a command that was killed before it could stop
it, and is stopped before a new one starts.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

from wfqueue.errors import WorkerStartError
from wfqueue.pids import process_exists

LOCK_FILE = "redis.lock"
PID_FILE = "redis.pid"
ORPHAN_GRACE_S = 5.0  # a left-over Redis gets this long to write its append-only file after SIGTERM
ORPHAN_POLL_S = 0.05
PROBE_WAIT_S = 0.25  # how long a held lock is tried again before the folder counts as another command's


def _lock_soon(fd: int) -> None:
    """The exclusive lock, or BlockingIOError when a command holds it. Beat's log purge looks whether a
    repository is in use by taking a shared lock for an instant (``owned_now``): a moment later it is free."""
    deadline = time.monotonic() + PROBE_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(ORPHAN_POLL_S)


class RedisOwnership:
    """The lock on one embedded Redis folder, held from ``acquire`` to ``release``."""

    # What a command refused the folder does meanwhile (a plan: use `wfqueue up`; up itself: see ``for_up``).
    BUSY_HINT = ("wait for it to finish, or run `wfqueue up` in this repository so that several commands share one "
                 "Redis and its workers")
    BUSY_HINT_FOR_UP = ("if it is another `wfqueue up` (started at the same moment), plan commands there use it as "
                        "it is; to start this one, stop that first (Ctrl-C in its terminal); a plan: wait for it")

    def __init__(self, data_dir: Path, for_up: bool = False) -> None:
        self.data_dir = data_dir
        self.busy_hint = self.BUSY_HINT_FOR_UP if for_up else self.BUSY_HINT
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the folder, or raise WorkerStartError when another live command has it; stop a Redis a dead
        command left running there."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock_soon(fd)
        except BlockingIOError:
            os.close(fd)
            raise WorkerStartError(
                f"another wfqueue command runs the embedded Redis in {self.data_dir} (a plan, or `wfqueue up`)",
                hint=self.busy_hint) from None
        except OSError:  # a file system without locks (some network mounts): a running Redis is only refused
            os.close(fd)
            stop_left_over(self.data_dir, may_stop=False)
            return
        self._fd = fd
        try:
            stop_left_over(self.data_dir)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def owned_now(data_dir: Path) -> bool:
    """Whether a live command holds ``data_dir``'s lock: its Redis and workers run and write their logs. A
    shared lock is tried, and dropped at once; no lock file (or none to take) reads as not owned."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock taken here
    return False


def stop_left_over(data_dir: Path, may_stop: bool = True) -> None:
    """Stop the Redis a killed command left running in ``data_dir``, if its pid file names one. A pid that is
    not that Redis (another program's now) is left alone. One that cannot be told apart (no /proc), whose
    parent is still a wfqueue process (an older version's command, which takes no lock), or that the caller
    may not stop, is refused, so nothing is started beside it."""
    try:
        pid = int((data_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return
    if pid <= 0:
        return
    found = _redis_of(pid, data_dir)
    if found == "no":
        return
    if found == "unknown" or not may_stop or _parent_is_wfqueue(pid):
        raise WorkerStartError(f"an embedded Redis (pid {pid}) already runs on {data_dir}",
                               hint="wait for the other wfqueue command on this repository to finish, or stop "
                                    f"process {pid} if no command runs there")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while time.monotonic() < deadline and _redis_of(pid, data_dir) == "yes":
        time.sleep(ORPHAN_POLL_S)
    if _redis_of(pid, data_dir) == "yes":
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _parent_is_wfqueue(pid: int) -> bool:
    """Whether ``pid``'s parent is alive and runs wfqueue: then the Redis has an owner, not a dead one."""
    try:
        parent = int(_stat(pid)[1])
        args = (Path("/proc") / str(parent) / "cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return False
    # `wfqueue ...` (the entry point's script) or `python -m wfqueue[.cli.main] ...`
    return parent > 1 and any(a in (b"wfqueue", b"wfqueue.cli.main") or a.endswith(b"/wfqueue") for a in args)


def _redis_of(pid: int, data_dir: Path) -> str:
    """"yes" when ``pid`` is a running redis-server working in ``data_dir`` (Redis moves into its ``--dir``, and
    rewrites its command line, so the folder is read from its current directory), "no" when it is not,
    "unknown" without /proc (another system) for a pid that exists."""
    if not Path("/proc/self").is_dir():
        return "unknown" if process_exists(pid) else "no"
    proc = Path("/proc") / str(pid)
    try:
        state = _stat(pid)[0]
        program = (proc / "cmdline").read_bytes().split(b"\0", 1)[0]
        folder = Path(os.readlink(proc / "cwd"))
    except (OSError, IndexError):
        return "no"
    if state == "Z" or b"redis-server" not in program:
        return "no"
    return "yes" if folder == data_dir.resolve() else "no"


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, parent pid, ...): the name, in parentheses,
    may itself hold spaces and parentheses."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
