"""Stable names of the maintenance tasks, the queue they run on, and beat's Redis keys.

Kept apart from the task code so the scheduler (beat.app, beat.schedule) can
send by name without importing what the workers run. A rename is a breaking
change for workers already deployed.
"""

from __future__ import annotations

# Re-exported (``X as X``): beat's modules and tests read the task names, and beat's Redis keys
# (defined with every other key in wfqueue.keys), from here.
from wfqueue.keys import BEAT_LOCK_KEY as BEAT_LOCK_KEY
from wfqueue.keys import GUARD_PREFIX as GUARD_PREFIX
from wfqueue.keys import REPOS_KEY as REPOS_KEY
from wfqueue.keys import WATCHDOG_FINALIZED as WATCHDOG_FINALIZED
from wfqueue.keys import WATCHDOG_FINALIZED_ISO as WATCHDOG_FINALIZED_ISO
from wfqueue.keys import WATCHDOG_PROGRESS as WATCHDOG_PROGRESS
from wfqueue.keys import WATCHDOG_REENQUEUED as WATCHDOG_REENQUEUED
from wfqueue.keys import WATCHDOG_REPORTED as WATCHDOG_REPORTED
from wfqueue.task_names import BEAT_ARCHIVE as BEAT_ARCHIVE
from wfqueue.task_names import BEAT_LOCKS as BEAT_LOCKS
from wfqueue.task_names import BEAT_PURGE as BEAT_PURGE
from wfqueue.task_names import BEAT_WATCHDOG as BEAT_WATCHDOG
from wfqueue.task_names import QUEUE_CONTROL

ALL_BEAT_TASKS = (BEAT_WATCHDOG, BEAT_PURGE, BEAT_LOCKS, BEAT_ARCHIVE)

# Maintenance is light and must never wait behind planning agents.
BEAT_QUEUE = QUEUE_CONTROL
