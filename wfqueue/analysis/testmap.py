"""Which tests cover which sources, and how to run them.

Two signals link a test to a source: the test imports it (strong, exact), or
the test is named after it (``test_limiter.py`` -> ``limiter.py``).  Naming
is ambiguous when several sources share a stem, so the candidate whose
directories overlap the test's most is chosen.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex

from wfqueue.analysis.files import TEST_ROOTS, SourceFile, language_for
from wfqueue.analysis.symbol_model import Symbol

_DATA_LANGUAGES: frozenset[str] = frozenset(
    {"markdown", "rst", "text", "json", "yaml", "toml", "ini", "html", "css"}
)
# Languages whose tests may exercise each other's files (a .test.ts for a .js).
_FAMILIES: dict[str, str] = {"typescript": "javascript", "kotlin": "java"}
# Directory names that say nothing about which source a test is for.
_NEUTRAL_DIRS: frozenset[str] = TEST_ROOTS | {"src", "lib", "unit", "integration"}
PACKAGE_FILES: tuple[str, ...] = ("__init__", "index", "mod", "lib")
_NPM_DEFAULT_TEST = "no test specified"


def language_family(language: str) -> str:
    """The language whose tests also cover ``language``'s files (TypeScript's JavaScript, Kotlin's Java)."""
    return _FAMILIES.get(language, language)


def subject_stem(path: str) -> str:
    """Name a test would use for this source; a package's init names its dir.

    A private module's test drops its underscore: ``_decoders.py`` is tested in ``test_decoders.py``
    (a dunder module such as ``__main__`` keeps its name)."""
    stem = posixpath.splitext(posixpath.basename(path))[0]
    directory = posixpath.basename(posixpath.dirname(path))
    if stem in PACKAGE_FILES and directory:
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


# The module a Rust file keeps its own tests in: `#[cfg(test)] mod tests` (or `mod test`, `mod parser_tests`).
_INLINE_TEST_MODULE = re.compile(r"^(?:tests?|\w+_tests?)$")


def in_test_module(symbol: Symbol) -> bool:
    """Whether ``symbol`` is one of a Rust file's own tests (or their helpers), not the code they test."""
    return "." in symbol.qualname and bool(_INLINE_TEST_MODULE.match(symbol.qualname.split(".", 1)[0]))


def inline_tests(files: list[SourceFile], symbols: dict[str, list[Symbol]]) -> list[str]:
    """The source files that hold their own tests: Rust modules with a test module of functions inside."""
    return [f.path for f in files if f.language == "rust" and not f.is_test
            and any(in_test_module(s) for s in symbols.get(f.path, []))]


def rust_module_filter(path: str) -> str | None:
    """The `cargo test` filter running a Rust source file's own tests: its module path from the crate root
    (``src/cache/store.rs``: ``cache::store::``); None for a crate root or a binary, whose tests no module path
    singles out."""
    parts = path.split("/")
    if "src" not in parts[:-1] or not parts[-1].endswith(".rs"):
        return None
    below = parts[len(parts) - 1 - parts[:-1][::-1].index("src"):]
    if below[0] == "bin":
        return None
    stem = below[-1][:-3]
    root = len(below) == 1 and stem in ("lib", "main")
    modules = below[:-1] + ([] if root or stem == "mod" else [stem])
    return "::".join(modules) + "::" if modules else None


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
        by_stem.setdefault((language_family(source.language), subject_stem(path)), []).append(path)
    for test in tests:
        subject = tested_stem(test.path)
        candidates = by_stem.get((language_family(test.language), subject or ""), [])
        imported = set(imports.get(test.path, []))
        if not candidates or imported & set(candidates):
            continue  # the import already says which same-named source it is
        best = max(closeness(c, test.path) for c in candidates)
        for candidate in candidates:
            if closeness(candidate, test.path) == best:
                mapping.setdefault(candidate, set()).add(test.path)
    return {path: sorted(found) for path, found in sorted(mapping.items())}


# The language folders a JVM build nests under a test root (src/test/java/).
_JVM_SOURCE_DIRS: frozenset[str] = frozenset({"java", "kotlin", "scala", "groovy"})


def where_tests_live(test_paths: list[str]) -> str:
    """Where most of the tests live: their folder ("tests/", "src/test/java/", "spec/"), "beside the source"
    (Go's ``x_test.go``, a ``x.test.ts`` next to its module), or "none"."""
    places: dict[str, int] = {}
    for path in test_paths:
        parts = path.split("/")
        place = "beside the source"
        for depth, part in enumerate(parts[:-1]):
            if part in TEST_ROOTS:
                end = depth + 2 if parts[depth + 1] in _JVM_SOURCE_DIRS and depth + 2 < len(parts) else depth + 1
                place = "/".join(parts[:end]) + "/"
                break
        places[place] = places.get(place, 0) + 1
    return min(places, key=lambda place: (-places[place], place)) if places else "none"


