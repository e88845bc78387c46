"""Discovery of the text source files of a repository.

This is one of only two places in the package that reads the filesystem (the
other is ``index.build_index``, which calls this).  Everything downstream works
on the ``(SourceFile, text)`` pairs returned here, which keeps the rest pure and
easy to test.

In a git working tree the files are those git shows: tracked, or untracked and not
ignored. Files git ignores (generated code, a local build) and a submodule's files
are not the repository's own: a plan that changed them could not be executed
(execution commits to the repository's branches, from HEAD).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel

from wfqueue.errors import NoSourceCodeError, WfqueueError
from wfqueue.gitcmd import run_git

# Directories that never hold the project's own sources: VCS metadata, virtual
# environments, caches and build output.  Walking them would be slow and would
# drown ranking in vendored or generated code.
SKIP_DIRS: frozenset[str] = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".workflow",
        ".venv",
        "venv",
        "env",
        "node_modules",
        "__pycache__",
        "dist",
        "build",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".idea",
        ".vscode",
        "site-packages",
    }
)
SKIP_DIR_SUFFIXES: tuple[str, ...] = (".egg-info",)
DEFAULT_MAX_FILE_BYTES = 512 * 1024  # bytes: larger files are left out of the index (WFQUEUE_INDEX_MAX_FILE_BYTES)
# Text files the index reads, in path order (WFQUEUE_INDEX_MAX_FILES): past them a repository's files are not
# planned, and a plan command says so (wfqueue.workflow.base). Every planning process holds the index: about
# 450 MB at 20 000 files of 2 KB, 2.5-2.9 GB at 50 000 (measured building and loading it).
DEFAULT_MAX_INDEXED_FILES = 20_000

# How many leading bytes are sniffed for NUL; the same heuristic git uses.
_BINARY_SNIFF_BYTES = 8 * 1024

_EXTENSION_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".rb": "ruby",
    ".rake": "ruby",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".swift": "swift",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".cs": "csharp",
    ".php": "php",
    ".lua": "lua",
    ".pl": "perl",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".sql": "sql",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".scss": "css",
    ".vue": "vue",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
    ".txt": "text",
}
_FILENAME_LANGUAGES: dict[str, str] = {
    "Dockerfile": "dockerfile",
    "Makefile": "makefile",
    "Gemfile": "ruby",
    "Rakefile": "ruby",
    "CMakeLists.txt": "cmake",
}

# Folders whose files are all tests, whatever their names. Deliberately small: names such as "spec" or
# "testing" are too often real source packages.
TEST_DIRS: frozenset[str] = frozenset({"tests", "test", "__tests__"})
# Folders a test tree may be rooted at: those, and RSpec's spec/ (its files' names say which are tests).
TEST_ROOTS: frozenset[str] = TEST_DIRS | {"spec"}
# Folders holding tests and their helpers only, when a project keeps its tests there (its spec helpers too).
TEST_FOLDERS: frozenset[str] = TEST_ROOTS | {"specs"}
_TEST_NAME_MARKERS: tuple[str, ...] = (".test.", ".spec.")
_TEST_STEM_SUFFIXES: tuple[str, ...] = ("_test", "_tests", "_spec")
_JAVA_TEST_SUFFIXES: tuple[str, ...] = ("Test", "Tests", "IT")
# Languages whose test files are named after their test class (FooTest.kt, FooTests.cs, FooTests.swift,
# FooTest.php); a Scala or Spock "FooSpec" counts in a test folder only (javapoet's TypeSpec is code).
_CLASS_TEST_EXTENSIONS: frozenset[str] = frozenset({".java", ".kt", ".cs", ".swift", ".php", ".scala", ".groovy"})
# A folder holding a .NET or Swift test project: "Foo.Tests", "Foo.UnitTests", "FooTests" (beside "Sources").
_TEST_PROJECT_SUFFIXES: tuple[str, ...] = (".Tests", ".Test", ".UnitTests", ".IntegrationTests", "Tests")


class SourceFile(BaseModel):
    """One text file of the repository, as seen by the planner."""

    path: str  # POSIX, relative to the repository root
    language: str
    size: int  # bytes on disk
    line_count: int
    is_test: bool


def language_for(path: str) -> str:
    """Language name for a POSIX path, from its file name or extension."""
    name = posixpath.basename(path)
    if name in _FILENAME_LANGUAGES:
        return _FILENAME_LANGUAGES[name]
    ext = posixpath.splitext(name)[1].lower()
    return _EXTENSION_LANGUAGES.get(ext, "text")


def is_test_path(path: str) -> bool:
    """True for files that are tests by their location or naming convention."""
    parts = path.split("/")
    name = parts[-1]
    class_named = posixpath.splitext(name)[1].lower() in _CLASS_TEST_EXTENSIONS
    if any(part in TEST_DIRS for part in parts[:-1]):
        return True
    # Swift's Tests/ and a .NET test project's folder (Foo.Tests/), for the languages that use them.
    if class_named and any(part == "Tests" or (part.endswith(_TEST_PROJECT_SUFFIXES) and part != "Tests")
                              for part in parts[:-1]):
        return True
    stem = name.split(".", 1)[0]
    if name == "conftest.py" or (name.startswith("test_") and "." in name):
        return True
    if any(marker in name for marker in _TEST_NAME_MARKERS):
        return True
    if stem.endswith(_TEST_STEM_SUFFIXES) and stem not in _TEST_STEM_SUFFIXES:
        return True
    return class_named and stem.endswith(_JAVA_TEST_SUFFIXES) and stem not in _JAVA_TEST_SUFFIXES


def count_lines(text: str) -> int:
    """Lines as an editor shows them: a final line without newline counts."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def skipped_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(SKIP_DIR_SUFFIXES)


