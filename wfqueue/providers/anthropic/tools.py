"""Read-only repository tools for the exploration loop: list, glob, grep, read.

Every path the model names is relative to the repository root. Absolute paths,
``..`` components and symlinks that resolve outside the root are refused; walks
never follow symlinked directories. Outputs are capped (bytes per read, matches
per grep, entries per listing) so one tool call cannot flood the context.
A refused or failed call raises :class:`ToolError`; the loop sends its message
back to the model as an ``is_error`` tool result.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from wfqueue.analysis.files import repository_files, skipped_dir
from wfqueue.errors import ToolError
from wfqueue.fsio import real_path

__all__ = ["TOOL_DEFINITIONS", "RepoTools", "ToolError", "glob_to_regex"]

MAX_LINE_CHARS = 300
MAX_PATTERN_CHARS = 500
GREP_TIME_S = 30.0  # the matching of one grep call, over all its files, at most
BINARY_SNIFF_BYTES = 8192

TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "list",
        "description": "List the entries of one directory of the repository (not recursive). "
                       "Directories end with '/'. Paths are relative to the repository root; '.' is the root.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Directory relative to the root (default '.')"}},
            "additionalProperties": False,
        },
    },
    {
        "name": "glob",
        "description": "Find files by glob pattern relative to the repository root, e.g. 'src/**/*.py'. "
                       "'**' spans directories; a pattern without '/' matches file names at any depth.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
            "additionalProperties": False,
        },
    },
    {
        "name": "grep",
        "description": "Search file contents with a Python regular expression, line by line. "
                       "Answers 'path:line: text'. Optionally restrict to a directory or file (path) "
                       "and to files matching a glob (include).",
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string", "description": "Directory or file relative to the root (default '.')"},
                "include": {"type": "string", "description": "Glob the file paths must match, e.g. '**/*.py'"},
                "ignore_case": {"type": "boolean"},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    },
    {
        "name": "read",
        "description": "Read a text file with line numbers. Long files are cut; continue with start_line.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer", "description": "First line to show, 1-based (default 1)"},
                "max_lines": {"type": "integer", "description": "Most lines to show (default: up to the byte cap)"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
]


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """A glob over '/'-separated paths: ``**`` spans directories, ``*`` and ``?`` do not."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 1:]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1:end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class RepoTools:
    """The four tools over one repository root."""

    def __init__(self, root: str | Path, *, max_read_bytes: int = 32_000, max_grep_matches: int = 100,
                 max_list_entries: int = 300, max_file_bytes: int = 1_000_000,
                 grep_time_s: float = GREP_TIME_S) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise ToolError(f"{root} is not a directory")
        self.max_read_bytes = max_read_bytes
        self.max_grep_matches = max_grep_matches
        self.max_list_entries = max_list_entries
        self.max_file_bytes = max_file_bytes
        self.grep_time_s = grep_time_s

    # -- confinement ------------------------------------------------------------------

    def resolve(self, rel: str) -> Path:
        """The real path of ``rel`` inside the root, or ToolError."""
        if not isinstance(rel, str) or "\x00" in rel:
            raise ToolError("path must be a string without NUL characters")
        rel = rel.strip() or "."
        if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or PureWindowsPath(rel).drive \
                or rel.startswith(("/", "\\", "~")):
            raise ToolError(f"refused {rel!r}: paths must be relative to the repository root")
        parts = re.split(r"[\\/]+", rel)
        if ".." in parts:
            raise ToolError(f"refused {rel!r}: '..' is not allowed")
        target = real_path(self.root / Path(*parts))
        if not self._inside(target):
            raise ToolError(f"refused {rel!r}: it resolves outside the repository")
        return target

    def _inside(self, path: Path) -> bool:
        return path == self.root or path.is_relative_to(self.root)

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def walk_files(self, start: Path | None = None) -> Iterator[tuple[str, Path]]:
        """(repo-relative path, real path) of every file of the repository (wfqueue.analysis.files: in a git
        working tree, none git ignores, none of a submodule) under ``start``, sorted (outside git: folder by
        folder), symlinks leaving the root skipped; symlinked directories are never followed."""
        prefix = "" if start is None or start == self.root else self._rel(start) + "/"
        for rel in repository_files(self.root):  # listed at each call: a coding agent's writes are seen
            if not rel.startswith(prefix):
                continue
            path = self.root / rel
            real = real_path(path) if path.is_symlink() else path
            if self._inside(real) and real.is_file():
                yield rel, real

    # -- the tools ------------------------------------------------------------------

    def list(self, path: str = ".") -> str:
        target = self.resolve(path)
        if not target.is_dir():
            raise ToolError(f"{path!r} is not a directory")
        entries: list[str] = []
        # A folder the walk skips (a virtual environment, build/) is listed when the repository has files in it (a
        # package git tracks as build/): as glob and grep see it.
        held = {rel.split("/", 1)[0] for rel in repository_files(target)}
        for child in sorted(target.iterdir(), key=lambda p: p.name):
            if child.is_dir() and skipped_dir(child.name) and child.name not in held:
                continue
            real = real_path(child)
            if not self._inside(real):
                continue
            entries.append(child.name + "/" if real.is_dir() else child.name)
        shown = entries[: self.max_list_entries]
        text = "\n".join(shown) if shown else "(empty directory)"
        if len(entries) > len(shown):
            text += f"\n[{len(entries) - len(shown)} more entries not shown]"
        return text

    def glob(self, pattern: str) -> str:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS:
            raise ToolError("pattern must be 1 to 500 characters")
        if pattern.startswith(("/", "\\")) or ".." in re.split(r"[\\/]+", pattern):
            raise ToolError(f"refused {pattern!r}: patterns are relative to the repository root, without '..'")
        regex = glob_to_regex(pattern)
        by_name = "/" not in pattern
        found = [rel for rel, _ in self.walk_files() if regex.match(rel.rsplit("/", 1)[-1] if by_name else rel)]
        shown = found[: self.max_list_entries]
        text = "\n".join(shown) if shown else f"no files match {pattern!r}"
        if len(found) > len(shown):
            text += f"\n[{len(found) - len(shown)} more files not shown]"
        return text

    def grep(self, pattern: str, path: str = ".", include: str | None = None, ignore_case: bool = False) -> str:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS:
            raise ToolError("pattern must be 1 to 500 characters")
        # The model's pattern is matched with the `regex` package, not `re`: it backtracks less, and its search
        # takes a time limit. `(\w+\s?)*\(` held a worker at full CPU for good on one README line (the threads
        # pool, where remote agents run, enforces no Celery time limit). Imported here: 10 ms a node's start
        # would wait for, before its first model call.
        import regex

        try:
            compiled = regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
        except (regex.error, ValueError, OverflowError) as exc:
            raise ToolError(f"invalid regular expression: {exc}") from None
        matching_left = self.grep_time_s  # matching alone: reading a large or cold repository is not the pattern's
        target = self.resolve(path)
        files = [(self._rel(target), target)] if target.is_file() else list(self.walk_files(target))
        include_re = glob_to_regex(include) if include else None
        matches: list[str] = []
        more = False
        for rel, real in files:
            if include_re and not include_re.match(rel if "/" in (include or "") else rel.rsplit("/", 1)[-1]):
                continue
            text = self._text(real, limit=self.max_file_bytes, quiet=True)
            if text is None:
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                began = time.monotonic()
                try:
                    if matching_left <= 0:  # spent on earlier lines
                        raise TimeoutError
                    found = compiled.search(line, timeout=matching_left)
                except TimeoutError:
                    raise ToolError(
                        f"matching the pattern took more than {self.grep_time_s:g} s (stopped at {rel}:{number}): "
                        "simplify it (a repetition nested in a repetition backtracks without end), or narrow the "
                        "path") from None
                matching_left -= time.monotonic() - began
                if found:
                    if len(matches) >= self.max_grep_matches:
                        more = True
                        break
                    matches.append(f"{rel}:{number}: {line[:MAX_LINE_CHARS]}")
            if more:
                break
        if not matches:
            return f"no matches for {pattern!r}"
        if more:
            matches.append(f"[stopped after {self.max_grep_matches} matches; narrow the pattern or the path]")
        return "\n".join(matches)

    def read(self, path: str, start_line: int = 1, max_lines: int | None = None) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file")
        text = self._text(target, limit=self.max_file_bytes)
        assert text is not None
        lines = text.splitlines()
        start = max(1, int(start_line))
        if start > max(len(lines), 1):
            raise ToolError(f"{path!r} has {len(lines)} lines; start_line {start} is past the end")
        end = len(lines) if max_lines is None else min(len(lines), start - 1 + max(1, int(max_lines)))
        out: list[str] = []
        used = 0
        for number in range(start, end + 1):
            row = f"{number:>5}\t{lines[number - 1][:2000]}"
            used += len(row.encode("utf-8")) + 1
            if used > self.max_read_bytes:
                out.append(f"[cut at {self.max_read_bytes} bytes; continue with start_line={number}]")
                break
            out.append(row)
        else:
            if end < len(lines):
                out.append(f"[{len(lines) - end} more lines; continue with start_line={end + 1}]")
        return "\n".join(out) if out else "(empty file)"

    def _text(self, path: Path, *, limit: int, quiet: bool = False) -> str | None:
        try:
            size = path.stat().st_size
            if size > limit:
                if quiet:
                    return None
                raise ToolError(f"{self._rel(path)} is {size} bytes, above the {limit}-byte limit; use grep")
            data = path.read_bytes()
        except OSError as exc:
            if quiet:
                return None
            raise ToolError(f"cannot read {self._rel(path)}: {exc.strerror}") from None
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            if quiet:
                return None
            raise ToolError(f"{self._rel(path)} is a binary file")
        return data.decode("utf-8", errors="replace")

    # -- dispatch and summary ------------------------------------------------------------

    def run(self, name: str, arguments: object) -> tuple[str, bool]:
        """Run one tool call: (text, is_error). Never raises for bad input from the model."""
        if not isinstance(arguments, dict):
            return "tool input must be a JSON object", True
        try:
            if name == "list":
                return self.list(str(arguments.get("path", "."))), False
            if name == "glob":
                return self.glob(str(arguments.get("pattern", ""))), False
            if name == "grep":
                include = arguments.get("include")
                return self.grep(str(arguments.get("pattern", "")), str(arguments.get("path", ".")),
                                 str(include) if include else None, bool(arguments.get("ignore_case", False))), False
            if name == "read":
                max_lines = arguments.get("max_lines")
                return self.read(str(arguments.get("path", "")), int(arguments.get("start_line", 1) or 1),
                                 int(max_lines) if max_lines is not None else None), False
            return f"unknown tool {name!r}; use list, glob, grep or read", True
        except ToolError as exc:
            return str(exc), True
        except (TypeError, ValueError) as exc:
            return f"bad arguments for {name}: {exc}", True

    def summary(self, max_files: int = 400) -> str:
        """A stable listing of the repository (path and size), for the shared prompt prefix."""
        rows: list[str] = []
        total = 0
        for rel, real in self.walk_files():
            total += 1
            if len(rows) < max_files:
                try:
                    rows.append(f"{rel} ({real.stat().st_size} B)")
                except OSError:
                    rows.append(rel)
        if total > len(rows):
            rows.append(f"[{total - len(rows)} more files not listed; use the tools to look further]")
        return "\n".join(rows) if rows else "(no files)"
