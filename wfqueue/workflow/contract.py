"""What a workflow's coordinator takes and gives back: its UI, the requests that start or resume a session,
and the outcome a plan ends with (wfqueue.workflow.base is the skeleton that uses them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from wfqueue.keys import SessionMeta, SessionStatus
from wfqueue.metering import says_budget_spent
from wfqueue.runtime import Reporter
from wfqueue.usage import Budget


class WorkflowUI(Reporter, Protocol):
    """What every coordinator shows: messages, live agent progress, and the end of it.
    Each workflow's protocol extends this with its own questions."""

    def progress(self, agents: dict[str, dict[str, Any]]) -> None: ...

    def note(self, what: str, text: str) -> None: ...

    def done(self) -> None: ...


class PlanOutcome(BaseModel):
    """What a plan ended with. Workflows add their own fields in a subclass."""

    # What `--json` prints; a workflow's outcome adds its own fields (a failed area, a skipped angle, the gate), so
    # that `plan`, `resume` and every other command that prints one tell a script the same.
    JSON_FIELDS: ClassVar[frozenset[str]] = frozenset({"session_id", "session_dir", "status", "tasks", "conflicts"})

    session_id: str
    session_dir: str
    status: str
    tasks: int
    conflicts: int
    usage: str | None = None  # wfqueue.metering.usage_line
    stopped: str | None = None  # why planning stopped early (a spent budget, a step the model failed)
    stop_hint: str | None = None  # what to do about it (a spent budget's hint is printed from the outcome itself)

    def failure_reasons(self) -> list[str]:
        """Why the plan, or parts of it, stopped: workflows add their failed areas or angles."""
        return [self.stopped] if self.stopped else []

    def budget_spent(self) -> bool:
        """Whether its budget stopped any of it: a resume needs a larger one."""
        return any(says_budget_spent(reason) for reason in self.failure_reasons())

    @property
    def exit_code(self) -> int:
        return 1 if self.status in (SessionStatus.PARTIAL, SessionStatus.FAILED) else 0

    def json_line(self) -> str:
        """The one JSON object `--json` prints: JSON_FIELDS, in field order."""
        return json.dumps(self.model_dump(include=set(self.JSON_FIELDS)), ensure_ascii=False)


class ResumeRequest(BaseModel):
    """`wfqueue resume`: which session, and what replaces its recorded settings."""

    session_dir: Path
    repo: Path
    provider: str  # used when the session recorded none, or when chosen (--provider)
    provider_chosen: bool = False
    budget: Budget | None = None  # replaces the session's budget; None keeps it
    parallel: int | None = None  # an execution's cap on tasks at once (--continue --parallel); None keeps it
    yes: bool = False  # a question the session stopped at is answered with its default, not asked again

    def chosen_meta(self) -> SessionMeta:
        """What a resume writes into the session's meta before anything: where the session and its repository
        live (Redis may have forgotten both: its bill is read back from the folder, and without a shared disk the
        repository is published again from the pin the folder records), and a provider chosen with --provider,
        so that the checks made there, and every later resume, see it."""
        where = {"session_dir": str(self.session_dir), "repo": str(self.repo)}
        if self.provider_chosen:
            return SessionMeta(**where, provider=self.provider)
        return SessionMeta(**where)

    def provider_for(self, recorded: str | None) -> str:
        """The provider that finishes the session: the one it was planned with, unless ``--provider`` chose one
        (a provider that keeps failing must not lock a session in)."""
        return self.provider if self.provider_chosen or not recorded else recorded


class NewSessionRequest(Protocol):
    """What starting a fresh session reads from a workflow's request."""

    @property
    def requirement(self) -> str: ...
    @property
    def repo(self) -> Path: ...
    @property
    def provider(self) -> str: ...
    @property
    def budget(self) -> Budget | None: ...
