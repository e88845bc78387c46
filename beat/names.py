"""Stable names of the maintenance tasks, the queue they run on, and beat's Redis keys.

Kept apart from the task code so the scheduler (beat.app, beat.schedule) can
send by name without importing what the workers run. A rename is a breaking
change for workers already deployed.
"""

from __future__ import annotations

# Re-exported (``X as X``): beat's modules and tests read the task names from here.
from wfqueue.task_names import BEAT_ARCHIVE as BEAT_ARCHIVE
from wfqueue.task_names import BEAT_LOCKS as BEAT_LOCKS
from wfqueue.task_names import BEAT_PURGE as BEAT_PURGE
from wfqueue.task_names import BEAT_WATCHDOG as BEAT_WATCHDOG
from wfqueue.task_names import QUEUE_CONTROL

ALL_BEAT_TASKS = (BEAT_WATCHDOG, BEAT_PURGE, BEAT_LOCKS, BEAT_ARCHIVE)

# Maintenance is light and must never wait behind planning agents.
BEAT_QUEUE = QUEUE_CONTROL

BEAT_LOCK_KEY = "wfq:beat:lock"  # the single-scheduler lock
REPOS_KEY = "wfq:beat:repos"  # hash repo -> last time a session meta named it
GUARD_PREFIX = "wfq:beat:guard:"  # SET NX EX guards of actions on files and whole sessions

# Per-session keys (under ``wfq:{session_id}:``, so they expire and are purged with the session).
WATCHDOG_PROGRESS = "watchdog:progress"  # {"fingerprint", "since"}: when the agent records last changed
WATCHDOG_REENQUEUED = "watchdog:reenqueued_at"  # float; also the guard of the one re-enqueue
WATCHDOG_FINALIZED = "watchdog:finalized_at"  # float; also the guard of the finalisation
WATCHDOG_REPORTED = "watchdog:reported"  # guard: a stalled session of another kind is logged once per deadline
# Read by the collab coordinator (wfqueue/collab/coordinator.py) to stop waiting for a chord that will not fire.
WATCHDOG_FINALIZED_ISO = "watchdog_finalized"
