"""Where a plan's tests go: the test file a change's test task extends or creates. Pure.

A test file the requirement names; else the existing test that weighs most among those of the planned modules
(named by the requirement, using what it names, testing the most relevant module, changed with it in the
history, matching its words; never a test folder's set-up file); else a new file named and placed as the
project's own tests are. A module the change creates gets a test of its own.
"""

from __future__ import annotations

import posixpath
import re

from wfqueue.analysis import CODE_LANGUAGES, RepoIndex, rank_files, tokenize
from wfqueue.analysis.files import TEST_FOLDERS, is_test_path, language_for
from wfqueue.analysis.localize import named_identifiers
from wfqueue.analysis.testmap import (
    closeness,
    is_test_module,
    language_family,
    subject_stem,
    tested_stem,
)
from wfqueue.providers.offline.changes import has_file, is_code, named_paths, runs_in, uses_of

# A change that moves code into a new module, said by the verb starting a clause ("Move the retry delay
# computation into a new file ...", "refactor: extract ...", "GOAL: Rename ...", "Refactor job.py: move ..."); not
# "Add an extract command".
_MOVE = re.compile(r"(?:^|[:;.]\s)\W*(?:please\s+)?(?:mov(?:e|es|ing)|renam(?:e|es|ing)|extract(?:s|ing)?|relocate|"
                   r"split(?:s|ting)?\s+out)\b", re.IGNORECASE | re.MULTILINE)


def covering_tests(index: RepoIndex, paths: list[str]) -> list[str]:
    """Test files that cover any of ``paths`` (a test file covers itself)."""
    found: list[str] = []
    for path in paths:
        test_file = any(f.path == path and f.is_test for f in index.files)
        own = [path] if test_file else index.tests_for.get(path, [])
        # conftest.py, fixtures.py, a test package's __init__.py: set-up, not a test of the module; pytest run on
        # one alone collects nothing and fails. A Rust module holding its own tests (src/util.rs) is no set-up,
        # whatever its name says.
        found += [t for t in own if t not in found and ((t == path and not test_file) or is_test_module(t))]
    return found


