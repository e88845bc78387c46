"""The repository index and the pure queries the planner runs against it.

``build_index`` is the only function here that touches the filesystem; it
reads once and stores everything the queries need, so planning is a pure
function of the index (and therefore reproducible and cheap to test).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from wfqueue.analysis.files import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_INDEXED_FILES,
    SourceFile,
    list_source_files,
    repository_files,
)
from wfqueue.analysis.history import PastChange, read_history
from wfqueue.analysis.imports import imports_from_tree, js_imports, module_index_for, python_imports
from wfqueue.analysis.pyast import parse_python
from wfqueue.analysis.ranking import bm25_scores, tokenize
from wfqueue.analysis.symbols import SYMBOL_LANGUAGES, Symbol, class_attributes, regex_symbols, symbols_from_tree
from wfqueue.analysis.testmap import command_for_tests, detect_test_command, in_test_module, inline_tests, map_tests

# How often each source of ranking tokens is repeated: BM25 has no field
# weights, so repetition is how a match in the path or a symbol name is made
# to outweigh a passing mention in the body.
PATH_WEIGHT = 3
SYMBOL_WEIGHT = 2
_SCORE_DIGITS = 9  # rounding keeps ties exact across platforms' float noise
_JS_LANGUAGES: frozenset[str] = frozenset({"javascript", "typescript"})


class RepoIndex(BaseModel):
    """Everything the planner knows about a repository, from one scan."""

    root: str
    files: list[SourceFile]
    symbols: dict[str, list[Symbol]]  # every file's path -> its symbols (maybe [])
    imports: dict[str, list[str]]  # every file's path -> in-repo paths it imports
    # source path -> covering tests (a Rust module holding its own tests first: itself); only sources with tests
    tests_for: dict[str, list[str]]
    doc_tokens: dict[str, list[str]]  # path -> ranking tokens
    languages: dict[str, int]  # language -> file count
    test_command: str  # whole-suite command, "" when unknown
    history: list[PastChange] = []  # the last commits' messages and the indexed files they changed
    # The repository's other files: there, but not read (too large, not text, not UTF-8, past the number of files
    # read). A requirement naming one names a file to change, not one to create.
    unread: list[str] = []
    attributes: dict[str, list[str]] = {}  # Python path -> the names its class bodies assign (symbols.class_attributes)


def _analyse(
    source: SourceFile, text: str, module_index: dict[str, str], modules: set[str], known: set[str]
) -> tuple[list[Symbol], list[str], list[str]]:
    """Symbols, in-repo imports and class attributes of one file (Python is parsed only once).

    ``modules`` is ``set(module_index.values())`` and ``known`` every indexed
    path; both are passed in so they are built once per repository.
    """
    if source.language == "python":
        tree = parse_python(text)
        if tree is None:  # the public functions carry the regex fallbacks
            return regex_symbols(text, "python"), python_imports(source.path, text, module_index), []
        return (symbols_from_tree(tree), imports_from_tree(source.path, tree, module_index, modules),
                class_attributes(tree))
    symbols = regex_symbols(text, source.language) if source.language in SYMBOL_LANGUAGES else []
    if source.language in _JS_LANGUAGES:
        return symbols, js_imports(source.path, text, known), []
    return symbols, [], []


def _path_tokens(path: str) -> list[str]:
    # The extension is the same for most files and would only add noise.
    return tokenize(posixpath.splitext(path)[0])


def _doc_tokens(path: str, symbols: list[Symbol], text: str) -> list[str]:
    # Joining before tokenizing gives the same tokens as one call per symbol
    # (spaces always separate words) at a fraction of the cost.
    names = tokenize(" ".join(symbol.name for symbol in symbols))
    docs = tokenize(" ".join(symbol.doc for symbol in symbols))
    # The whole text: identifiers, comments and string literals all describe
    # what a file is about.
    return _path_tokens(path) * PATH_WEIGHT + names * SYMBOL_WEIGHT + docs + tokenize(text)


def _with_inline_tests(tests_for: dict[str, list[str]], inline: list[str]) -> dict[str, list[str]]:
    """A file holding its own tests is covered by itself, first: a change to it is tested there."""
    return {**tests_for, **{path: [path, *tests_for.get(path, [])] for path in inline}}


def build_index(repo: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES,
                max_files: int = DEFAULT_MAX_INDEXED_FILES, previous: RepoIndex | None = None,
                unchanged: frozenset[str] = frozenset(), listed: list[str] | None = None) -> RepoIndex:
    """Scan ``repo`` and build its index (text files of at most ``max_bytes``, the first ``max_files`` of them in
    path order); the package's only I/O entry point.

    ``previous``: an index of the same repository, and ``unchanged`` the files whose content has not changed since
    it was built. When the scan lists the same files as ``previous`` did, their symbols, imports and ranking
    tokens are taken from it instead of being parsed again: a file's analysis depends only on its text and on
    which files there are. The result is the index a full scan gives. ``listed``: ``repository_files(repo)``
    when the caller has listed it already (git walks a repository's folders to list it: 0.4 s at 20 000 files).
    """
    listed = list(repository_files(Path(repo))) if listed is None else listed
    pairs = list_source_files(Path(repo), max_bytes=max_bytes, max_files=max_files, listed=listed)
    files = [source for source, _ in pairs]
    texts = {source.path: text for source, text in pairs}
    paths = [source.path for source in files]
    module_index = module_index_for(paths)
    modules, known = set(module_index.values()), set(paths)
    prior = previous if previous is not None and [source.path for source in previous.files] == paths else None
    symbols: dict[str, list[Symbol]] = {}
    imports: dict[str, list[str]] = {}
    attributes: dict[str, list[str]] = {}
    # Tuples, not lists, while building: a tuple of strings is untracked by the
    # cyclic GC, so millions of tokens do not slow every collection that the
    # many short-lived AST objects trigger (measured: ~25% of build time).
    doc_tokens: dict[str, tuple[str, ...]] = {}
    for source in files:
        if prior is not None and source.path in unchanged and _analysed(prior, source.path):
            symbols[source.path], imports[source.path] = prior.symbols[source.path], prior.imports[source.path]
            doc_tokens[source.path] = tuple(prior.doc_tokens[source.path])
            if source.path in prior.attributes:
                attributes[source.path] = prior.attributes[source.path]
            continue
        text = texts[source.path]
        symbols[source.path], imports[source.path], assigned = _analyse(source, text, module_index, modules, known)
        if assigned:  # most files have none: not written
            attributes[source.path] = assigned
        doc_tokens[source.path] = tuple(_doc_tokens(source.path, symbols[source.path], text))
    return RepoIndex(
        root=str(Path(repo).resolve()),
        files=files,
        symbols=symbols,
        imports=imports,
        tests_for=_with_inline_tests(map_tests(files, imports), inline_tests(files, symbols)),
        doc_tokens={path: list(tokens) for path, tokens in doc_tokens.items()},
        languages=dict(sorted(Counter(source.language for source in files).items())),
        test_command=detect_test_command(files, texts),
        history=read_history(Path(repo), known),
        # Those on disk: git lists a tracked file deleted since, which is no file to change (and no file of the
        # manifest that keeps a cached index valid, so committing its deletion left it listed).
        unread=[path for path in listed if path not in known and (Path(repo) / path).exists()],
        attributes=attributes,
    )


def _analysed(index: RepoIndex, path: str) -> bool:
    return path in index.symbols and path in index.imports and path in index.doc_tokens


def rank_files(
    index: RepoIndex, query: str, include_tests: bool = False, limit: int | None = None
) -> list[tuple[str, float]]:
    """Files relevant to ``query``, best first (score desc, then path).

    Scores come from BM25 over every file (so they do not depend on
    ``include_tests``); test files are then dropped unless asked for.
    Only positive scores are returned.
    """
    scores = bm25_scores(tokenize(query), index.doc_tokens)
    tests = {source.path for source in index.files if source.is_test}
    ranked = [
        (path, round(score, _SCORE_DIGITS))
        for path, score in scores.items()
        if score > 0 and (include_tests or path not in tests)
    ]
    ranked.sort(key=lambda item: (-item[1], item[0]))
    return ranked if limit is None else ranked[: max(limit, 0)]


_ERROR_TYPE = re.compile(r"(?:Error|Exception|Warning)$")


def code_symbols(index: RepoIndex, path: str) -> list[Symbol]:
    """The symbols of ``path`` that are code: a file holding its own tests (Rust's ``mod tests``, inline_tests)
    without them."""
    symbols = index.symbols.get(path, [])
    return [s for s in symbols if not in_test_module(s)] if path in index.tests_for.get(path, []) else symbols


def rank_symbols(index: RepoIndex, path: str, query: str, limit: int = 3) -> list[Symbol]:
    """Symbols of ``path`` sharing words with ``query``, best first.

    A query word found in the symbol's own name counts 2, in its container
    (class) name or docstring 1; ties go to code before error types when the
    query speaks of no error (a requirement sharing "user" with ``UserError``
    and ``UserStore`` is about the store), then to the earlier line.
    """
    wanted = set(tokenize(query))
    scored: list[tuple[int, int, Symbol]] = []
    for symbol in index.symbols.get(path, []):
        container = symbol.qualname.rsplit(".", 1)[0] if "." in symbol.qualname else ""
        score = 2 * len(wanted & set(tokenize(symbol.name)))
        score += len(wanted & (set(tokenize(container)) | set(tokenize(symbol.doc))))
        if score > 0:
            scored.append((-score, symbol.line, symbol))
    about_errors = bool(wanted & set(tokenize("error exception warning")))
    scored.sort(key=lambda item: (item[0], not about_errors and item[2].kind == "class"
                                  and _ERROR_TYPE.search(item[2].name) is not None, item[1], item[2].qualname))
    # Overloads (Java's constructors, a method per signature) are one symbol to change: the best of them.
    best: dict[str, Symbol] = {}
    for _, _, symbol in scored:
        best.setdefault(symbol.qualname, symbol)
    return list(best.values())[: max(limit, 0)]


def importers_of(index: RepoIndex, path: str) -> list[str]:
    """Files that import ``path`` (reverse import edges), sorted."""
    return sorted(source for source, targets in index.imports.items() if path in targets)


def fan_in(index: RepoIndex, path: str) -> int:
    """How many files import ``path``: a proxy for how risky changing it is. Looks at every file's imports:
    for many paths, ``fan_ins`` once."""
    return len(importers_of(index, path))


def fan_ins(index: RepoIndex) -> Counter[str]:
    """``fan_in`` of every imported file, counted in one pass."""
    return Counter(target for targets in index.imports.values() for target in set(targets))


def test_command_for(index: RepoIndex, test_paths: list[str]) -> str:
    """Command running only ``test_paths``; the suite command when unsure."""
    return command_for_tests(test_paths, index.test_command)


# The name starts with "test_": stop pytest from collecting it as a test in
# modules that import it.
test_command_for.__test__ = False  # type: ignore[attr-defined]  # pytest's marker; functions declare no such attribute
