"""The one error tree of wfqueue.

Every error wfqueue raises on purpose derives from :class:`WfqueueError`. Each
carries the process exit code the CLI uses for it and a hint that tells the user
what to do next, so the CLI never has to guess how to present a failure.

Exit codes: 2 for bad input (nothing was written), 3 for infrastructure
(broker unreachable, workers that would not start). 1 is not an error: it is a
plan that finished partially.

The tree (exit code in brackets)::

    WfqueueError [1]
    ├── BadInputError [2]: raised before anything is written
    │   ├── InvalidSessionIdError, InvalidRequirementError, RepositoryNotFoundError,
    │   │   SessionNotFoundError, ConfigError
    │   ├── PlanNoteError (with the lines at fault)
    │   ├── UnsafeCommandError: a plan's command that will not be run
    │   ├── replan: NotABackupError, OutsideSelectionError, TaskNotFoundError,
    │   │   UnrecognisedRequestError, ReplanRefusedError
    │   └── execute: PlanRejectedError (with every problem), UnsafeRepositoryError (the dirty
    │       files), ExecutorNotConfiguredError
    ├── InfrastructureError [3]: BrokerUnreachableError (BrokerCredentialsError), WorkerStartError
    ├── SessionBusyError [2]: another coordinator drives the session
    ├── ProviderError [1]: no usable answer
    │   ├── TransientProviderError: worth retrying (retry_after)
    │   ├── BudgetExhaustedError: the session's budget is spent
    │   └── StepCrashedError: a worker's error Celery could not carry back, as text
    ├── ReplanRolledBackError [2], ReplanCancelledError [130]
    └── ToolError: a repository tool call refused; its message goes back to the model
"""

from __future__ import annotations

from pathlib import Path


class WfqueueError(Exception):
    """Root of every error wfqueue raises on purpose."""

    exit_code: int = 1
    # The session whose run it ended, once known (wfqueue.runtime.resumable): named in a --json error object.
    session_id: str | None = None

    def __init__(self, message: str, hint: str = "") -> None:
        # Both in args, so the error survives Celery's JSON round trip from worker to coordinator.
        super().__init__(message, hint)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


# -- bad input: raised before any file is touched -----------------------------


class BadInputError(WfqueueError):
    """The user's input cannot be used; raised before anything is written."""

    exit_code = 2


class InvalidSessionIdError(BadInputError):
    """A session id from the command line is not a safe folder name."""


class InvalidRequirementError(BadInputError):
    """The requirement text or file is empty, binary, too large or unreadable."""


class RepositoryNotFoundError(BadInputError):
    """`--repo` does not name an existing directory."""


class SessionNotFoundError(BadInputError):
    """No session with that id exists under `.workflow/`."""


class NoSourceCodeError(BadInputError):
    """The offline planner was asked to plan in a repository that holds no code."""

    @classmethod
    def of(cls, repo: str | Path, larger_than: int | None = None) -> NoSourceCodeError:
        """``larger_than``: the repository has code files, all over this many bytes (the index leaves them out)."""
        if larger_than is not None:
            return cls(f"{repo} has no source code the planner reads: its code files are all larger than "
                       f"{larger_than} bytes, which the repository index leaves out",
                       hint=f"raise WFQUEUE_INDEX_MAX_FILE_BYTES (now {larger_than}) above their size, or pass "
                            "--repo with the repository the requirement is about")
        return cls(f"{repo} has no source code to plan against",
                   hint="pass --repo with the repository the requirement is about")


class ConfigError(BadInputError):
    """A setting or the configuration file has an invalid value."""


class PlanNoteError(BadInputError):
    """plan-note.md cannot be parsed; carries the 1-based line numbers at fault."""

    def __init__(self, message: str, hint: str = "", *, problems: list[str] | None = None) -> None:
        super().__init__(message, hint)
        self.problems = problems or []


class UnsafeCommandError(BadInputError):
    """Raised by :func:`wfqueue.sandboxed_commands.parse_command` when a plan's command will not be run, saying why."""


