"""Every Redis key wfqueue uses, the agent states and session statuses it stores, and the session meta.

Session keys live under ``wfq:{session_id}:`` (see ``session_prefix``) and expire
with ``state_ttl_s``; the names below are relative to that prefix, as
``SessionState`` takes them. A few keys are shared by every session (beat's lock
and guards, the rate limiter's windows). Renaming any of these is a breaking
change for sessions in flight and for workers already deployed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from wfqueue.transport.models import RepoPin, Transport

KEY_ROOT = "wfq:"


def session_prefix(session_id: str) -> str:
    """The prefix of every key of one session."""
    return f"{KEY_ROOT}{session_id}:"


# -- keys shared by all sessions ---------------------------------------------------------------

BEAT_LOCK_KEY = "wfq:beat:lock"  # the single-scheduler lock
REPOS_KEY = "wfq:beat:repos"  # hash repo -> last time a session meta named it
GUARD_PREFIX = "wfq:beat:guard:"  # SET NX EX guards of actions on files and whole sessions


def ratelimit_prefix(scope: str) -> str:
    """The prefix of one rate-limit scope's keys; the braces keep them in one Redis Cluster slot."""
    return "wfq:ratelimit:{" + scope + "}:"


# -- per-session bookkeeping (wfqueue.state) ------------------------------------------------------

META = "meta"  # hash field -> JSON: SessionMeta
SECTIONS = "sections"  # hash heading -> body of an owned plan-note.md section
USAGE = "usage"  # list of JSON provider usage entries, in call order
COORDINATOR = "coordinator"  # the CoordinatorLease claim
AGENT_PREFIX = "agent:"


def agent_key(area: str) -> str:
    """Hash field -> JSON: one agent's progress record (``state``, ``error``, times, worker)."""
    return f"{AGENT_PREFIX}{area}"


def attempts_key(area: str) -> str:
    """Counter of an agent's attempts."""
    return f"attempts:{area}"


def turn_key(step: str) -> str:
    """A step's durable transcript (wfqueue.turns)."""
    return f"turns:{step}"


# -- per-session values the steps remember ---------------------------------------------------------

CREATED_AT = "created_at"  # ISO time the session's first document was made
# collab
UNDERSTANDING_KEYS = ("understanding", "understanding#2")  # the understanding answers (first ask, repair round)
ANALYSIS = "analysis"  # RequirementAnalysis JSON
TEMPLATE = "template"  # the plan-note.md template
FINAL = "final"  # the finalize task's result JSON
FINALIZED_AT = "finalized_at"
# every session's fan-out (wfqueue.fanout)
CALLBACK_WAITING = "callback:waiting"  # JSON {task, kwargs}: the callback that held back for unfinished agents
CALLBACK_RESULT = "callback:result"  # JSON: the result of the callback's run that found every agent finished
CALLBACK_ERROR = "callback:error"  # why that run failed, for the coordinator waiting for its result
STEP_NOTE = "step_note"  # what the running single step waits for (wfqueue.agent_notes); absent: nothing
# lite and workflow sessions
ASSESSMENT = "assessment"
SYNTHESIZED_AT = "synthesized_at"
LITE_PLAN = "lite_plan"
CLARIFICATIONS = "clarifications"  # JSON list of the ClarificationAnswers the user gave a lite plan
# "1" when a lite plan is to be shown to the user before it counts (no -y): a plan stopped before its plan.md says
# so (planning interrupted) is asked about by its resume.
AWAITS_ACCEPTANCE = "awaits_acceptance"
# "1" when a lite plan was asked to explore whatever its assessment says (--explore): its resume assesses the same way.
EXPLORE_FORCED = "explore_forced"
CONTEXT_AT = "context_at"
SESSION_CONFLICTS = "session_conflicts"
WFS_PLAN = "wfs_plan"
GENERATED_AT = "generated_at"


def understanding_key(attempt: int) -> str:
    """The understanding answer of one attempt (1: the first ask, 2: the repair round)."""
    return UNDERSTANDING_KEYS[0] if attempt == 1 else f"{UNDERSTANDING_KEYS[0]}#{attempt}"


def result_key(area: str) -> str:
    """A collab area's AreaArtifacts JSON (first answer wins)."""
    return f"result:{area}"


def strategy_key(conflict_id: str) -> str:
    """The strategy (its index) a person chose for a workflow session's conflict, kept for a resume."""
    return f"strategy:{conflict_id}"


def exploration_key(angle: str) -> str:
    """A lite or workflow angle's VerifiedExploration JSON (first answer wins)."""
    return f"exploration:{angle}"


