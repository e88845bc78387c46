"""Which tests cover which sources, and how to run them.

Two signals link a test to a source: the test imports it (strong, exact), or
the test is named after it (``test_limiter.py`` -> ``limiter.py``).  Naming
is ambiguous when several sources share a stem, so the candidate whose
directories overlap the test's most is chosen.
"""

from __future__ import annotations

import json
import posixpath
import shlex

from wfqueue.analysis.files import SourceFile, language_for

_DATA_LANGUAGES: frozenset[str] = frozenset(
    {"markdown", "rst", "text", "json", "yaml", "toml", "ini", "html", "css"}
)
# Languages whose tests may exercise each other's files (a .test.ts for a .js).
_FAMILIES: dict[str, str] = {"typescript": "javascript"}
# Directory names that say nothing about which source a test is for.
_NEUTRAL_DIRS: frozenset[str] = frozenset(
    {"tests", "test", "__tests__", "src", "spec", "unit", "integration"}
)
_PACKAGE_FILES: tuple[str, ...] = ("__init__", "index", "mod", "lib")
_NPM_DEFAULT_TEST = "no test specified"


def _family(language: str) -> str:
    return _FAMILIES.get(language, language)


def subject_stem(path: str) -> str:
    """Name a test would use for this source; a package's init names its dir.

    A private module's test drops its underscore: ``_decoders.py`` is tested in ``test_decoders.py``
    (a dunder module such as ``__main__`` keeps its name)."""
    stem = posixpath.splitext(posixpath.basename(path))[0]
    directory = posixpath.basename(posixpath.dirname(path))
    if stem in _PACKAGE_FILES and directory:
        return directory.lower()
    if not (stem.startswith("__") and stem.endswith("__")):
        stem = stem.lstrip("_") or stem
    return stem.lower()


# Files and folders of a test tree that hold its set-up, not tests.
_SUPPORT_STEMS: frozenset[str] = frozenset(
    {"conftest", "setup", "helper", "helpers", "fixture", "fixtures", "util", "utils", "mock", "mocks", "support"}
)
_SUPPORT_DIRS: frozenset[str] = frozenset(
    {"helpers", "fixtures", "__fixtures__", "mocks", "__mocks__", "support", "utils", "testdata"}
)


def is_test_module(path: str) -> bool:
    """Whether a file of a test tree holds tests, not their set-up. Python's runners collect only ``test_*.py``
    and ``*_test.py``, so ``fixtures.py`` or a test package's ``__init__.py`` is no place for a test; elsewhere
    a file named as a test (``x.test.ts``, ``x_test.go``), or any file of a test folder that is not set-up
    (``test/helpers/setup.js`` is not a test; mocha's ``test/chalk.js`` is)."""
    stem = posixpath.splitext(posixpath.basename(path))[0]
    if language_for(path) == "python":
        return tested_stem(path) is not None or stem in ("test", "tests")
    if tested_stem(path) is not None:
        return True
    return stem.lower() not in _SUPPORT_STEMS and not _SUPPORT_DIRS.intersection(path.split("/")[:-1])


def closeness(source: str, test: str) -> int:
    """Shared meaningful directory names; a shared directory counts extra."""
    source_dir, test_dir = posixpath.dirname(source), posixpath.dirname(test)
    shared = (set(source_dir.split("/")) & set(test_dir.split("/"))) - _NEUTRAL_DIRS - {""}
    return len(shared) + (1 if source_dir == test_dir else 0)