def _read_text(path: Path, max_bytes: int) -> tuple[str, int] | None:
    """The file's text and byte size, or None when too big, binary or unreadable."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        with path.open("rb") as handle:
            # Read one byte past the limit: the file may have grown since stat.
            data = handle.read(max_bytes + 1)
    except OSError:
        return None
    if len(data) > max_bytes or b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        return None
    try:
        # utf-8-sig drops a BOM, which would otherwise break ast.parse.
        return data.decode("utf-8-sig"), len(data)
    except UnicodeDecodeError:
        # Replacement characters would make edits to the file lossy: skip it.
        return None


# The languages whose files are code to plan against (not configuration, markup or shell scripts).
CODE_LANGUAGES = frozenset({"python", "javascript", "typescript", "go", "rust", "java", "ruby", "csharp", "kotlin",
                            "php", "swift", "scala"})


def _code_sizes(repo: Path) -> Iterator[int]:
    """The size of each file in one of CODE_LANGUAGES among those the index reads, as found (a file git lists
    that is not on disk, a sparse checkout's or one deleted since, is none)."""
    for rel in repository_files(repo):
        if language_for(rel) in CODE_LANGUAGES:
            try:
                yield (repo / rel).stat().st_size
            except OSError:
                continue


def has_code_file(repo: Path, max_bytes: int | None = None) -> bool:
    """Whether ``repo`` holds a file in one of CODE_LANGUAGES (of at most ``max_bytes``), by its name, among the
    files the index reads: the cheap look a command takes before it starts anything, where the index would read
    every file."""
    return any(max_bytes is None or size <= max_bytes for size in _code_sizes(repo))


def files_past_the_index(repo: Path, max_files: int) -> tuple[int, int]:
    """(files ``repo`` lists, how many of them come after ``max_files``): the index reads text files in path
    order up to that number, so these may not be planned (an upper bound: a binary file is listed, not read).
    Lists names only, no file is read."""
    listed = sum(1 for _ in repository_files(repo))
    return listed, max(0, listed - max_files)


def no_source_code(repo: Path, max_bytes: int) -> NoSourceCodeError:
    """The refusal of a repository the index (files of at most ``max_bytes``) finds no code in: naming the size
    limit when a code file is over it."""
    too_big = any(size > max_bytes for size in _code_sizes(repo))
    return NoSourceCodeError.of(repo, max_bytes if too_big else None)


# Skipped even where git tracks them: a vendored dependency's tree or a committed cache is no project's source.
# Not `build`, `dist`, `env`: names of real packages too (pypa/build keeps its code in src/build/).
TRACKED_SKIPPED = SKIP_DIRS - {"build", "dist", "env"}


def _git_listed(root: Path) -> list[tuple[str, bool]] | None:
    """The files git shows in the working tree at ``root`` (relative to it), each with whether git tracks it:
    tracked and there (a sparse checkout's others are not), or untracked and not ignored. None when
    ``root`` is in no git working tree (or git is missing), and when the repository around it ignores ``root``
    itself (a copy kept inside another project): then every file is read."""
    try:
        # git prunes the skipped folders from its walk of untracked files (the caller would drop them anyway):
        # wfqueue's own history in .workflow/, tens of thousands of files after months, made every plan slower.
        skipped = [f"--exclude={name}/" for name in sorted(SKIP_DIRS)] + [f"--exclude=*{s}/" for s in SKIP_DIR_SUFFIXES]
        listed = run_git(root, "ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard", *skipped,
                         check=False, errors="surrogateescape", timeout_s=60.0)
        if listed.returncode != 0:
            return None
        if run_git(root, "check-ignore", "-q", ".", check=False).returncode == 0:
            return None
    except WfqueueError:
        return None
    found: dict[str, bool] = {}  # a path in a merge conflict is listed once per side: once here
    for entry in listed.stdout.split("\0"):
        tag, _, path = entry.partition(" ")
        # S: skip-worktree, outside a sparse checkout's cone (not there), or a tracked file kept locally changed
        # with `git update-index --skip-worktree` (there, and the project's).
        if path and (tag != "S" or os.path.lexists(root / path)):
            found[path] = tag != "?"
    return sorted(found.items())


# Control characters, and the other line breaks str.splitlines() reads plan-note.md by (NEL, LS, PS).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _plannable(name: str) -> bool:
    """Whether a plan can name the file: a name the file system gave that is not UTF-8 (kept as surrogates)
    cannot go into a plan's JSON, and one holding a control character (git tracks "a\n### TASK-001: ...") would
    be read back from plan-note.md and the prompts as lines of their own: headings, tasks."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return _CONTROL.search(name) is None


def repository_files(root: Path) -> Iterator[str]:
    """Relative paths of the repository's files (see the module's note): git's list in a working tree, in path
    order (a file git tracks outside TRACKED_SKIPPED, `build/` or `env/` too; an untracked one outside the skipped
    folders); else every file outside them, folder by folder, sorted within each (symlinked folders not
    descended: no cycles, no duplicates). What the index scans and the model's tools list."""
    listed = _git_listed(root)
    if listed is not None:
        for rel, tracked in listed:
            folders = rel.split("/")[:-1]
            skipped = any(part in TRACKED_SKIPPED or part.endswith(SKIP_DIR_SUFFIXES) for part in folders) \
                if tracked else any(skipped_dir(part) for part in folders)
            if _plannable(rel) and not skipped:
                yield rel
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):  # yielded as found: a caller may stop
        dirnames[:] = sorted(d for d in dirnames if not skipped_dir(d))
        base = Path(dirpath).relative_to(root).as_posix()
        yield from (rel for rel in (name if base == "." else f"{base}/{name}" for name in sorted(filenames))
                    if _plannable(rel))