# -- replan (wfqueue.workflow_session.replan.apply*): refused before anything is written, or undone --------------


class NotABackupError(BadInputError):
    """The folder given to --restore is not a complete replan backup of that session."""


class OutsideSelectionError(BadInputError):
    """The request asks for more than the clarification answers allow."""


class TaskNotFoundError(BadInputError):
    """A task id of the request is not in the session."""


class UnrecognisedRequestError(BadInputError):
    """The request holds text that matches none of the accepted forms."""


class ReplanRefusedError(BadInputError):
    """The replan would leave the session inconsistent; nothing was written."""


# -- execute (wfqueue.execute, `wfqueue execute`): refused before anything is written -------------------------


class PlanRejectedError(BadInputError):
    """The plan cannot be executed (schema, cycles, dangling dependencies, files to modify that do not exist);
    carries every problem, so one run names them all."""

    def __init__(self, message: str, hint: str = "", *, problems: list[str] | None = None) -> None:
        super().__init__(message, hint)
        self.problems = problems or []


class UnsafeRepositoryError(BadInputError):
    """The repository is not git, has no commit, or its working tree is not clean; carries the dirty files."""

    def __init__(self, message: str, hint: str = "", *, dirty: list[str] | None = None) -> None:
        super().__init__(message, hint)
        self.dirty = dirty or []


class ExecutorNotConfiguredError(BadInputError):
    """No executor can run the tasks: neither an executor command nor an API key is configured."""


class ReplanRolledBackError(WfqueueError):
    """Validation failed after writing; the backup was put back, so nothing changed."""

    exit_code = 2


class ReplanCancelledError(WfqueueError):
    """The user cancelled at the confirmation; nothing was written."""

    exit_code = 130


# -- infrastructure: the system around wfqueue is not usable --------------------


class InfrastructureError(WfqueueError):
    """Broker, workers or disk are not usable; the plan could not run."""

    exit_code = 3


class BrokerUnreachableError(InfrastructureError):
    """The Redis broker did not answer within the connect timeout."""


class BrokerCredentialsError(BrokerUnreachableError):
    """The Redis broker answered and refused what the URL asks of it (its credentials, a database it does not
    have): waiting will not change that."""


class BrokerNotRedisError(BrokerUnreachableError):
    """Something accepts connections at the broker's address and does not answer as Redis (a web server, a
    service that never answers): waiting will not change that either."""


class DamagedStateError(InfrastructureError):
    """What Redis holds of a session does not read (a value edited by hand, written by another program)."""


class WorkerStartError(InfrastructureError):
    """Embedded Redis or worker processes failed to start."""


class SessionBusyError(WfqueueError):
    """Another coordinator already drives this session."""

    exit_code = 2


class SessionIdTakenError(SessionBusyError):
    """A new session's id is the id of a session another coordinator drives on the same broker (another
    repository that planned the same words the same day); raised before anything of it is touched."""


# -- providers: planning steps ----------------------------------------------------


class ProviderError(WfqueueError):
    """A planning provider could not produce a usable answer."""


class TransientProviderError(ProviderError):
    """A provider failure worth retrying later (rate limit, overload, timeout).

    ``retry_after`` is the delay in seconds the provider asked for, if any.
    """

    def __init__(self, message: str, hint: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message, hint)
        self.retry_after = retry_after


class BudgetExhaustedError(ProviderError):
    """The session's budget is spent: the call it was checked before was not made.

    A ProviderError, so an agent or angle turns it into a failure record like any other
    provider failure, and never a retry (it is not transient)."""


class StepCrashedError(ProviderError):
    """A worker's step ended on an error Celery could not carry back as it was (its type cannot be made again
    from its arguments: pydantic's ValidationError arrived as "Exception: <class ...>([])"): its type and message,
    as text. A ProviderError, as the coordinator made of any other error a step raised: the step failed (a task of
    an execution fails, a plan ends failed), not the infrastructure."""


class ToolError(WfqueueError):
    """A repository tool call (wfqueue.providers.anthropic.tools) was refused or failed; the message goes
    back to the model as an ``is_error`` tool result and never ends the step."""