def where_tests_go(index: RepoIndex, paths: list[str], requirement: str,
                   new_module: str | None = None) -> tuple[str, bool]:
    """Where the tests of a change to ``paths`` (most relevant first) go, and whether that file exists.

    A test file the requirement names, existing or not. Else an existing test of the change: among the tests of
    the first few planned modules (importing one or named after it), those the history changed together with
    them, and, where none covers the most relevant module, those reaching it through the package's entry point
    (in Python, only one named by the requirement), the one weighing most (WEIGHTS): named after what the
    requirement says (``record.test.ts`` for "z.record"), using an identifier it names (where ``parse_schedule``
    is already tested), testing the most relevant planned module, changed with the planned modules, matching the
    requirement's words; never a test folder's support file (``fixtures.py``, ``__init__.py``). Without one, a
    new file named after the most relevant module, where its language keeps tests (never a vendored package's
    folder). A module the change creates (``new_module``) gets a test file of its own."""
    code = [p for p in paths if is_code(index, p)]
    main = code[0] if code else None
    # "Add tests in test/res.sendStatus.js": where the requirement says (a set-up file is no test's place).
    named = [(path, exists) for path, exists in named_paths(index, requirement)
             if is_test_path(path) and is_test_module(path)]
    if named:
        path, exists = named[0]
        if "/" not in path and not exists and main is not None and language_for(main) != "go":
            path = posixpath.join(posixpath.dirname(_new_test_file(index, main)), path)  # the tests' folder
        return path, exists or has_file(index, path)
    by_class = _named_test_class(index, requirement, main)
    if by_class is not None:
        return by_class
    if new_module is not None and not _MOVE.search(requirement):  # moved code keeps the tests it has
        return _created_test(index, new_module)
    if main is None:
        return _created_test(index, paths[0] if paths else "change.py")
    if main in index.tests_for.get(main, []):  # a Rust module holding its own tests: new ones go beside them
        return main, True
    # Covering: importing the module, or named after it in the nearest folder of its language
    # (analysis.testmap), so another app's test_models.py or a frontend's client.test.ts is never taken; and a
    # file named after the module and importing it, whatever its name says elsewhere (express's test/utils.js).
    # Python projects name tests after modules (a new tests/test_x.py is the convention); JS/TS ones often load
    # only the package's entry point and name tests by topic (express's test/res.json.js).
    own_name = [f.path for f in index.files if f.is_test and main in index.imports.get(f.path, [])
                and posixpath.splitext(posixpath.basename(f.path))[0].lower() == subject_stem(main)]
    defined = {s.name.lower() for s in index.symbols.get(main, [])}
    # Identifiers the requirement names that the module defines, as their terms run in order.
    wanted = [tokenize(name) for name in named_identifiers(requirement) if name.rsplit(".", 1)[-1].lower() in defined]
    # Outside Python a test need not load the module by a path the index resolves (Ruby's `require 'sinatra'`):
    # one of its language using the identifier is where it is tested (sinatra's helpers_test.rb for content_type,
    # not base_test.rb, named after base.rb).
    using_named = [] if language_for(main) == "python" or not wanted else [
        f.path for f in index.files if f.is_test and is_test_module(f.path)
        and language_for(f.path) == language_for(main)
        and any(terms and runs_in(terms, index.doc_tokens.get(f.path, [])) for terms in wanted)]
    language = language_family(language_for(main))
    # Code of the main module's language family: a TypeScript module's test is no place for a Python change's, and
    # a changelog that changes with every feature ties no test to this one.
    planned = [p for p in code if language_for(p) in CODE_LANGUAGES
               and language_family(language_for(p)) == language][:PLANNED_CONSIDERED]
    # A file the requirement names is a module it changes, not its subject: "Fix parse_schedule in
    # tool/helpers.py" is no reason to take test_helpers.py over the test already calling parse_schedule.
    asked = _name_words(_FILE_NAME.sub(" ", requirement))
    # Every planned module's tests, not the first one's alone: the localizer's first file is often not the one the
    # change is about (gin.go for "debug warning", whose test is debug_test.go).
    covering = list(dict.fromkeys(t for path in planned for t in covering_tests(index, [path])))
    # Tests the history changed together with the planned modules (ripgrep's tests/feature.rs runs the binary and
    # imports nothing), and, where none covers the module, tests reaching it through the package's entry point;
    # in Python only one named after what the requirement names (flask's tests `import flask`: a fix of the
    # templating code goes to test_templating.py; else a new test file named after the module, as Python
    # projects name them).
    together = _changed_with(index, planned)
    through = [t for t in (_tests_through_entry(index, main) if not covering_tests(index, [main]) else [])
               if language != "python" or _named_by(t, asked)]
    looser = [t for t in [*through, *together] if is_test_path(t) and is_test_module(t)
              and language_family(language_for(t)) == language and not _vendored(t)]
    candidates = list(dict.fromkeys(covering + own_name + using_named + looser))
    if language == "go":  # a Go test is in its package's folder: one elsewhere cannot reach the change
        packages = {posixpath.dirname(p) for p in planned}
        candidates = [t for t in candidates if posixpath.dirname(t) in packages]
    if not candidates:
        return _created_test(index, main)
    scores = dict(rank_files(index, requirement, include_tests=True))
    top_text = max((scores.get(t, 0.0) for t in candidates), default=0.0) or 1.0
    # Outside Python, where imports say little, the test using the requirement's names most is where they are
    # tested (sinatra's helpers_test.rb, not base_test.rb, which says "Content-Type" once).
    uses = {t: sum(uses_of(terms, index.doc_tokens.get(t, [])) for terms in wanted if terms) for t in candidates}
    most_uses = max(uses.values(), default=0) or 1

    def covers(test: str, path: str) -> float:
        """How surely ``test`` tests ``path``: named after it and importing it, or only one of the two."""
        imports = path in index.imports.get(test, []) or test in index.tests_for.get(path, [])
        named_after = tested_stem(test) == subject_stem(path)
        return 1.0 if imports and named_after else 0.6 if imports or named_after else 0.0

    def weight(test: str) -> float:
        used = uses[test] / most_uses if language != "python" else float(uses[test] > 0)
        # Testing a planned module, the more relevant that module the more.
        covered = max((covers(test, path) / (rank + 1) for rank, path in enumerate(planned)), default=0.0)
        return (WEIGHTS["named"] * _named_by(test, asked) + WEIGHTS["uses"] * used + WEIGHTS["covers"] * covered
                + WEIGHTS["together"] * together.get(test, 0.0) + WEIGHTS["text"] * scores.get(test, 0.0) / top_text)

    return max(candidates, key=lambda t: (weight(t), -candidates.index(t))), True