def suite_runner(suite_command: str) -> str:
    """The tool a suite command runs the tests with: pytest, npm, go, cargo, mvn, gradle, rake, rspec."""
    if "pytest" in suite_command:
        return "pytest"
    return suite_command.removeprefix("bundle exec ").removeprefix("./").split(" ", 1)[0].removesuffix("w")


def _npm_has_tests(package_json: str) -> bool:
    try:
        scripts = json.loads(package_json).get("scripts") or {}
    except (ValueError, AttributeError):
        return False
    test = scripts.get("test") if isinstance(scripts, dict) else None
    # `npm init` writes a test script that only fails; it is not a test suite.
    return isinstance(test, str) and bool(test.strip()) and _NPM_DEFAULT_TEST not in test


# A test script of several commands (`vitest run && playwright test`): npm appends what follows `--` to the last
# one alone, so `npm test -- a.spec.ts` ran every suite and then filtered the last by files it does not hold.
_SCRIPT_CHAIN = re.compile(r"&&|\|\||;|\|")


def _npm_suite(package_json: str) -> str:
    """``npm test``, or ``npm run test`` (the same suite) when its script chains several commands: a test's files
    are then not passed on (command_for_tests forwards them after ``npm test`` only)."""
    try:
        test = (json.loads(package_json).get("scripts") or {}).get("test", "")
    except (ValueError, AttributeError):
        return "npm test"
    return "npm run test" if isinstance(test, str) and _SCRIPT_CHAIN.search(test) else "npm test"


def _jvm_suite(paths: set[str]) -> str:
    """Maven's or Gradle's test task, through the project's own wrapper when it has one."""
    if "pom.xml" in paths:
        return "./mvnw -q test" if "mvnw" in paths else "mvn -q test"
    if paths & {"build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"}:
        return "./gradlew test" if "gradlew" in paths else "gradle test"
    return ""


def _ruby_suite(paths: set[str], ruby_tests: list[str], gems: str) -> str:
    """RSpec where the project declares it (``gems``: its Gemfile and gemspec) and its specs outnumber its
    minitest files, else the Rakefile's test task (minitest, specs written for minitest included); through
    Bundler when there is a Gemfile, as the project's own gems (and their versions) are what its tests run on."""
    if not ruby_tests:
        return ""
    bundle = "bundle exec " if "Gemfile" in paths else ""
    specs = sum(path.endswith("_spec.rb") for path in ruby_tests)
    if (".rspec" in paths or "rspec" in gems) and (specs * 2 > len(ruby_tests) or "Rakefile" not in paths):
        return f"{bundle}rspec"
    return f"{bundle}rake test" if "Rakefile" in paths else ""


def detect_test_command(files: list[SourceFile], texts: dict[str, str]) -> str:
    """The repository's whole-suite test command, "" when none is evident.

    When several ecosystems qualify, the one with the most test files wins
    (ties: python, npm, go, cargo, JVM, ruby, dotnet, phpunit, swift, sbt), so a Python project that ships a
    small JS frontend still gets pytest.
    """
    paths = {f.path for f in files}
    counts = {"python": 0, "javascript": 0, "go": 0, "rust": 0, "java": 0, "ruby": 0, "csharp": 0, "php": 0,
              "swift": 0, "scala": 0}
    for f in files:
        if f.is_test and language_family(f.language) in counts:
            counts[language_family(f.language)] += 1
    candidates: list[tuple[int, int, str]] = []
    if counts["python"] or "pytest.ini" in paths or "conftest.py" in paths:
        candidates.append((counts["python"], 0, "python -m pytest -q"))
    if "package.json" in paths and _npm_has_tests(texts.get("package.json", "")):
        candidates.append((counts["javascript"], 1, _npm_suite(texts.get("package.json", ""))))
    if "go.mod" in paths:
        candidates.append((counts["go"], 2, "go test ./..."))
    if "Cargo.toml" in paths:
        candidates.append((counts["rust"], 3, "cargo test"))
    # A build file alone (a deploy Rakefile, a pom.xml beside a Python project) is no test suite.
    if counts["java"] and (jvm := _jvm_suite(paths)):
        candidates.append((counts["java"], 4, jvm))
    ruby_tests = [f.path for f in files if f.is_test and f.language == "ruby"]
    gems = "".join(text for path, text in texts.items() if path == "Gemfile" or path.endswith(".gemspec"))
    if ruby := _ruby_suite(paths, ruby_tests, gems):
        candidates.append((counts["ruby"], 5, ruby))
    if counts["csharp"] and any(p.endswith((".csproj", ".sln")) for p in paths):
        candidates.append((counts["csharp"], 6, "dotnet test"))
    if counts["php"] and (paths & {"phpunit.xml", "phpunit.xml.dist"} or "phpunit" in texts.get("composer.json", "")):
        candidates.append((counts["php"], 7, "vendor/bin/phpunit"))
    if counts["swift"] and "Package.swift" in paths:  # a Swift package (an Xcode project's tests need xcodebuild)
        candidates.append((counts["swift"], 8, "swift test"))
    if counts["scala"] and (scala := "sbt test" if "build.sbt" in paths else _jvm_suite(paths)):
        candidates.append((counts["scala"], 9, scala))
    if not candidates:
        return ""
    return min(candidates, key=lambda c: (-c[0], c[1]))[2]


