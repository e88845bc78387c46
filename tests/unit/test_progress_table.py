"""The live table a command draws while its agents run (a terminal's): what each agent is doing now."""

from __future__ import annotations

import time

from rich.console import Console

from wfqueue.cli.progress import TerminalUI


def test_a_queued_retry_shows_no_worker_nor_growing_time_but_when_it_is_tried_again() -> None:
    """A retried agent's record still holds its last run's worker and start: the table showed a worker on it and a
    time growing for the whole wait."""
    now = time.time()
    agents = {"api": {"state": "running", "worker": "w1@a", "started_at": now - 5, "attempts": 1},
              "auth": {"state": "queued", "worker": "w2@b", "started_at": now - 300, "attempts": 2,
                       "error": "retrying: 429 rate limited; tried again in 60s"}}
    console = Console(width=200, record=True)
    console.print(TerminalUI()._table(agents))
    rows = {line.split("│")[1].strip(): line for line in console.export_text().splitlines() if line.count("│") > 3}
    assert "w1@a" in rows["api"] and "5." in rows["api"]
    assert "w2@b" not in rows["auth"] and "300" not in rows["auth"] and "tried again in 60s" in rows["auth"]