# How many of the planned modules, most relevant first, the tests are looked for among.
PLANNED_CONSIDERED = 3
# What makes a test the change's: named after what the requirement names, using an identifier it names, testing a
# planned module, changed with the planned modules before, matching the requirement's words.
WEIGHTS = {"named": 2.0, "uses": 1.5, "covers": 1.0, "together": 1.0, "text": 1.0}
_FILE_NAME = re.compile(r"\S*/\S*|[\w.-]*\w\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|rb|php|cs|swift)\b")
_VENDORED = frozenset({"_vendor", "vendor", "vendored", "third_party", "node_modules"})
_TEST_WORDS = frozenset({"test", "tests", "spec", "specs"})


def _vendored(path: str) -> bool:
    return bool(_VENDORED.intersection(path.split("/")[:-1]))


def _named_by(test: str, asked: set[str]) -> bool:
    """Whether every word of the test file's name is one the requirement says (``record.test.ts`` for
    "z.record(...)", JsonReaderTest for "JsonReader.hasNext()", debug_test.go for "debug warning")."""
    name = _name_terms(test)
    return bool(name) and name <= asked


def _name_terms(test: str) -> set[str]:
    """The words a test file's name says it tests: ``JsonReaderTest.java`` -> {json, reader};
    ``test_termui.py`` -> {termui}; ``record.test.ts`` -> {record}."""
    name = posixpath.basename(test).split(".")
    stem = ".".join(name[:-1]) if len(name) > 1 else name[0]
    for marker in (".test", ".spec"):
        stem = stem.split(marker, 1)[0]
    return _name_words(stem) - _TEST_WORDS


def _name_words(text: str) -> set[str]:
    """Lowercase words of ``text`` split at case changes, underscores, dots and dashes, a plural's "s" dropped;
    keywords kept (``catch.test.ts``, ``test_async.py`` are named after them), unlike the ranking's tokenize."""
    words = re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", text)
    return {w.lower()[:-1] if len(w) > 3 and w.lower().endswith("s") and not w.lower().endswith("ss") else w.lower()
            for w in words if len(w) > 1}


def _changed_with(index: RepoIndex, planned: list[str]) -> dict[str, float]:
    """Test files the history changed together with the planned modules: for each, the share of a planned
    module's commits that changed it too, weighted by that module's place (1, 1/2, 1/3...), the best one's."""
    found: dict[str, float] = {}
    for rank, module in enumerate(planned):
        changes = [change for change in index.history if module in change.paths]
        counts: dict[str, int] = {}
        for change in changes:
            for path in change.paths:
                if is_test_path(path):
                    counts[path] = counts.get(path, 0) + 1
        for path, count in counts.items():
            found[path] = max(found.get(path, 0.0), count / len(changes) / (rank + 1))
    return found


# How many imports deep a test may reach a module through its package's entry point (express's tests
# require('..'): index.js -> lib/express.js -> lib/response.js).
ENTRY_DEPTH = 3


