"""Which signals a command takes over to stop the way Ctrl-C stops it (`wfqueue.cli.main`, `wfqueue up`), and
what each stop exits with. Standard library only (wfqueue.stop_request is too): the entry point takes them over
before it loads anything."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from types import FrameType

from wfqueue import stop_request

INTERRUPTED_EXIT = 130  # Ctrl-C
# SIGTERM, SIGHUP: 128 + the signal, what a shell reports for a process the signal ended, and what it said.
STOP_SIGNALS = {signal.SIGTERM: (143, "terminated"), signal.SIGHUP: (129, "hung up")}


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a service manager, a container stop) or SIGHUP (the terminal closed), handled like
    Ctrl-C: the command unwinds, so an embedded Redis and its local workers are stopped on the way out, not
    orphaned. Carries its exit code and words for a stop before the command's own handling began
    (wfqueue.cli.entry)."""

    def __init__(self, signum: signal.Signals = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.exit_code, self.said = STOP_SIGNALS.get(signum, (INTERRUPTED_EXIT, "interrupted"))


def to_handle(signals: Iterable[signal.Signals]) -> list[signal.Signals]:
    """``signals`` less SIGHUP when it is ignored on purpose: under `nohup` the command is meant to outlive its
    terminal, so a hangup must not stop it."""
    return [sig for sig in signals if sig != signal.SIGHUP or signal.getsignal(sig) is not signal.SIG_IGN]


def raise_terminated(signum: int, _frame: FrameType | None) -> None:
    """SIGTERM's and SIGHUP's handler: the command unwinds like a Ctrl-C, the stop recorded (wfqueue.stop_request)
    should a finalizer swallow it or another error hide it."""
    stop = Terminated(signal.Signals(signum))
    stop_request.ask(stop)
    raise stop


def raise_interrupted(_signum: int, _frame: FrameType | None) -> None:
    """Ctrl-C's handler: Python's own, the stop recorded as ``raise_terminated`` records its own."""
    stop = KeyboardInterrupt()
    stop_request.ask(stop)
    raise stop
