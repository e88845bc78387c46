"""The gate: the test commands run on the integration branch after each wave.

``execute_test_command`` when it is set; else the plan's own verification commands, keeping only those the
sandboxed command runner will run (a known test or build tool, no shell, nothing outside the repository): a
manual check cannot gate anything. Each test run is made once: a command running a tool's whole suite
(``python -m pytest -q``) stands for every command of that tool with the same options that runs part of it,
and the commands of a tool that takes several test paths (``python -m pytest -q tests/test_a.py`` and
``... tests/test_b.py``) become one, which collects and starts once. Pure.
"""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

from wfqueue.execute.model import ExecTask
from wfqueue.sandboxed_commands import refusal, tool_of

# Tools whose arguments, options aside, are test paths (or Go packages), several to a run.
_PATH_TOOLS = frozenset({"pytest", "python -m pytest", "python3 -m pytest", "rspec", "bundle exec rspec", "go test"})
# Tools that run the whole suite when given no argument, and only part of it otherwise.
_SUITE_TOOLS = _PATH_TOOLS | {"cargo test", "jest", "dotnet test", "phpunit", "vendor/bin/phpunit"}
# Options known to take no value: any other option might take the next argument as its value, which must not
# be read as a test path (`-k expr`, `-m slow`, `-run TestX`); a command with one is kept as it is.
_FLAGS = frozenset({"-q", "-qq", "-v", "-vv", "-vvv", "-x", "-s", "-l", "-ra", "-rA", "-rf", "--quiet", "--verbose",
                    "--exitfirst", "--showlocals", "--no-header", "--strict-markers", "-race", "-short", "-failfast",
                    "--fail-fast", "--release", "--all-features", "--workspace", "--no-fail-fast"})
_ATTACHED_VALUE = re.compile(r"^--?[\w-]+=\S")  # --tb=short, -count=1


class _Run(NamedTuple):
    tool: str
    options: tuple[str, ...]
    targets: tuple[str, ...]


def verification_refusal(task: ExecTask) -> str | None:
    """Why the task's verification will not run as a command (a manual check, or an unsafe command), or None."""
    refused = refusal(task.verification)
    return refused.message if refused is not None else None


def gate_commands(tasks: list[ExecTask], configured: str | None) -> list[str]:
    if configured is not None and configured.strip():
        return [configured.strip()]
    runnable = [t.verification.strip() for t in tasks if verification_refusal(t) is None]
    return combined(list(dict.fromkeys(runnable)))


def combined(commands: list[str]) -> list[str]:
    """``commands`` with each test run made once (the module's docstring), in the order they first appear."""
    runs = {command: _read(command) for command in commands}
    groups: dict[tuple[str, tuple[str, ...]], list[_Run]] = {}
    for run in runs.values():
        if run is not None:
            groups.setdefault((run.tool, run.options), []).append(run)
    out: list[str] = []
    for command in commands:
        run = runs[command]
        replacement = command if run is None else _replacement(command, run, groups[(run.tool, run.options)])
        if replacement not in out:
            out.append(replacement)
    return out


def _read(command: str) -> _Run | None:
    """A command as its tool, options and targets; None for one that is kept as it is."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    tool = tool_of(argv)
    if tool not in _SUITE_TOOLS:
        return None
    rest = argv[len(tool.split()):]
    options = tuple(a for a in rest if a.startswith("-"))
    if any(a not in _FLAGS and not _ATTACHED_VALUE.match(a) for a in options):
        return None
    return _Run(tool, options, tuple(a for a in rest if not a.startswith("-")))


def _replacement(command: str, run: _Run, group: list[_Run]) -> str:
    """What runs ``command``'s tests, given every run of its tool with the same options (``group``)."""
    if any(not other.targets for other in group):
        return shlex.join([*run.tool.split(), *run.options])  # the whole suite: every part of it is in it
    if run.tool not in _PATH_TOOLS:
        return command  # a filter, not paths: it cannot be joined with another
    by_path = {_plain(t): t for other in reversed(group) for t in reversed(other.targets)}  # first spelling kept
    targets = list(dict.fromkeys(by_path[_plain(t)] for other in group for t in other.targets))
    outermost = [t for t in targets if not any(other != t and _covers(other, t) for other in targets)]
    # Each path where the first of the paths it covers was.
    kept = dict.fromkeys(next(o for o in outermost if _covers(o, t)) for t in targets)
    return shlex.join([*run.tool.split(), *run.options, *kept])


def _covers(outer: str, inner: str) -> bool:
    """Whether running test path (or Go package pattern) ``outer`` runs ``inner`` too."""
    a, b = _plain(outer), _plain(inner)
    if a.endswith("..."):  # Go: ./pkg/... is pkg and every package below it
        prefix = a[:-3].rstrip("/")
        return prefix in ("", ".") or b == prefix or b.startswith(prefix + "/")
    return b == a or b.startswith(a + "/") or b.startswith(a + "::")


def _plain(path: str) -> str:
    path = path[2:] if path.startswith("./") else path
    return path.rstrip("/") if path not in ("", "/") else path