def _inside(real_root: str, target: str) -> bool:
    return target == real_root or target.startswith(real_root + os.sep)


def list_source_files(
    repo: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES, max_files: int = DEFAULT_MAX_INDEXED_FILES,
    listed: Iterable[str] | None = None,
) -> list[tuple[SourceFile, str]]:
    """The repository's text files (see the module's note on which) with their text, in path order; ``listed``:
    ``repository_files(repo)`` when the caller already has it (listing a large repository takes git a walk of
    its folders).

    Symlinked files are kept only when they resolve to a file inside the repo.
    """
    root = Path(repo)
    real_root = os.path.realpath(root)
    found: list[tuple[SourceFile, str]] = []
    for rel in repository_files(root) if listed is None else listed:
        if len(found) >= max_files:
            break
        full = root / rel
        if full.is_symlink():
            target = os.path.realpath(full)
            if not _inside(real_root, target) or not os.path.isfile(target):
                continue
        elif not full.is_file():
            continue  # sockets, fifos, device files, a submodule, a tracked file deleted since
        read = _read_text(full, max_bytes)
        if read is None:
            continue
        text, size = read
        found.append(
            (
                SourceFile(
                    path=rel,
                    language=language_for(rel),
                    size=size,
                    line_count=count_lines(text),
                    is_test=is_test_path(rel),
                ),
                text,
            )
        )
    return sorted(found, key=lambda pair: pair[0].path)  # outside git, files come folder by folder