def tested_stem(path: str) -> str | None:
    """Source stem a test file is named after, or None when it isn't."""
    name = posixpath.basename(path)
    for marker in (".test.", ".spec."):
        if marker in name:
            return name.split(marker, 1)[0].lower()
    stem = posixpath.splitext(name)[0]
    if stem.startswith("test_") and len(stem) > 5:
        return stem[5:].lower()
    for suffix in ("_tests", "_test", "_spec", "Tests", "Test", "IT"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            return stem[: -len(suffix)].lower()
    return None


def map_tests(files: list[SourceFile], imports: dict[str, list[str]]) -> dict[str, list[str]]:
    """Source path -> sorted test paths covering it (sources without tests omitted). A test tree's set-up files
    (conftest.py, fixtures, a test package's __init__.py) cover nothing: importing a module is not testing it."""
    sources = {f.path: f for f in files if not f.is_test and f.language not in _DATA_LANGUAGES}
    tests = [f for f in files if f.is_test and f.language not in _DATA_LANGUAGES and is_test_module(f.path)]
    mapping: dict[str, set[str]] = {}
    for test in tests:
        for target in imports.get(test.path, []):
            if target in sources:
                mapping.setdefault(target, set()).add(test.path)
    by_stem: dict[tuple[str, str], list[str]] = {}
    for path, source in sorted(sources.items()):
        by_stem.setdefault((_family(source.language), subject_stem(path)), []).append(path)
    for test in tests:
        subject = tested_stem(test.path)
        candidates = by_stem.get((_family(test.language), subject or ""), [])
        imported = set(imports.get(test.path, []))
        if not candidates or imported & set(candidates):
            continue  # the import already says which same-named source it is
        best = max(closeness(c, test.path) for c in candidates)
        for candidate in candidates:
            if closeness(candidate, test.path) == best:
                mapping.setdefault(candidate, set()).add(test.path)
    return {path: sorted(found) for path, found in sorted(mapping.items())}


def _npm_has_tests(package_json: str) -> bool:
    try:
        scripts = json.loads(package_json).get("scripts") or {}
    except (ValueError, AttributeError):
        return False
    test = scripts.get("test") if isinstance(scripts, dict) else None
    # `npm init` writes a test script that only fails; it is not a test suite.
    return isinstance(test, str) and bool(test.strip()) and _NPM_DEFAULT_TEST not in test


def detect_test_command(files: list[SourceFile], texts: dict[str, str]) -> str:
    """The repository's whole-suite test command, "" when none is evident.

    When several ecosystems qualify, the one with the most test files wins
    (ties: python, npm, go, cargo), so a Python project that ships a small
    JS frontend still gets pytest.
    """
    paths = {f.path for f in files}
    counts = {"python": 0, "javascript": 0, "go": 0, "rust": 0}
    for f in files:
        if f.is_test and _family(f.language) in counts:
            counts[_family(f.language)] += 1
    candidates: list[tuple[int, int, str]] = []
    if counts["python"] or "pytest.ini" in paths or "conftest.py" in paths:
        candidates.append((counts["python"], 0, "python -m pytest -q"))
    if "package.json" in paths and _npm_has_tests(texts.get("package.json", "")):
        candidates.append((counts["javascript"], 1, "npm test"))
    if "go.mod" in paths:
        candidates.append((counts["go"], 2, "go test ./..."))
    if "Cargo.toml" in paths:
        candidates.append((counts["rust"], 3, "cargo test"))
    if not candidates:
        return ""
    return min(candidates, key=lambda c: (-c[0], c[1]))[2]


def command_for_tests(test_paths: list[str], suite_command: str) -> str:
    """A command running just ``test_paths``; ``suite_command`` when unsure."""
    paths = sorted(set(test_paths))
    if not paths:
        return suite_command
    families = {_family(language_for(p)) for p in paths}
    quoted = " ".join(shlex.quote(p) for p in paths)
    if families == {"python"}:
        return f"python -m pytest -q {quoted}"
    if families == {"go"}:
        packages = sorted({"./" + posixpath.dirname(p) if posixpath.dirname(p) else "." for p in paths})
        return "go test " + " ".join(shlex.quote(p) for p in packages)
    if families == {"javascript"} and suite_command.startswith("npm test"):
        # npm forwards arguments after "--" to the test runner (jest, vitest, ...).
        return f"npm test -- {quoted}"
    if families == {"rust"} and all(p.startswith("tests/") and p.count("/") == 1 for p in paths):
        targets = " ".join(f"--test {shlex.quote(posixpath.splitext(p[6:])[0])}" for p in paths)
        return f"cargo test {targets}"
    return suite_command
