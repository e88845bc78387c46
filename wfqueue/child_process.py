"""The command's child processes: stopping one with its process group, and reading what it logged.

Redis, worker nodes and executor programs each run in a session of their own, so a signal to the group reaches
their children too (a prefork pool's processes, a test run's subprocesses).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

STOP_GRACE_S = 5.0  # seconds a child gets to stop after the first signal, before SIGKILL
READY_POLL_S = 0.01  # seconds between looks at a starting child: a Redis ping, a worker log read for its ready line


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


def log_tail(path: Path, lines: int = 15, since: int = 0) -> str:
    """The last ``lines`` lines of ``path``, counting only what was written after byte ``since``."""
    try:
        with path.open("rb") as file:
            file.seek(since)
            text = file.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def read_from(path: Path, since: int) -> bytes:
    """What ``path`` holds after byte ``since`` (nothing if it cannot be read)."""
    try:
        with path.open("rb") as file:
            file.seek(since)
            return file.read()
    except OSError:
        return b""


def file_size(path: Path) -> int:
    """``path``'s size in bytes, 0 if it is not there."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
