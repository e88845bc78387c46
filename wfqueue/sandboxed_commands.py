"""The one place wfqueue runs a command from a plan (a task's verification command).

A plan is written by a model, or by whoever edited its files, so its commands are
untrusted text. :func:`parse_command` decides, without running anything, whether a
command may run: it must start with a known test or build tool (ARTIFACTS §9), it
must be a single command (no ``;``, ``&&``, pipes, redirections, substitutions:
those need a shell, and wfqueue never starts one), and no argument may point outside
the repository. :func:`run_command` then runs the argument list it returned, with
no shell, inside the repository, in its own process group, killed at the timeout.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from wfqueue.errors import BadInputError, UnsafeCommandError
from wfqueue.group_runner import output_tail, run_to_end

# Tools a verification command may start with (ARTIFACTS §9).
KNOWN_TOOLS = ("pytest", "python -m pytest", "python3 -m pytest", "npm", "npx", "jest", "tsc", "eslint", "go test",
               "cargo test", "make", "mvn", "./mvnw", "gradle", "./gradlew", "rake", "bundle exec rake", "rspec",
               "bundle exec rspec", "dotnet test", "phpunit", "vendor/bin/phpunit", "swift test", "sbt")
DEFAULT_COMMAND_TIMEOUT_S = 600.0
# Text that only means something to a shell: chaining, background jobs, pipes, redirection, command and
# variable substitution, and line breaks that start a second command. Quoted, as a shell reads it, only
# substitutions keep their meaning, and only between double quotes: `pytest 'tests/test_a|b.py'` names a file.
_SHELL_SYNTAX = (";", "&", "|", "`", "$(", "${", ">", "<", "\n", "\r")
_SUBSTITUTIONS = ("`", "$(", "${")
# Where a tool hands quoted text to a shell of its own, it is a second command again, not a file's name: make
# evaluates `--eval`/`-E` text and command-line assignments (`SHELL=`, `.SHELLFLAGS=`), npm and npx run `-c` and
# `--call` (`--ca`, a prefix, is the same option). Other tools take quoted `|`, `;`, `&` literally (a regex, a
# filter: `go test -run 'TestA|TestB'`, `dotnet test --filter "A=1&B=2"`).
_SHELLS_OF_TOOLS = {"make": ("-E", "--ev"), "npm": ("-c", "--ca"), "npx": ("-c", "--ca")}
_KILL_GRACE_S = 5.0


class CommandResult(BaseModel):
    argv: list[str]
    exit_code: int | None  # None: killed at the timeout
    timed_out: bool
    seconds: float
    output: str  # stdout and stderr, interleaved, at most the last OUTPUT_LIMIT characters
    missing_program: bool = False  # argv[0] was found neither in the folder nor on PATH: nothing ran


# Why a program a check names may be missing in a worktree though the user's checkout has it.
MISSING_PROGRAM_HINT = ("files the repository ignores (a virtualenv such as .venv, Composer's vendor/, a build's "
                        "output) are not in wfqueue's worktrees: run the check with a tool found on PATH on the "
                        "workers (`python -m pytest`, `npx jest`), in the task's verification (and, for the gate, "
                        "in WFQUEUE_EXECUTE_TEST_COMMAND)")


OUTPUT_LIMIT = 20_000


# Exit status 127 is a shell's "command not found" (an npm script's `sh: jest: not found`); make says it of a recipe.
_RECIPE_NOT_FOUND = re.compile(r"\*\*\* \[[^\]\n]*\] Error 127\b")


def program_missing(result: CommandResult) -> bool:
    """Whether the check could not run at all for a program not found: its own, or one it calls (exit status 127
    from a shell, make's "Error 127"). Another executor run cannot make that program appear."""
    return result.missing_program or result.exit_code == 127 or bool(_RECIPE_NOT_FOUND.search(result.output))


def tool_of(argv: list[str]) -> str | None:
    """The known tool ``argv`` starts with, matching longer names first ("python -m pytest")."""
    for tool in sorted(KNOWN_TOOLS, key=len, reverse=True):
        words = tool.split()
        if argv[: len(words)] == words:
            return tool
    return None


def starts_with_known_tool(command: str) -> bool:
    """Whether the text begins with a known tool, whatever follows it (``pytest; rm -rf ~`` does). Pure."""
    text = command.strip().strip("`").strip()
    return any(re.match(rf"{re.escape(tool)}(?![\w-])", text) for tool in KNOWN_TOOLS)


def _path_values(argument: str) -> list[str]:
    """Everywhere a path can sit in one argument: the argument itself, the value glued to a short option
    (``-C/x``), and every piece between ``=``, ``,`` and ``:`` (``--rootdir=/x``, ``-o cache_dir=/x``,
    ``--override-ini=cache_dir=/x``, ``--cov=src,/etc``, ``--roots=src:../x``)."""
    values = [argument, *re.split(r"[=,:]", argument)]
    if argument.startswith("-") and not argument.startswith("--") and len(argument) > 2:
        values += [argument[2:], *re.split(r"[=,:]", argument[2:])]
    return values


# An environment variable in an argument: no shell expands it here, but tools do (pytest's --junitxml and
# --basetemp, ini overrides), so `--junitxml=$HOME/x.xml` wrote outside the repository. A `$` that starts no name
# (a regex's end, `-run 'TestX$'`) is left alone.
_VARIABLE = re.compile(r"\$[A-Za-z_{]")


def _escapes_repository(argument: str) -> bool:
    """An argument that names a path outside the repository: absolute, home-relative, climbing out, or through
    an environment variable."""
    return _VARIABLE.search(argument) is not None or any(
        value.startswith(("/", "~")) or ".." in Path(value).parts for value in _path_values(argument))


def parse_command(command: str) -> list[str]:
    """The argument list of a verification command, or UnsafeCommandError saying why it will not run. Pure."""
    text = command.strip().strip("`").strip()
    if not text:
        raise UnsafeCommandError("the verification command is empty")
    syntax = shell_syntax(text)
    if syntax is not None:
        shown = {"\n": "a line break", "\r": "a line break"}.get(syntax, repr(syntax))
        raise UnsafeCommandError(f"{command!r} needs a shell ({shown}); wfqueue runs one command, without a shell",
                                 hint="split it into one command per task, or prefix manual steps with 'manual:'")
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UnsafeCommandError(f"{command!r} cannot be split into arguments: {exc}") from None
    if tool_of(argv) is None:
        raise UnsafeCommandError(f"{command!r} does not start with a known test or build tool",
                                 hint=f"start it with one of {', '.join(KNOWN_TOOLS)}")
    scripted = _quoted_script(argv)
    if scripted is not None:
        raise UnsafeCommandError(f"{command!r} needs a shell ({scripted!r} is shell text given to the tool to run); "
                                 "wfqueue runs one command, without a shell",
                                 hint="split it into one command per task, or prefix manual steps with 'manual:'")
    outside = [a for a in argv if _escapes_repository(a)]
    if outside:
        raise UnsafeCommandError(f"{command!r} names a path outside the repository: {', '.join(outside)}",
                                 hint="use paths relative to the repository root")
    return argv


def _quoted_script(argv: list[str]) -> str | None:
    """An argument holding quoted shell syntax that is not text for the tool alone: a line break anywhere, or
    what make or npm give to a shell of their own (_SHELLS_OF_TOOLS): `make --eval='x:;cmd'`, `make -sE ...`,
    `make 'SHELL=...'`, `npm exec -c 'a; b'`. None when there is none."""
    short, long = _SHELLS_OF_TOOLS.get(argv[0], ("", ""))
    for before, argument in zip(["", *argv], argv, strict=False):
        if not any(syntax in argument for syntax in _SHELL_SYNTAX):
            continue
        if "\n" in argument or "\r" in argument:
            return argument
        if not short:
            continue
        option = argument.split("=", 1)[0]
        takes_it = before.startswith(long) and "=" not in before  # `--eval X`, where `--eval=X` is the argument
        grouped = _short_group_with(option, short) or _short_group_with(before.split("=", 1)[0], short)  # -sE X
        assignment = argv[0] == "make" and "=" in argument and not argument.startswith("-")  # SHELL=...
        if argument.startswith(long) or takes_it or grouped or assignment:
            return argument
    return None


def _short_group_with(argument: str, letter_option: str) -> bool:
    """Whether ``argument`` is a group of short options holding ``letter_option``'s letter (`-sE` holds `-E`)."""
    return argument.startswith("-") and not argument.startswith("--") and letter_option[1] in argument[1:]


def shell_syntax(text: str) -> str | None:
    """The first piece of ``text`` that means something to a shell where it stands (_SHELL_SYNTAX; outside quotes,
    or a substitution between double quotes), or None. Pure."""
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\" and i + 1 < len(text) and text[i + 1] not in "\n\r":
            i += 1  # an escaped character is itself, in a shell as in shlex
        elif quote == '"' and ch == '"':
            quote = ""
        elif not quote and ch in "'\"":
            quote = ch
        else:
            found = next((s for s in (_SUBSTITUTIONS if quote else _SHELL_SYNTAX) if text.startswith(s, i)), None)
            if found is not None:
                return found
        i += 1
    return None


def refusal(command: str) -> UnsafeCommandError | None:
    """Why ``command`` will not run, or None when it will. Pure."""
    try:
        parse_command(command)
    except UnsafeCommandError as refused:
        return refused
    return None


def code_first(folder: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the Python code of ``folder`` (a worktree's project) first on the import path: its
    ``src/`` and the folder itself, before any PYTHONPATH already set. A project installed in editable mode
    (``pip install -e .``) is imported from the user's checkout, where the install points: a task's verification
    and the gate tested that checkout instead of the worktree's change, and a broken change merged green."""
    first = [str(folder / "src")] if (folder / "src").is_dir() else []
    first.append(str(folder))
    return {**environ, "PYTHONPATH": os.pathsep.join([*first, *filter(None, [environ.get("PYTHONPATH")])])}


def run_command(argv: list[str], repo: Path, timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S) -> CommandResult:
    """Run ``argv`` (from :func:`parse_command`) inside ``repo``: no shell, no input, killed with its
    children at ``timeout_s``, with ``repo``'s Python code first on the import path (:func:`code_first`).

    The result comes when the command itself exits: what it started and left running in its process group (a
    test's server fixture never stopped) is killed then, and a process that left the group still holds
    nothing the result waits for. Output goes to a file, not a pipe, so that an inherited copy of the pipe
    cannot keep the runner waiting, and only its tail is read back (a test printing gigabytes costs disk
    until the command ends, not memory)."""
    if not repo.is_dir():
        raise BadInputError(f"cannot run {shlex.join(argv)}: {repo} is not a directory")
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        try:
            code = run_to_end(argv, repo, timeout_s=timeout_s, output=output, grace_s=_KILL_GRACE_S,
                              env=code_first(repo, os.environ))
        except FileNotFoundError:
            return CommandResult(argv=argv, exit_code=127, timed_out=False, missing_program=True,
                                 seconds=round(time.monotonic() - started, 3),
                                 output=f"{argv[0]}: not found in {repo} nor on PATH ({MISSING_PROGRAM_HINT})")
        return CommandResult(argv=argv, exit_code=code, timed_out=code is None,
                             seconds=round(time.monotonic() - started, 3), output=output_tail(output, OUTPUT_LIMIT))
