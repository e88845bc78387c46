"""A stop signal that lands inside a finalizer still stops the command at its next wait."""

from __future__ import annotations

import os
import signal
import time

import pytest

from wfqueue.cli.main import sigterm_unwinds
from wfqueue.cli.stop_signals import Terminated
from wfqueue.errors import InfrastructureError
from wfqueue.runtime import wait_for
from wfqueue.settings import Settings


class UnsubscribesWhenCollected:
    """As Celery's AsyncResult, whose ``__del__`` unsubscribes from its result channel over the network: the
    signal arrives while it runs."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        # The handler runs here, inside the finalizer: its Terminated ends this loop as soon as it is raised.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the "Exception ignored in"
def test_a_sigterm_a_finalizer_swallowed_ends_the_next_wait() -> None:
    """A plan command sent SIGTERM while an AsyncResult was collected printed "Exception ignored in ... __del__"
    and went on waiting for its agents (a minute in the test that caught it, as long as they ran for a user)."""
    settings = Settings(poll_interval_s=0.05)
    with sigterm_unwinds() as seen:
        UnsubscribesWhenCollected()  # collected at once: Python drops the Terminated raised in __del__
        started = time.monotonic()
        with pytest.raises(Terminated):
            wait_for(None, "the plan", settings, settled=lambda: None, deadline=time.monotonic() + 3)
        assert time.monotonic() - started < 1 and seen.received == signal.SIGTERM
        # Once raised, it is not raised again: the command's own unwinding may wait on other things.
        with pytest.raises(InfrastructureError, match="did not finish"):
            wait_for(None, "the plan", settings, settled=lambda: None, deadline=time.monotonic() + 0.2)
