"""Which signals a command takes over to stop the way Ctrl-C stops it (`wfqueue.cli.main`, `wfqueue up`)."""

from __future__ import annotations

import signal
from collections.abc import Iterable


def to_handle(signals: Iterable[signal.Signals]) -> list[signal.Signals]:
    """``signals`` less SIGHUP when it is ignored on purpose: under `nohup` the command is meant to outlive its
    terminal, so a hangup must not stop it."""
    return [sig for sig in signals if sig != signal.SIGHUP or signal.getsignal(sig) is not signal.SIG_IGN]
