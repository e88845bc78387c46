"""Which signals a command takes over to stop the way Ctrl-C stops it (`wfqueue.cli.main`, `wfqueue up`), and
what each stop exits with. Standard library only: the entry point takes them over before it loads anything."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from types import FrameType

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


_received: list[signal.Signals] = []  # the stop signal that ended the load, should an exception hide it


def raise_terminated(signum: int, _frame: FrameType | None) -> None:
    """A handler for the stop signals while the command line loads: the load unwinds like a Ctrl-C."""
    _received[:] = [signal.Signals(signum)]
    raise Terminated(signal.Signals(signum))


def raise_interrupted(_signum: int, _frame: FrameType | None) -> None:
    """Ctrl-C's handler while the command line loads: Python's own, and remembered."""
    _received[:] = [signal.SIGINT]
    raise KeyboardInterrupt


def received_stop() -> KeyboardInterrupt | None:
    """The stop a signal raised while the command line loaded (None: none came). An exception can carry it
    hidden: pydantic-core reports a KeyboardInterrupt raised while it builds a model's serializer as its own
    SchemaError, which ended a Ctrl-C'd command in a traceback and exit 1."""
    if not _received:
        return None
    return Terminated(_received[0]) if _received[0] in STOP_SIGNALS else KeyboardInterrupt()