# A test class named without its file ("a new ArrayTypeNameTest"), in languages whose test files are named after
# their class. Not "...Spec": javapoet's TypeSpec is code.
_TEST_CLASS = re.compile(r"(?<![\w.])([A-Z][A-Za-z0-9]*[a-z0-9]Tests?)\b")


def _named_test_class(index: RepoIndex, requirement: str, main: str | None) -> tuple[str, bool] | None:
    """The file of a test class the requirement names ("Add tests in a new ArrayTypeNameTest"): the test file of
    that name, else a new one where the tests of ``main`` would go; only where files are named after their
    classes (those of _CLASS_SUFFIX: Java, Kotlin, Scala, PHP, C#, Swift)."""
    if main is None or language_for(main) not in _CLASS_SUFFIX:
        return None
    for name in dict.fromkeys(_TEST_CLASS.findall(requirement)):
        existing = [f.path for f in index.files
                    if f.is_test and posixpath.splitext(posixpath.basename(f.path))[0] == name]
        if existing:
            return existing[0], True
        folder = posixpath.dirname(_new_test_file(index, main))
        return posixpath.join(folder, name + posixpath.splitext(main)[1]), False
    return None


def _tests_through_entry(index: RepoIndex, source: str) -> list[str]:
    """Test files of ``source``'s language that reach it through the modules they import, within
    :data:`ENTRY_DEPTH` imports: where a project's tests load only its entry point, these are its tests."""
    language = language_for(source)
    found: list[str] = []
    for test in (f.path for f in index.files if f.is_test and is_test_module(f.path)):
        if language_for(test) != language:
            continue
        seen, frontier = {test}, [test]
        for _ in range(ENTRY_DEPTH):
            frontier = [g for f in frontier for g in index.imports.get(f, []) if g not in seen]
            seen.update(frontier)
            if source in seen:
                found.append(test)
                break
    return found


def _created_test(index: RepoIndex, source: str) -> tuple[str, bool]:
    """A test file for ``source`` where none covers it, and whether that name is taken (ky's test/merge.ts may
    exist and test something else through the entry point: it is then changed, not created over)."""
    path = _new_test_file(index, source)
    return path, has_file(index, path)


def _new_test_file(index: RepoIndex, source: str) -> str:
    """A test file for ``source`` named as its language names them, where its language keeps them: Go beside
    the source (``x_test.go``), others in the test folder nearest to it, named as the tests already there are."""
    name, extension = posixpath.splitext(posixpath.basename(source))
    language = language_for(source) if extension else "python"
    if language == "go":
        return posixpath.join(posixpath.dirname(source), f"{name}_test.go")
    # Outside Python a `test_` name out of a test folder is no test: sinatra-contrib's lib/sinatra/test_helpers.rb
    # is a library module, and its folder no place for tests.
    tests = [f.path for f in index.files if f.is_test and is_test_module(f.path) and language_for(f.path) == language
             and not _vendored(f.path)
             and (language == "python" or set(f.path.split("/")[:-1]) & TEST_FOLDERS
                  or not posixpath.basename(f.path).startswith("test_"))]
    # Another package's tests (ripgrep's crates/matcher/tests for the binary's crates/core) run with that package
    # alone, and cannot reach this one's code: the folder is one of the source's own package, when it has any.
    roots = {posixpath.dirname(f.path) for f in index.files if posixpath.basename(f.path) in PACKAGE_MANIFESTS}
    root = package_root(source, roots)
    own = [t for t in tests if package_root(t, roots) == root]
    nearest = max(own or ([] if root else tests), key=lambda t: (closeness(source, t), t.count("/") == 1, t),
                  default=None)
    # A package with no tests yet (a workspace member's): its own test folder, not a neighbour's.
    folder = posixpath.dirname(nearest) if nearest else posixpath.join(
        root, "tests" if language in ("python", "rust") else "test")
    if (mirror := _jvm_test_folder(source)) is not None:
        folder = mirror  # src/main/java/a/b -> src/test/java/a/b: the same package, package-private code in reach
    if language == "python":
        return posixpath.join(folder, f"test_{subject_stem(source)}.py")
    siblings = [posixpath.basename(t) for t in tests if posixpath.dirname(t) == folder]
    if language in _CLASS_SUFFIX:  # FooTest.java, FooTests.cs, or as the folder's tests are (FooSpec.scala)
        stems = [posixpath.splitext(s)[0] for s in siblings]
        default = _CLASS_SUFFIX[language]
        counts = {suffix: sum(stem.endswith(suffix) for stem in stems) for suffix in ("Tests", "Test", "Spec")}
        usual = max(counts, key=lambda suffix: (counts[suffix], suffix == default)) if any(counts.values()) \
            else default
        return posixpath.join(folder, f"{name}{usual}{extension}")
    return posixpath.join(folder, _named_like(siblings, name, extension, language))


