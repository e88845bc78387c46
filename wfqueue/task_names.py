"""Stable task names and the queue each one runs on.

The coordinator enqueues by these names and never imports workers/; a rename
here is a breaking change for workers already deployed.
"""

from __future__ import annotations

QUEUE_EXPLORE = "explore"
QUEUE_PLAN = "plan"
QUEUE_CONTROL = "control"
# Coding agents run here: a worker host can serve planning, execution, or both.
QUEUE_EXECUTE = "execute"
ALL_QUEUES = (QUEUE_EXPLORE, QUEUE_PLAN, QUEUE_CONTROL, QUEUE_EXECUTE)

COLLAB_UNDERSTAND = "wfqueue.collab.understand"
COLLAB_PLAN_AREA = "wfqueue.collab.plan_area"
COLLAB_FINALIZE = "wfqueue.collab.finalize"

EXPLORE_ANGLE = "wfqueue.explore.angle"
LITE_ASSESS = "wfqueue.lite.assess"
LITE_SYNTHESIZE = "wfqueue.lite.synthesize"
LITE_PLAN = "wfqueue.lite.plan"

SESSION_CONTEXT = "wfqueue.session.context"
SESSION_CONFLICTS = "wfqueue.session.conflicts"
SESSION_GENERATE = "wfqueue.session.generate"

EXECUTE_TASK = "wfqueue.execute.task"

BEAT_WATCHDOG = "wfqueue.beat.watchdog"
BEAT_PURGE = "wfqueue.beat.purge"
BEAT_LOCKS = "wfqueue.beat.locks"
BEAT_ARCHIVE = "wfqueue.beat.archive"

ROUTES: dict[str, str] = {
    COLLAB_UNDERSTAND: QUEUE_PLAN,
    COLLAB_PLAN_AREA: QUEUE_PLAN,
    COLLAB_FINALIZE: QUEUE_CONTROL,
    EXPLORE_ANGLE: QUEUE_EXPLORE,
    LITE_ASSESS: QUEUE_PLAN,
    LITE_SYNTHESIZE: QUEUE_CONTROL,
    LITE_PLAN: QUEUE_PLAN,
    SESSION_CONTEXT: QUEUE_CONTROL,
    SESSION_CONFLICTS: QUEUE_PLAN,
    SESSION_GENERATE: QUEUE_PLAN,
    EXECUTE_TASK: QUEUE_EXECUTE,
    BEAT_WATCHDOG: QUEUE_CONTROL,
    BEAT_PURGE: QUEUE_CONTROL,
    BEAT_LOCKS: QUEUE_CONTROL,
    BEAT_ARCHIVE: QUEUE_CONTROL,
}