def command_for_tests(test_paths: list[str], suite_command: str) -> str:
    """A command running just ``test_paths``; ``suite_command`` when unsure."""
    paths = sorted(set(test_paths))
    if not paths:
        return suite_command
    families = {language_family(language_for(p)) for p in paths}
    quoted = " ".join(shlex.quote(p) for p in paths)
    tool = suite_command.split(" ", 1)[0]
    if families == {"python"}:
        return f"python -m pytest -q {quoted}"
    if families == {"go"}:
        packages = sorted({"./" + posixpath.dirname(p) if posixpath.dirname(p) else "." for p in paths})
        return "go test " + " ".join(shlex.quote(p) for p in packages)
    if families == {"javascript"} and suite_command.startswith("npm test"):
        # npm forwards arguments after "--" to the test runner (jest, vitest, ...): of a script that is one command
        # (a chain is "npm run test", run whole: _npm_suite).
        return f"npm test -- {quoted}"
    if families == {"rust"} and len(paths) == 1 and (module := rust_module_filter(paths[0])) is not None \
            and not paths[0].startswith("tests/"):
        # A module's own tests (inline_tests), by its path: config::tests::... A member crate's, from the workspace
        # root, where `cargo test` alone runs the root package's only.
        member = not paths[0].startswith("src/")
        return f"cargo test {'--workspace ' if member else ''}{module}"
    if families == {"rust"} and all(p.startswith("tests/") and p.count("/") == 1 for p in paths):
        targets = " ".join(f"--test {shlex.quote(posixpath.splitext(p[6:])[0])}" for p in paths)
        return f"cargo test {targets}"
    classes = [posixpath.splitext(posixpath.basename(p))[0] for p in paths]
    if families == {"java"} and tool in ("mvn", "./mvnw"):
        # Surefire takes simple class names; in a multi-module build the modules without them must not fail.
        return f"{suite_command} -Dtest={','.join(classes)} -Dsurefire.failIfNoSpecifiedTests=false"
    if families == {"java"} and tool in ("gradle", "./gradlew"):
        # In a multi-project build a filter no test of a sub-project matches fails that sub-project: run the
        # test task of the one project holding them (core/src/test/... -> :core:test, src/test/... -> :test).
        modules = {"" if p.startswith("src/test/") else p.split("/src/test/", 1)[0] if "/src/test/" in p else None
                   for p in paths}
        module = modules.pop() if len(modules) == 1 else None  # None: not the `test` source set, or several
        task = "test" if module is None else f":{module.replace('/', ':')}:test" if module else ":test"
        return f"{tool} {task}" + "".join(f" --tests {name}" for name in classes)
    if families == {"csharp"} and tool == "dotnet" and len(classes) == 1:
        # One class by name (several would need "|", which no command may hold: it is run without a shell).
        return f"dotnet test --filter FullyQualifiedName~{classes[0]}"
    if families == {"php"} and suite_command.endswith("phpunit") and len(paths) == 1:
        return f"{suite_command} {quoted}"
    if families == {"swift"} and suite_command == "swift test" and len(classes) == 1:
        return f"swift test --filter {classes[0]}"  # several would need "|", as dotnet's
    if families == {"scala"} and suite_command == "sbt test":
        return "sbt " + shlex.quote("testOnly " + " ".join(f"*{name}" for name in classes))
    # Ruby runs a file from the root only in the root's own test folders: a sub-project's specs (sinatra's
    # rack-protection/spec/) load their helper from their own folder, through their own Gemfile, and the root's
    # suite does not run them. Without a shell that can only be said, as a manual step.
    if families == {"ruby"} and suite_command.endswith("rspec") and all(p.startswith("spec/") for p in paths):
        return f"{suite_command} {quoted}"
    if (families == {"ruby"} and suite_command.endswith("rake test") and len(paths) == 1
            and paths[0].startswith("test/")):
        return f"{suite_command} TEST={quoted}"  # Rake's test task runs the one file TEST names
    tops = {p.split("/", 1)[0] if "/" in p else "" for p in paths}
    if families == {"ruby"} and len(tops) == 1 and not tops & {"", "spec", "test"}:
        top = tops.pop()
        inner = [shlex.quote(p.split("/", 1)[1]) for p in paths]
        run = (f"rspec {' '.join(inner)}" if all(p.endswith("_spec.rb") for p in paths)
               else f"rake test TEST={inner[0]}" if len(inner) == 1 else "rake test")
        return f"manual: cd {shlex.quote(top)} && bundle exec {run}"
    return suite_command