# A build manifest marks the root of a package (a crate, a Maven or Gradle module, an npm package, a Go module).
PACKAGE_MANIFESTS = frozenset({"Cargo.toml", "pom.xml", "build.gradle", "build.gradle.kts", "package.json",
                               "go.mod", "pyproject.toml", "setup.py"})
_JVM_SOURCE = re.compile(r"^(?P<module>(?:.*/)?)src/main/(?P<language>java|kotlin|scala)/(?P<package>.*)$")


def package_root(path: str, roots: set[str]) -> str:
    """The folder of the nearest build manifest above ``path`` ("" for the repository's own). Pure."""
    folder = posixpath.dirname(path)
    while folder and folder not in roots:
        folder = posixpath.dirname(folder)
    return folder


def _jvm_test_folder(source: str) -> str | None:
    """Where Maven and Gradle keep the tests of a JVM source, in the same package: ``m/src/main/java/a/b/X.java``
    -> ``m/src/test/java/a/b`` (gson's tests went to a neighbouring package the nearest-folder rule liked)."""
    found = _JVM_SOURCE.match(posixpath.dirname(source) + "/")
    if found is None:
        return None
    return f"{found['module']}src/test/{found['language']}/{found['package']}".rstrip("/")


# How a language's test class is named after the class it tests, where the folder's tests do not say otherwise.
_CLASS_SUFFIX = {"java": "Test", "kotlin": "Test", "scala": "Test", "php": "Test", "csharp": "Tests", "swift": "Tests"}


def _named_like(siblings: list[str], name: str, extension: str, language: str) -> str:
    """A test file name for module ``name`` following most of ``siblings``: ``test_x.rs`` beside anyhow's
    test_context.rs, ``x_test.rb`` or ``x_spec.rb`` in Ruby, ``x.test.ts`` (its case kept: UserCard.test.tsx)
    where the folder marks its tests, plain ``x.ts`` where it does not (ky's test/retry.ts)."""
    stems = [sibling.split(".", 1)[0] for sibling in siblings]
    majority = len(siblings) / 2
    lower = subject_stem(name + extension) if language in ("ruby", "rust") else name
    if siblings and sum(stem.startswith("test_") for stem in stems) > majority:
        return f"test_{lower}{extension}"
    for suffix in ("_test", "_spec"):
        if siblings and sum(stem.endswith(suffix) for stem in stems) > majority:
            return f"{lower}{suffix}{extension}"
    if language == "ruby":  # minitest's naming, or RSpec's in a spec folder
        return f"{lower}_test{extension}"
    if language == "rust":  # any name is an integration test of tests/
        return f"{lower}{extension}"
    mark = next((m for m in (".test.", ".spec.") if siblings and sum(m in n for n in siblings) * 2 >= len(siblings)),
                "." if siblings else ".test.")
    return f"{name}{mark}{extension.lstrip('.')}"
