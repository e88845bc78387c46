"""The one error tree of wfqueue.

Every error wfqueue raises on purpose derives from :class:`WfqueueError`. Each
carries the process exit code the CLI uses for it and a hint that tells the user
what to do next, so the CLI never has to guess how to present a failure.

Exit codes: 2 for bad input (nothing was written), 3 for infrastructure
(broker unreachable, workers that would not start). 1 is not an error: it is a
plan that finished partially.
"""

from __future__ import annotations


class WfqueueError(Exception):
    """Root of every error wfqueue raises on purpose."""

    exit_code: int = 1

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


class ConfigError(BadInputError):
    """A setting or the configuration file has an invalid value."""


class PlanNoteError(BadInputError):
    """plan-note.md cannot be parsed; carries the 1-based line numbers at fault."""

    def __init__(self, message: str, hint: str = "", *, problems: list[str] | None = None) -> None:
        super().__init__(message, hint)
        self.problems = problems or []


# -- infrastructure: the system around wfqueue is not usable --------------------


class InfrastructureError(WfqueueError):
    """Broker, workers or disk are not usable; the plan could not run."""

    exit_code = 3


class BrokerUnreachableError(InfrastructureError):
    """The Redis broker did not answer within the connect timeout."""


class WorkerStartError(InfrastructureError):
    """Embedded Redis or worker processes failed to start."""


class SessionBusyError(WfqueueError):
    """Another coordinator already drives this session."""

    exit_code = 2


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