def task_run_key(task_id: str, attempt: int) -> str:
    """An executed task's TaskRun JSON, per attempt (first answer wins: a redelivered task returns it)."""
    return f"taskrun:{task_id}#{attempt}"


EXECUTION = "execution"  # an execution's Execution JSON (wfqueue.execute.records), as last saved
# hash relative path -> content: the session folder's files, when workers share no disk with the coordinator
FILES = "files"
FILES_LOCK_PREFIX = "files-lock:"  # + relative path: the Redis lock that stands in for a file lock
FILES_SYNCED = "files-synced"  # set of relative paths the coordinator's session folder has held


def bundle_prefix(commit: str) -> str:
    """The keys of one commit's repository bundle (wfqueue.transport.repo): ``meta`` and ``chunk:N``."""
    return f"{KEY_ROOT}bundle:{commit}:"


def commits_prefix(name: str) -> str:
    """The keys of commits a worker sends back (an executed task's branch), by name."""
    return f"{KEY_ROOT}commits:{name}:"


# -- the stalled-session watchdog (beat.watchdog) --------------------------------------------------

WATCHDOG_PROGRESS = "watchdog:progress"  # {"fingerprint", "since"}: when the agent records last changed
WATCHDOG_REENQUEUED = "watchdog:reenqueued_at"  # float; also the guard of the one re-enqueue
WATCHDOG_FINALIZED = "watchdog:finalized_at"  # float; also the guard of the finalisation
WATCHDOG_REPORTED = "watchdog:reported"  # guard: a stalled session of another kind is logged once per deadline
# ISO time; read by the collab coordinator to stop waiting for a chord that will not fire.
WATCHDOG_FINALIZED_ISO = "watchdog_finalized"
# Forgotten when a session is resumed: a resumed plan starts a fresh watch.
WATCHDOG_KEYS = (WATCHDOG_FINALIZED_ISO, WATCHDOG_PROGRESS, WATCHDOG_REENQUEUED, WATCHDOG_FINALIZED, WATCHDOG_REPORTED)
# ISO timestamps sessions store once: signs of activity when no agent record has a time.
ACTIVITY_KEYS = (CREATED_AT, FINALIZED_AT, SYNTHESIZED_AT, WATCHDOG_FINALIZED_ISO)


# -- what the records say ---------------------------------------------------------------------------


class AgentState(StrEnum):
    """The ``state`` of an agent record. Stored as its value (a plain string)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


TERMINAL_AGENT_STATES = frozenset({AgentState.DONE, AgentState.FAILED})


class SessionStatus(StrEnum):
    """The ``status`` of a session meta. Collab: planning, then completed, partial, conflicts_detected,
    failed or cancelled; lite: planning, then completed, partial, failed or cancelled; workflow
    sessions: planning, then active once planned (or failed), later completed or archived; executions: running,
    then completed or partial."""

    PLANNING = "planning"
    RUNNING = "running"
    ACTIVE = "active"
    COMPLETED = "completed"
    PARTIAL = "partial"
    CONFLICTS_DETECTED = "conflicts_detected"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ARCHIVED = "archived"


# Statuses after which nothing more will happen to a session by itself.
FINISHED_STATUSES = frozenset(set(SessionStatus) - {SessionStatus.PLANNING, SessionStatus.RUNNING})


class SessionKind(StrEnum):
    """The ``kind`` of a session meta: which workflow drives it."""

    COLLAB = "collab"
    LITE = "lite"
    WORKFLOW = "workflow"
    EXECUTE = "execute"  # `wfqueue execute`: the session id is the exec id


class SessionMeta(BaseModel):
    """The session meta hash (``META``), as coordinators write it and workers, status and beat read it.

    Every field is optional: a coordinator writes it in several calls, and older sessions may lack
    fields. Unknown fields are kept. ``kind`` and ``status`` stay plain strings so a value written by
    another version is still readable; compare them with SessionKind / SessionStatus members."""

    model_config = ConfigDict(extra="allow")

    kind: str | None = None
    repo: str | None = None
    session_dir: str | None = None
    requirement: str | None = None
    provider: str | None = None
    status: str | None = None
    # wfqueue.metering.budget_meta; read through metering.session_budget, which skips an unreadable one.
    budget: Any = None
    chord_id: str | None = None  # the fan-out the coordinator waits on
    # With no shared disk: what payloads carry, and the pinned repository (HEAD, and the snapshot of
    # uncommitted changes workers read, if any).
    transport: Transport | None = None
    pin: RepoPin | None = None

    def fields(self) -> dict[str, Any]:
        """The fields that were set, as ``SessionState.set_meta`` takes them."""
        return self.model_dump(exclude_unset=True)
