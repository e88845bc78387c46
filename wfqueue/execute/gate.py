"""The gate: the test commands run on the integration branch after each wave.

``execute_test_command`` when it is set; else the plan's own verification commands, keeping only those the
sandboxed command runner will run (a known test or build tool, no shell, nothing outside the repository): a
manual check cannot gate anything. The commands of one test runner that takes several test paths (pytest,
RSpec, ``go test``) with the same options become one, which collects and starts once, and a path another of
them covers is run once (``tests/test_a.py`` covers ``tests/test_a.py::test_x``, ``./pkg/...`` covers
``./pkg/cache``). A command without paths is kept as it is: what it runs is the project's configuration's
to say (pytest's ``testpaths``), not the gate's. Pure.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable
from typing import NamedTuple

from wfqueue.execute.model import ExecTask
from wfqueue.sandboxed_commands import refusal, tool_of

# Tools whose arguments, options aside, are test paths (or Go packages), several to a run.
_PATH_TOOLS = frozenset({"pytest", "python -m pytest", "python3 -m pytest", "rspec", "bundle exec rspec", "go test"})
# Options known to take no value: any other option might take the next argument as its value, which must not
# be read as a test path (`-k expr`, `-m slow`, `-run TestX`); a command with one is kept as it is.
_FLAGS = frozenset({"-q", "-qq", "-v", "-vv", "-vvv", "-x", "-s", "-l", "-ra", "-rA", "-rf", "--quiet", "--verbose",
                    "--exitfirst", "--showlocals", "--no-header", "--strict-markers", "-race", "-short", "-failfast",
                    "--fail-fast"})
_ATTACHED_VALUE = re.compile(r"^--?[\w-]+=\S")  # --tb=short, -count=1
# What narrows a test file to part of it: a pytest node id (::test_x), an RSpec line (:42) or example id ([1:2]).
_WITHIN_FILE = re.compile(r"(?:::|:\d|\[)")


class _PathRun(NamedTuple):
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


def runnable_on(commands: list[str], exists: Callable[[str], bool]) -> list[str]:
    """``commands`` as they can run on a tree where ``exists`` answers for a path: a pytest or RSpec run, or the
    files an npm test script is given after ``--`` (Jest, Vitest), keeps the test files and folders that are
    there, and goes when none is (a later task creates them: "No tests found" failed the gate of every wave
    before); any other command is kept as it is."""
    out: list[str] = []
    for command in commands:
        run = _path_run(command) or _npm_files_run(command)
        if run is None or run.tool == "go test":
            out.append(command)
            continue
        there = tuple(t for t in run.targets if exists(_file_of(t)))
        if there:
            out.append(shlex.join([*run.tool.split(), *run.options, *there]))
    return out


# npm forwards what follows "--" to the test script's runner (wfqueue.analysis.testmap.command_for_tests).
_NPM_TEST = (("npm", "test", "--"), ("npm", "run", "test", "--"))


def _npm_files_run(command: str) -> _PathRun | None:
    """``npm test -- a.test.ts b.test.ts``: its files (names with an extension), as a path run; None for any other
    command, or one passing its runner an option (its value could be read as a file)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    prefix = next((p for p in _NPM_TEST if tuple(argv[:len(p)]) == p), None)
    if prefix is None:
        return None
    targets = tuple(argv[len(prefix):])
    if not targets or any(t.startswith("-") or "." not in posixpath.basename(t) for t in targets):
        return None
    return _PathRun(" ".join(prefix), (), targets)


def combined(commands: list[str]) -> list[str]:
    """``commands`` with the path runs of one tool and options joined (the module's docstring), each in the place
    of the first of them."""
    runs = {command: _path_run(command) for command in commands}
    groups: dict[tuple[str, tuple[str, ...]], list[_PathRun]] = {}
    for run in runs.values():
        if run is not None:
            groups.setdefault((run.tool, run.options), []).append(run)
    out: list[str] = []
    for command in commands:
        run = runs[command]
        joined = command if run is None else _joined(run.tool, run.options, groups[(run.tool, run.options)])
        for one in [joined] if joined is not None else [command]:
            if one not in out:
                out.append(one)
    return out


def _path_run(command: str) -> _PathRun | None:
    """A command of a path tool as its tool, options and paths; None for any other (kept as it is)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    tool = tool_of(argv)
    if tool not in _PATH_TOOLS:
        return None
    rest = argv[len(tool.split()):]
    options = tuple(a for a in rest if a.startswith("-"))
    targets = tuple(a for a in rest if not a.startswith("-"))
    if not targets or any(a not in _FLAGS and not _ATTACHED_VALUE.match(a) for a in options):
        return None
    return _PathRun(tool, options, targets)


def _joined(tool: str, options: tuple[str, ...], group: list[_PathRun]) -> str | None:
    """One command for the runs of ``group``; None where they must stay apart: pytest run on two test files of one
    name in different folders stops at collection ("import file mismatch") unless the folders are packages."""
    spelled: dict[str, str] = {}  # one spelling per target ("./tests/" and "tests" are one folder): the first
    for target in (t for run in group for t in run.targets):
        spelled.setdefault(_plain(target), target)
    targets = list(spelled.values())
    outermost = [t for t in targets if not any(o != t and _covers(tool, o, t) for o in targets)]
    # Each path where the first of the paths it covers was.
    kept = list(dict.fromkeys(next(o for o in outermost if o == t or _covers(tool, o, t)) for t in targets))
    names = [posixpath.basename(_file_of(t)) for t in kept if _file_of(t).endswith(".py")]
    if len(names) != len(set(names)):
        return None
    return shlex.join([*tool.split(), *options, *kept])


def _file_of(target: str) -> str:
    """The file, folder or package a test target names, without what narrows it to part of a file."""
    found = _WITHIN_FILE.search(target)
    return _plain(target[: found.start()] if found else target)


def _covers(tool: str, outer: str, inner: str) -> bool:
    """Whether running test target ``outer`` runs all of ``inner`` (another target): the file ``inner`` narrows,
    a folder above it (pytest and RSpec run a folder's files below it), or a Go pattern reaching its package
    (``./pkg/...``: pkg and every package below; ``./pkg`` alone is pkg only)."""
    if _WITHIN_FILE.search(outer):
        return False  # part of a file covers no other target (the same one is spelled once)
    a, b = _plain(outer), _file_of(inner)
    if tool == "go test":
        prefix = a[:-3].rstrip("/") if a.endswith("...") else None
        return prefix is not None and (prefix in ("", ".") or b == prefix or b.startswith(prefix + "/"))
    return b == a or ("." not in posixpath.basename(a) and b.startswith(a + "/"))


def _plain(path: str) -> str:
    path = path[2:] if path.startswith("./") else path
    return path.rstrip("/") if path not in ("", "/") else path
