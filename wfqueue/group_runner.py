"""Run a command a worker starts (a coding agent, a test run, a task's verification) to its end, in a process
group of its own that nothing outlives.

The command runs in a session of its own, so a signal to its group reaches whatever it started (an agent's own
subprocesses, a test suite's workers), and the worker's Ctrl-C does not. Three ways it could outlive its run:

- It exits and leaves children running (a server a test started, an agent's background job): they are killed
  when it exits, by its group id, which cannot be reused while the command is not reaped (it is watched through
  a pidfd, not waited for, until then).
- Its time limit passes: its group is asked to stop (SIGTERM), then killed.
- The worker dies outright (SIGKILL, the out-of-memory killer, a host going down under a plan command): nothing in
  the worker runs any more. The kernel can signal a child when its parent dies (``PR_SET_PDEATHSIG``,
  wfqueue.lifeline), but only the direct child: an agent's own subprocesses went on editing the worktree, and
  the next run of the task merged their edits with its own. So the direct child is a guard, a small Python
  process that leads the group: told of the worker's death, it kills the group, itself included. It starts the
  command with every signal at its default (SIGCHLD aside: no signal is ignored, which a command without a
  terminal does not notice), and ends as the command did, with its exit status or by its signal.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from wfqueue.child_process import stop_process_group
from wfqueue.lifeline import dies_with_parent
from wfqueue.markdown import printable

__all__ = ["GUARD_SIGNAL", "find_program", "guarded", "output_tail", "run_to_end"]

# What the guard receives when the worker thread that started it ends: a real-time signal, which no command sends
# its own group by chance (SIGUSR1 made the guard kill the group when a test did).
GUARD_SIGNAL = signal.SIGRTMIN + 4 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR1  # not Linux: unused

# The guard: only the standard library, run with -I -S (no site, no user paths: a few milliseconds). Every signal
# the command may send its own group (SIGHUP, SIGINT, SIGUSR1 ...) gets a handler that does nothing: the guard must
# outlive the command, and a handler (unlike "ignore") is reset when the command is started. Python's start-up
# may have set LC_CTYPE (locale coercion): the command gets the worker's own value back (argv[1], "-" for none).
_GUARD = """
import os, resource, signal, sys
death, ctype, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
for each in signal.valid_signals():
    if each not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, death):
        try:
            signal.signal(each, lambda *_: None)
        except (OSError, ValueError):
            pass
signal.signal(death, lambda *_: os.killpg(0, signal.SIGKILL))
env = dict(os.environ)
if ctype == "-":
    env.pop("LC_CTYPE", None)
else:
    env["LC_CTYPE"] = ctype
try:
    pid = os.posix_spawnp(argv[0], argv, env, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
except OSError as exc:
    print(f"{argv[0]}: {exc.strerror}", file=sys.stderr)
    sys.exit(127)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
if code < 0:  # ended by a signal: so does the guard (no core file of its own), and its parent sees the same
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def guarded(argv: list[str]) -> list[str]:
    """``argv`` run under the guard (on Linux, where the kernel tells a child of its parent's death), else as is."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(int(GUARD_SIGNAL)), os.environ.get("LC_CTYPE", "-"), *argv]


def find_program(program: str, cwd: Path) -> bool:
    """Whether ``program`` (a name looked up on PATH, or a path) can be run from ``cwd``, as the command itself
    would find it: a relative path, or a relative PATH entry (`node_modules/.bin`), from ``cwd``. Started through
    the guard, a missing one would be an exit status of 127 instead of an error saying it could not start."""
    def runnable(path: Path) -> bool:
        return path.is_file() and os.access(path, os.X_OK)

    if "/" in program:
        return runnable(Path(program) if os.path.isabs(program) else cwd / program)
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return any(runnable((Path(entry) if os.path.isabs(entry) else cwd / entry) / program) for entry in entries)


def run_to_end(argv: list[str], cwd: Path, *, timeout_s: float, output: IO[bytes], grace_s: float,
               stdin: IO[bytes] | int = subprocess.DEVNULL, stop_first: signal.Signals = signal.SIGKILL,
               env: Mapping[str, str] | None = None) -> int | None:
    """Run ``argv`` in ``cwd`` (stdout and stderr into ``output``) until it exits; its exit status (negative: the
    signal that ended it), or None when ``timeout_s`` passed first and it was stopped. Whatever it left running
    in its group is killed either way. FileNotFoundError when its program is not there. ``stop_first``: what its
    group is sent when this run is itself stopped (Ctrl-C, a task's time limit), ``grace_s`` before SIGKILL: an
    agent in the middle of a `git commit` leaves its index lock behind when killed outright. ``env``: the command's
    environment (None: this process's)."""
    if not find_program(argv[0], cwd):
        raise FileNotFoundError(f"{argv[0]}: not found")
    proc = subprocess.Popen(guarded(argv), cwd=cwd, stdin=stdin, stdout=output, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=dies_with_parent(GUARD_SIGNAL), env=env)
    try:
        exited = _exited_within(proc, timeout_s)
        if not exited:  # the command and every child it started: asked to stop, then killed
            _signal_group(proc, signal.SIGTERM)
            _exited_within(proc, grace_s)
        _signal_group(proc, signal.SIGKILL)  # what it left running: its group id is still its own (not reaped)
        proc.wait()
    except BaseException:  # Ctrl-C, SIGTERM, a task's time limit: its own session would keep it running
        stop_process_group(proc, stop_first, grace_s=grace_s)
        _gone(proc.pid, grace_s)
        raise
    _gone(proc.pid, grace_s)
    return proc.returncode if exited else None


def _gone(group: int, timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until no process of ``group`` is left: a kill is delivered when it is sent, a
    process ends a little later, and the command's own are the guard's children, not waited for here. A test
    still writing files when the gate's next step began read as the gate's own doing."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _exited_within(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether the command exited within ``timeout_s``, left unreaped: while it is a zombie its process group id
    cannot be taken by a new process, so its leftovers can still be killed by that id."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (not Linux, or an old kernel): wait and reap
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        waiting = select.poll()  # not select(): a descriptor above 1023 is common in a busy worker
        waiting.register(pidfd, select.POLLIN)
        return bool(waiting.poll(max(0, int(timeout_s * 1000))))
    finally:
        os.close(pidfd)


def _signal_group(proc: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def output_tail(output: IO[bytes], limit: int) -> str:
    """The last ``limit`` characters written to ``output``, read from its end only: a command printing gigabytes
    costs disk until it ends, not the worker's memory."""
    size = output.seek(0, os.SEEK_END)
    output.seek(max(0, size - 4 * limit))  # a character is at most four bytes in UTF-8
    # Shown in logs, execution.md and the terminal: an agent CLI's colours and title changes do not run there.
    return str(printable(output.read().decode("utf-8", "replace")[-limit:]))
