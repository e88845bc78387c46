"""The coding executor's tools: read, list, glob and grep, plus edit, write and run-a-command.

The read-only four are the planning tools (wfqueue.providers.anthropic.tools.RepoTools) under the
names a coding model expects. Every path is relative to the worktree: absolute paths, ``..`` and
symlinks that resolve outside it are refused, and nothing under ``.git`` may be written (a task's
commit is made by wfqueue, not by the model). ``run_command`` goes through the sandboxed command
runner: one known test or build tool, no shell, inside the worktree, killed at its timeout.

A refused or failed call is never an exception for the loop: :meth:`CodingTools.run` answers
(text, is_error) and the text tells the model what to do instead.

Edits are safe to apply twice. A loop that dies after running a turn's tools but before saving
their results runs that turn's tool calls again on restart (wfqueue.execute.claude_executor);
``write_file`` then writes the same bytes, and an ``edit_file`` whose old text is gone but whose
new text is there once reports the edit as already applied instead of failing.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path
from typing import Any

from wfqueue.errors import ToolError, UnsafeCommandError
from wfqueue.providers.anthropic.tools import RepoTools
from wfqueue.sandboxed_commands import KNOWN_TOOLS, parse_command, run_command

__all__ = ["CODING_TOOL_DEFINITIONS", "CodingTools"]

MAX_COMMAND_OUTPUT = 12_000  # characters of a command's output sent back (its tail: failures print last)

_PATH = {"type": "string", "description": "Path relative to the worktree root"}
CODING_TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a text file with line numbers (the numbers are not part of the file). Long files are "
                       "cut; continue with start_line.",
        "input_schema": {
            "type": "object",
            "properties": {"path": _PATH, "start_line": {"type": "integer", "description": "1-based (default 1)"},
                           "max_lines": {"type": "integer"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    {
        "name": "list_dir",
        "description": "List one directory (not recursive); directories end with '/'. '.' is the worktree root.",
        "input_schema": {"type": "object", "properties": {"path": _PATH}, "additionalProperties": False},
    },
    {
        "name": "glob",
        "description": "Find files by glob pattern, e.g. 'src/**/*.py'; a pattern without '/' matches file names at "
                       "any depth.",
        "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"],
                         "additionalProperties": False},
    },
    {
        "name": "grep",
        "description": "Search file contents with a Python regular expression; answers 'path:line: text'. "
                       "Optionally restrict to a directory or file (path) and to a glob (include).",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": _PATH, "include": {"type": "string"},
                           "ignore_case": {"type": "boolean"}},
            "required": ["pattern"],
            "additionalProperties": False,
        },
    },
    {
        "name": "edit_file",
        "description": "Replace one exact piece of a file: old_string must occur exactly once in the file (copy it "
                       "from read_file without the line numbers, whitespace included; add surrounding lines to "
                       "make it unique). new_string replaces it.",
        "input_schema": {
            "type": "object",
            "properties": {"path": _PATH, "old_string": {"type": "string"}, "new_string": {"type": "string"}},
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": False,
        },
    },
    {
        "name": "write_file",
        "description": "Create a file, or replace a whole file, with content. Missing directories are created. "
                       "Prefer edit_file for changes to an existing file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": _PATH, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
    {
        "name": "run_command",
        "description": "Run one test or build command inside the worktree, without a shell (no pipes, ';', '&&' or "
                       f"redirections), e.g. 'python -m pytest -q tests/test_x.py'. It must start with one of: "
                       f"{', '.join(KNOWN_TOOLS)}. Answers the exit status and the end of the output.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"],
                         "additionalProperties": False},
    },
]


class CodingTools:
    """The seven tools over one worktree."""

    def __init__(self, worktree: str | Path, *, command_timeout_s: float = 300.0, max_write_bytes: int | None = None,
                 **read_caps: int) -> None:
        self.repo = RepoTools(worktree, **read_caps)
        self.root = self.repo.root
        self.command_timeout_s = command_timeout_s
        # No larger than what read_file reads back (max_file_bytes): a file the model wrote and could not read
        # again would be out of its reach for the rest of the task.
        self.max_write_bytes = max_write_bytes if max_write_bytes is not None else self.repo.max_file_bytes

    # -- confinement for writes ------------------------------------------------------------

    def writable(self, rel: str) -> Path:
        """The real path ``rel`` names for writing, or ToolError: inside the worktree, outside ``.git``."""
        target = self.repo.resolve(rel)  # refuses absolute paths, '..' and symlinks leading out
        if target == self.root:
            raise ToolError(f"refused {rel!r}: that is the worktree root, not a file")
        parts = target.relative_to(self.root).parts
        if any(part.lower() == ".git" for part in parts):
            raise ToolError(f"refused {rel!r}: files under .git are not edited by tools; wfqueue commits the "
                            "worktree when the task is done")
        if target.is_dir():
            raise ToolError(f"refused {rel!r}: it is a directory")
        return target

    # -- the writing tools -------------------------------------------------------------------

    def edit_file(self, path: str, old_string: str, new_string: str) -> str:
        target = self.writable(path)
        if not target.is_file():
            raise ToolError(f"{path!r} does not exist; create it with write_file")
        if not old_string:
            raise ToolError("old_string is empty; give the exact text to replace, or use write_file for a new file")
        if old_string == new_string:
            raise ToolError("old_string and new_string are the same; nothing to change")
        text = self._read_text(target, path)
        count = text.count(old_string)
        if count == 0:
            if new_string and text.count(new_string) == 1:
                # The same edit was applied already (a restarted turn runs its tool calls again).
                return f"no change: {path} already contains new_string once and old_string no longer; " \
                       "the edit is already applied"
            raise ToolError(f"old_string was not found in {path}; read_file it again and copy the exact text "
                            "(without line numbers, with its whitespace and indentation)")
        if count > 1:
            raise ToolError(f"old_string occurs {count} times in {path}; include more of the surrounding lines "
                            "so that it occurs exactly once")
        self._write_text(target, text.replace(old_string, new_string, 1))
        return f"edited {path}: replaced 1 occurrence ({old_string.count(chr(10)) + 1} lines with " \
               f"{new_string.count(chr(10)) + 1})"

    def write_file(self, path: str, content: str) -> str:
        size = len(content.encode("utf-8"))
        if size > self.max_write_bytes:
            raise ToolError(f"content is {size} bytes, above the {self.max_write_bytes}-byte limit of write_file")
        target = self.writable(path)
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        self._write_text(target, content)
        return f"{'replaced' if existed else 'created'} {path} ({size} bytes)"

    def run_command(self, command: str) -> tuple[str, bool]:
        try:
            argv = parse_command(command)
        except UnsafeCommandError as refused:
            hint = f" ({refused.hint})" if refused.hint else ""
            return f"refused: {refused.message}{hint}", True
        result = run_command(argv, self.root, timeout_s=self.command_timeout_s)
        output = result.output[-MAX_COMMAND_OUTPUT:]
        if result.timed_out:
            return (f"$ {shlex.join(argv)}\nkilled after {self.command_timeout_s:.0f}s (the timeout); "
                    f"run something narrower\n{output}"), True
        return f"$ {shlex.join(argv)}\nexit status {result.exit_code} ({result.seconds}s)\n{output}", \
            result.exit_code != 0

    # -- dispatch ----------------------------------------------------------------------------

    def run(self, name: str, arguments: object) -> tuple[str, bool]:
        """Run one tool call: (text, is_error). Never raises for bad input from the model."""
        if not isinstance(arguments, dict):
            return "tool input must be a JSON object", True
        args: dict[str, Any] = arguments
        try:
            if name == "read_file":
                return self.repo.run("read", args)
            if name == "list_dir":
                return self.repo.run("list", args)
            if name in ("glob", "grep"):
                return self.repo.run(name, args)
            if name == "edit_file":
                return self.edit_file(_text_arg(args, "path"), _text_arg(args, "old_string"),
                                      _text_arg(args, "new_string")), False
            if name == "write_file":
                return self.write_file(_text_arg(args, "path"), _text_arg(args, "content")), False
            if name == "run_command":
                return self.run_command(_text_arg(args, "command"))
            return f"unknown tool {name!r}; use one of {', '.join(t['name'] for t in CODING_TOOL_DEFINITIONS)}", True
        except ToolError as exc:
            return str(exc), True
        except OSError as exc:
            return f"{name} failed: {exc.strerror or exc}", True

    def edit_digests(self, arguments: object) -> tuple[str | None, str | None]:
        """Digests of the file an ``edit_file`` call changes: as it is now, and as the edit would leave it (None:
        no such file, input the call would refuse, or an edit that would not apply). Taken before the edit runs,
        they tell a restarted turn whether it ran: an edit that inserts text after an anchor keeps the anchor, so
        the text alone cannot tell; and a worktree made afresh (another worker, without the first one's disk)
        holds neither, so the edit runs rather than be taken for done."""
        if not isinstance(arguments, dict) or not all(isinstance(arguments.get(k), str)
                                                      for k in ("path", "old_string", "new_string")):
            return None, None
        try:
            target = self.writable(arguments["path"])
            if not target.is_file():
                return None, None
            text = self._read_text(target, arguments["path"])
        except (ToolError, OSError):
            return None, None
        now = hashlib.sha256(text.encode("utf-8")).hexdigest()
        old, new = arguments["old_string"], arguments["new_string"]
        if not old or text.count(old) != 1:
            return now, None
        return now, hashlib.sha256(text.replace(old, new, 1).encode("utf-8")).hexdigest()

    # -- files -------------------------------------------------------------------------------

    def _read_text(self, target: Path, shown: str) -> str:
        if target.stat().st_size > self.max_write_bytes:
            raise ToolError(f"{shown} is larger than {self.max_write_bytes} bytes; edit_file does not change it")
        try:
            # newline="": line endings are kept as they are, so an edit changes only what it replaces.
            with target.open(encoding="utf-8", newline="") as handle:
                return handle.read()
        except UnicodeDecodeError:
            raise ToolError(f"{shown} is not UTF-8 text; edit_file changes text files only") from None

    @staticmethod
    def _write_text(target: Path, text: str) -> None:
        with target.open("w", encoding="utf-8", newline="") as handle:
            handle.write(text)


def _text_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f"{name} is required and must be a string")
    return value
