"""Entry point: builds the Typer app and turns wfqueue errors into exit codes.

Exit codes: 0 complete, 1 partial or failed plan, 2 bad input, 3 infrastructure,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP: the terminal closed).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click
import typer
import typer._click.exceptions as typer_click_exceptions
from rich.console import Console
from rich.markup import escape

from wfqueue import stop_request
from wfqueue.cli import commands, json_output
from wfqueue.cli.entry import exit_process
from wfqueue.cli.stop_signals import (
    INTERRUPTED_EXIT,
    STOP_SIGNALS,
    raise_interrupted,
    raise_terminated,
    to_handle,
)
from wfqueue.errors import InfrastructureError, WfqueueError
from wfqueue.fsio import disk_refusal


def _group() -> None:
    """Plan large software changes with many planning agents running as Celery tasks on Redis."""


# The commands are loaded on use (wfqueue.cli.commands); the callback, which does nothing, makes the app a group
# of commands though none is registered on it.
app = typer.Typer(
    name="wfqueue",
    cls=commands.LazyGroup,
    callback=_group,
    help=_group.__doc__,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# What a --json command that exited non-zero without its object says (its reason went to stderr).
NO_RESULT = "the command ended without a result (its messages are on stderr)"


def stop_deferred() -> None:
    """``wfqueue.runtime.stop_deferred`` where the command loaded the runtime: only such a command can have
    deferred a stop, and the others (validate, worker, config) do without loading Celery and Redis for it."""
    runtime = sys.modules.get("wfqueue.runtime")
    if runtime is not None:
        runtime.stop_deferred()


@dataclass
class Signals:
    received: signal.Signals | None = None


@contextmanager
def sigterm_unwinds() -> Iterator[Signals]:
    """Raise :class:`Terminated` on SIGTERM or SIGHUP while a command runs (main thread only; restored after).
    Commands that run a Celery worker or beat install their own handler, which replaces this one."""
    seen = Signals()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        seen.received = signal.Signals(signum)
        raise_terminated(signum, frame)  # recorded: raised again by the next wait, should a finalizer swallow it

    stop_request.clear()
    previous = {sig: signal.signal(sig, on_signal) for sig in to_handle(STOP_SIGNALS)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when Ctrl-C is ignored on purpose
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, raise_interrupted)
    try:
        yield seen
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stop_request.clear()


def _stopped(err: Console, signals: Signals) -> tuple[int, str]:
    """Say how the command was stopped (Ctrl-C, SIGTERM, SIGHUP); its exit code and those words."""
    code, said = STOP_SIGNALS[signals.received] if signals.received is not None else (INTERRUPTED_EXIT, "interrupted")
    with contextlib.suppress(OSError):  # after a hangup the terminal is gone (EIO)
        err.print(said)
    return code, said


def _redis_cannot_save(exc: BaseException) -> InfrastructureError | None:
    """Redis refusing writes it cannot save (MISCONF: its append-only file on a full or read-only disk), as
    redis-py raises it or kombu wraps it, anywhere in ``exc``'s chain: `up` and the plan commands beside it ended
    in a traceback."""
    seen: BaseException | None = exc
    while seen is not None:
        if str(seen).startswith("MISCONF"):
            return InfrastructureError(
                "Redis cannot save what it is sent (MISCONF: writing its data failed; its disk is full or not "
                "writable)", hint="free some space where the broker keeps its data (the embedded Redis: the "
                                  "repository's .workflow/.queue), then run the command again; what was queued is kept")
        seen = seen.__cause__ or seen.__context__
    return None


def _report(err: Console, exc: WfqueueError) -> int:
    # Messages quote what the user gave (a requirement, a path): never read as markup.
    err.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False, markup=True, soft_wrap=True)
    if exc.hint:
        err.print(f"[dim]hint:[/] {escape(exc.hint)}", highlight=False, soft_wrap=True)
    return exc.exit_code


def main(argv: list[str] | None = None) -> int:
    err = Console(stderr=True)
    json_asked = json_output.asked(sys.argv[1:] if argv is None else argv)
    json_output.begin()

    def ended(code: int, message: str, hint: str | None = None, *, status: str = "error",
              session_id: str | None = None) -> int:
        """``code``, after the object a ``--json`` command owes its script when it ended without its own."""
        if json_asked and code != 0:
            json_output.emit_failure(code, message, hint, status=status, session_id=session_id)
        return code

    def unexpected(exc: BaseException) -> int:
        """A bug's traceback, as Python prints it; with ``--json``, then the object the script is owed."""
        if not json_asked:
            raise exc
        traceback.print_exception(exc)
        return ended(1, f"wfqueue failed unexpectedly: {type(exc).__name__}: {exc}",
                     "this is a bug in wfqueue: report it with the traceback printed on stderr")

    def stopped() -> int:
        left = stop_request.left_behind()  # the session the stop interrupted, and how to finish it
        stop_request.clear()
        code, said = _stopped(err, signals)
        if left is None:
            return ended(code, said, status="interrupted")
        return ended(code, said, left.hint, status="interrupted", session_id=left.session_id)

    with sigterm_unwinds() as signals:
        try:
            code = app(args=argv, standalone_mode=False)
        except WfqueueError as exc:
            return ended(_report(err, exc), exc.message, exc.hint, session_id=exc.session_id)
        except OSError as exc:  # a write the disk refused where no command checked first: said, not a traceback
            # A rename onto a folder (an atomic write's last step) names the folder second.
            named = exc.filename2 if exc.errno == errno.EISDIR and isinstance(exc.filename2, str) else exc.filename
            refusal = disk_refusal(exc, Path(named) if isinstance(named, str) else None, then="run the command again")
            if refusal is None:
                return unexpected(exc)
            return ended(_report(err, refusal), refusal.message, refusal.hint)
        except (KeyboardInterrupt, click.exceptions.Abort, typer.Abort):
            return stopped()
        except (click.exceptions.ClickException, typer_click_exceptions.ClickException) as exc:
            # Typer vendors its own copy of click: usage errors come from either.
            exc.show()
            usage = isinstance(exc, (click.exceptions.UsageError, typer_click_exceptions.UsageError))
            return ended(2 if usage else exc.exit_code, exc.format_message(),
                         "see the command's --help" if usage else None)
        except (click.exceptions.Exit, typer.Exit) as exc:
            return ended(exc.exit_code, NO_RESULT)
        except Exception as exc:  # noqa: BLE001 - a bug: re-raised, or said as the --json contract asks
            # Unless a stop signal came first: then it is the stop, hidden (stop_request.asked).
            if stop_request.asked() is not None:
                return stopped()
            refused = _redis_cannot_save(exc)
            return ended(_report(err, refused), refused.message, refused.hint) if refused else unexpected(exc)
        else:
            # Typer turns an interrupt inside a command into the return value 130.
            return stopped() if code == INTERRUPTED_EXIT else ended(int(code or 0), NO_RESULT)
        finally:
            # A command that asked its embedded cluster to outlive its output (stop_after_output) and then
            # stopped on bad input before starting one must not leave that request to the next command run in
            # this process. A second Ctrl-C while that cluster stops only hurries the stop (what is left is
            # killed): the command's exit code stands, where it ended in a traceback and death by the signal.
            with contextlib.suppress(KeyboardInterrupt):
                stop_deferred()


if __name__ == "__main__":  # pragma: no cover
    # `python -m wfqueue.cli.main` loads the command's module as the `wfqueue` entry point does (wfqueue.cli.entry):
    # with the collector off, its objects frozen after.
    gc.disable()
    commands.load_for(sys.argv[1:])
    gc.freeze()
    gc.enable()
    exit_process(main())
