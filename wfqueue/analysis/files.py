"""Discovery of the text source files of a repository.

This is one of only two places in the package that reads the filesystem (the
other is ``index.build_index``, which calls this).  Everything downstream works
on the ``(SourceFile, text)`` pairs returned here, which keeps the rest pure and
easy to test.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from pydantic import BaseModel

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
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".idea",
        ".vscode",
        "site-packages",
    }
)
SKIP_DIR_SUFFIXES: tuple[str, ...] = (".egg-info",)

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


def _skip_dir(name: str) -> bool:
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


def has_code_file(repo: Path) -> bool:
    """Whether ``repo`` holds a file in one of CODE_LANGUAGES, by its name, outside the folders the index skips:
    the cheap look a command takes before it starts anything, where the index would read every file."""
    for _, dirnames, filenames in os.walk(repo, followlinks=False):
        dirnames[:] = [d for d in dirnames if not _skip_dir(d)]
        if any(language_for(name) in CODE_LANGUAGES for name in filenames):
            return True
    return False


def _inside(real_root: str, target: str) -> bool:
    return target == real_root or target.startswith(real_root + os.sep)


def list_source_files(
    repo: Path, max_bytes: int = 512 * 1024, max_files: int = 20000
) -> list[tuple[SourceFile, str]]:
    """Walk ``repo`` in sorted order and return its text files with their text.

    Symlinked directories are not descended (that avoids cycles and duplicate
    files); symlinked files are kept only when they resolve inside the repo.
    """
    root = Path(repo)
    real_root = os.path.realpath(root)
    found: list[tuple[SourceFile, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        # Sorting in place makes os.walk visit children in a stable order.
        dirnames[:] = sorted(d for d in dirnames if not _skip_dir(d))
        for filename in sorted(filenames):
            if len(found) >= max_files:
                return sorted(found, key=lambda pair: pair[0].path)
            full = Path(dirpath) / filename
            if full.is_symlink():
                target = os.path.realpath(full)
                if not _inside(real_root, target) or not os.path.isfile(target):
                    continue
            elif not full.is_file():
                continue  # sockets, fifos, device files
            read = _read_text(full, max_bytes)
            if read is None:
                continue
            text, size = read
            rel = full.relative_to(root).as_posix()
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
    # os.walk yields a directory's files before its subdirectories; sort so
    # the result is in plain path order.
    return sorted(found, key=lambda pair: pair[0].path)
