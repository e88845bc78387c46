"""Helper processes that end with the command that started them, however it ends.

A plan command and `wfqueue up` start their worker node, beat and Flower in sessions of their own, so that
Ctrl-C in the terminal reaches the command alone and it stops them in order. When the command is killed
outright (SIGKILL, the out-of-memory killer), nothing stops them: they ran on, held the repository's Redis,
and a later command found them in its way. On Linux the kernel can send a process a signal when its parent
dies (``PR_SET_PDEATHSIG``); the child asks for it itself, when the parent named itself in the child's
environment (``for_child``). A worker started by hand (``python -m workers.serve`` under a shell or a
service manager) is nobody's helper and asks for nothing. Elsewhere than Linux this does nothing.

Only the standard library: a standby worker calls ``hold`` before it loads anything.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

PARENT_VARIABLE = "_WFQUEUE_PARENT_PID"  # not WFQUEUE_*: not a setting
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def for_child() -> dict[str, str]:
    """The environment entry that makes a child started now by this process hold its lifeline to it. The kernel
    signals when the *thread* that started the child ends: start helpers from one that lives as long as they
    should (a command's main thread)."""
    return {PARENT_VARIABLE: str(os.getpid())}


def hold(on_parent_death: signal.Signals = signal.SIGTERM) -> None:
    """If this process was started as a helper (``for_child``), receive ``on_parent_death`` when its parent
    dies; exit at once if it died already. The variable is removed, so what this process starts in turn
    (pool children, coding agents) does not inherit it."""
    named = os.environ.pop(PARENT_VARIABLE, None)
    if not named or not sys.platform.startswith("linux"):
        return
    import ctypes  # here: only a helper on Linux pays for it (3 ms)

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(on_parent_death), 0, 0, 0) != 0:
        return  # refused (a sandbox): the command still stops its helpers when it can
    if str(os.getppid()) != named:  # the parent died before the request: no signal will come
        os.kill(os.getpid(), on_parent_death)


@functools.cache  # one ctypes lookup per process, not one per command started
def dies_with_parent(on_parent_death: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for a command we run (a coding agent, a test command, the embedded redis-server), or None
    (not Linux): in the child, before it starts, it asks for ``on_parent_death`` when the thread that started it
    ends, so a worker or command killed outright leaves no agent editing a worktree, no test run going on beside
    the next one and no Redis running for nobody. Where it is refused, the caller still stops the command's
    process group on every path it survives.

    The call is resolved here, in the parent: the child of a process with threads must not import anything."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def request() -> None:
        prctl(PR_SET_PDEATHSIG, int(on_parent_death), 0, 0, 0)

    return request
