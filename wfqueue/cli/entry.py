"""The ``wfqueue`` command (and ``python -m wfqueue``): a standby worker first, then the command line.

Kept to the standard library until the standby has been started (wfqueue.prestart): every import before
it would be waited for twice.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from typing import NoReturn


def exit_process(code: int) -> NoReturn:
    """``sys.exit(code)`` that keeps ``code`` after a Ctrl-C the command caught (exit 130, not death by SIGINT).

    CPython (3.11 at least) marks a KeyboardInterrupt raised in code compiled from a string as unhandled even
    when it is caught, and an interpreter started with ``-m`` (``python -m wfqueue``, as tests and the
    standby's users run it) then ends by SIGINT instead of with the exit code. Imports hit this often:
    dataclasses and namedtuple build their methods with ``exec``. Running any string resets the mark (a CPython
    detail: ``run_eval_code_obj`` clears it before each run)."""
    exec("")  # clears the mark described above; runs nothing
    # The outcome is decided and said: a stop signal during the interpreter's shutdown (threads joined, finalizers
    # run) ends the process at once with it, flushed, instead of a traceback of the join it interrupted.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread: nothing to install
            signal.signal(stop, lambda _signum, _frame: _end_now(code))
    sys.exit(code)


def _end_now(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing more to say there
            stream.flush()
    os._exit(code)


def main() -> None:
    from wfqueue import prestart, stop_request
    from wfqueue.cli.stop_signals import STOP_SIGNALS, raise_interrupted, raise_terminated, to_handle

    # A SIGTERM or SIGHUP before the command takes them over (wfqueue.cli.main.sigterm_unwinds) ended the process
    # at once, with no word and no --json object: until then they stop the load like a Ctrl-C.
    for stop in to_handle(STOP_SIGNALS):
        signal.signal(stop, raise_terminated)
    interruptible = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not when ignored on purpose
    if interruptible:
        signal.signal(signal.SIGINT, raise_interrupted)
    # Loading the command line creates long-lived objects and no garbage worth a collection (see
    # workers.serve._collect_from_now_on); frozen afterwards, they are not scanned again.
    gc.disable()
    try:
        # A Ctrl-C can land while the standby is being forked (its process exists, Popen has not returned):
        # Popen then closes the standby's stdin, and a standby given no orders exits by itself.
        prestart.begin(sys.argv[1:])
        from wfqueue.cli.commands import load_for
        from wfqueue.cli.main import main as run

        load_for(sys.argv[1:])  # the command's own module, most of the loading
    except BaseException as failed:  # re-raised unless a stop signal caused it
        # Ctrl-C (or a stop signal) while the command line loads, raised as itself or hidden in another error:
        # nothing has started.
        interrupt = failed if isinstance(failed, KeyboardInterrupt) else stop_request.asked()
        if interrupt is None:
            raise
        _stopped_before_the_command(getattr(interrupt, "exit_code", 130), getattr(interrupt, "said", "interrupted"))
    if interruptible:  # the command's handler (wfqueue.cli.main.sigterm_unwinds) takes over from Python's own
        signal.signal(signal.SIGINT, signal.default_int_handler)
    gc.freeze()
    gc.enable()
    try:
        code = run()
    except KeyboardInterrupt as stop:  # before the command took signals over (its handlers being installed)
        # A SIGTERM or SIGHUP there is wfqueue.cli.stop_signals.Terminated, which says its own code (143, 129).
        _stopped_before_the_command(getattr(stop, "exit_code", 130), getattr(stop, "said", "interrupted"))
    exit_process(code)


def _stopped_before_the_command(code: int, said: str) -> NoReturn:
    print(said, file=sys.stderr)
    with contextlib.suppress(Exception, KeyboardInterrupt):  # a --json command's one object, as ever
        from wfqueue.cli import json_output

        if json_output.asked(sys.argv[1:]):
            json_output.emit_failure(code, said, status="interrupted")
    exit_process(code)
