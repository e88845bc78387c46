"""The files one angle explores: how they are chosen and what they look like.

``AngleScope`` ranks the repository's files for the requirement plus the
angle's own vocabulary (BM25 via ``rank_files``) and holds what every finding
is computed from: the index, the ranked files, their fan-in and a memoising
reader over ``read(path)``, the only I/O.  ``relevant_files`` explains why each
file was chosen; ``structure`` summarises the repository around them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from wfqueue.analysis import CODE_LANGUAGES, RepoIndex, fan_ins, rank_files, rank_symbols, tokenize
from wfqueue.analysis.roles import file_role, plannable
from wfqueue.analysis.symbols import Symbol
from wfqueue.lite.angles import ANGLES, GENERIC, angle_key
from wfqueue.lite.finding_checks import split_lines
from wfqueue.lite.models import RelevantFile

MAX_FILES = 8
MAX_STRUCTURE = 6
TESTING_TEST_FILES = 5  # the testing angle keeps the rest of its files for the code under test
HIGH, MEDIUM = 0.6, 0.3  # score ratios to the best file
MAX_MANIFESTS = 2  # the dependencies angle lists the files declaring external packages
MANIFESTS = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt", "package.json", "go.mod", "Cargo.toml")


class Reader:
    """``read`` with a memo; a file that cannot be read has no lines."""

    def __init__(self, read: Callable[[str], str]) -> None:
        self._read = read
        self._lines: dict[str, list[str]] = {}
        self._texts: dict[str, str] = {}

    def text(self, path: str) -> str:
        if path not in self._texts:
            try:
                # A BOM is not part of line 1 (verification decodes with utf-8-sig).
                self._texts[path] = (self._read(path) or "").removeprefix("\ufeff")
            except (OSError, UnicodeDecodeError, ValueError):
                self._texts[path] = ""
        return self._texts[path]

    def lines(self, path: str) -> list[str]:
        if path not in self._lines:
            text = self.text(path)
            self._lines[path] = split_lines(text) if text else []
        return self._lines[path]


class AngleScope:
    """One angle's view of the repository: its spec, query and ranked files."""

    def __init__(self, index: RepoIndex, requirement: str, angle: str, read: Callable[[str], str]) -> None:
        self.index = index
        self.requirement = requirement
        self.angle = angle
        self.key = angle_key(angle)
        self.spec = ANGLES.get(self.key, GENERIC)
        self.query = f"{requirement} {self.spec.vocabulary}".strip()
        self.reader = Reader(read)
        self.by_path = {f.path: f for f in index.files}
        self.fan_in = fan_ins(index)
        self.manifests = self._manifests()
        self.ranked = self._rank()
        self.files = [path for path, _ in self.ranked]

    def _is_code(self, path: str) -> bool:
        """A source file defining something (empty package inits do not count), not a vendored copy of another
        project unless the requirement names it: pip's _vendor/ made 5 of 8 "relevant files" of a change to
        `pip list`, and left out commands/list.py. (Examples are read: they show how the code is used.)"""
        source = self.by_path.get(path)
        return (source is not None and source.language in CODE_LANGUAGES and bool(self.index.symbols.get(path))
                and (file_role(path, source.is_test) != "vendored" or plannable(path, False, self.requirement)))

    def _manifests(self) -> list[str]:
        if self.key != "dependencies":
            return []
        return [m for m in MANIFESTS if m in self.by_path][:MAX_MANIFESTS]

    def _rank(self) -> list[tuple[str, float]]:
        limit = MAX_FILES - len(self.manifests)
        ranked = [
            (path, score)
            for path, score in rank_files(self.index, self.query, include_tests=self.spec.tests)
            if self._is_code(path)
        ]
        if ranked:
            best = ranked[0][1]
            ranked = [(path, score) for path, score in ranked if score >= best * 0.1]
            if self.spec.tests:
                # Tests first, but keep room for the modules they exercise.
                tests = [item for item in ranked if self.by_path[item[0]].is_test][:TESTING_TEST_FILES]
                sources = [item for item in ranked if not self.by_path[item[0]].is_test]
                ranked = sorted(tests + sources[: limit - len(tests)], key=lambda i: (-i[1], i[0]))
            return ranked[:limit]
        # Nothing shares a word with the query: the most depended-on modules.
        central = sorted(
            (f.path for f in self.index.files if self._is_code(f.path) and not f.is_test),
            key=lambda p: (-self.fan_in[p], p),
        )
        return [(path, 0.0) for path in central[: min(limit, 4)]]

    def symbols(self, path: str, limit: int = 3) -> list[Symbol]:
        """The symbols of ``path`` that best match the query."""
        return rank_symbols(self.index, path, self.query, limit=limit)

    def code_files(self) -> list[str]:
        """The relevant product code (not tests, not examples or scripts the requirement does not name), in rank
        order: what a change is made to, and what the constraints and questions are about. Express's examples/
        came out as "which module should own the change" and "has no tests: should this change add them?"."""
        return [p for p in self.files if plannable(p, self.by_path[p].is_test, self.requirement)]


def _matched_words(scope: AngleScope, path: str) -> list[str]:
    """Query words (as written) whose tokens the file contains."""
    tokens = set(scope.index.doc_tokens.get(path, []))
    words: list[str] = []
    for word in re.findall(r"[A-Za-z][A-Za-z0-9]*", scope.query):
        stems = tokenize(word)
        if stems and any(s in tokens for s in stems) and word.lower() not in words:
            words.append(word.lower())
    return words


def relevant_files(scope: AngleScope) -> list[RelevantFile]:
    """The ranked files, each with its relevance and the reasons it was chosen."""
    best = scope.ranked[0][1] if scope.ranked else 0.0
    found: list[RelevantFile] = []
    for path, score in scope.ranked:
        ratio = score / best if best > 0 else 0.0
        relevance = "high" if ratio >= HIGH else ("medium" if ratio >= MEDIUM else "low")
        reasons: list[str] = []
        words = _matched_words(scope, path)
        if words:
            reasons.append(f"matches {', '.join(words[:6])}")
        symbols = [s.qualname for s in scope.symbols(path, limit=3)]
        if symbols:
            reasons.append(f"symbols {', '.join(symbols)}")
        importers = scope.fan_in[path]
        if importers:
            reasons.append(f"imported by {importers} module{'s' if importers != 1 else ''}")
        source = scope.by_path[path]
        if source.is_test:
            subjects = sorted(p for p, tests in scope.index.tests_for.items() if path in tests)
            reasons.append(f"tests {', '.join(subjects[:3])}" if subjects else "test file")
        if best <= 0:
            reasons.insert(0, "no word of the query occurs in the code; central module")
        rationale = "; ".join(reasons) or "ranked by BM25"
        found.append(RelevantFile(path=path, relevance=relevance, rationale=rationale))
    if scope.key == "dependencies":
        found += [
            RelevantFile(path=m, relevance="low", rationale="declares the external dependencies")
            for m in scope.manifests
        ]
    return found


def structure(scope: AngleScope) -> list[str]:
    """The repository at a glance, and where the relevant files sit in it."""
    index = scope.index
    languages = ", ".join(f"{lang} {n}" for lang, n in sorted(index.languages.items(), key=lambda i: (-i[1], i[0])))
    tests = sum(1 for f in index.files if f.is_test)
    lines = [f"{len(index.files)} files indexed ({languages}); {tests} test files"]
    groups: dict[str, list[str]] = {}
    for path in scope.files:
        groups.setdefault(posixpath.dirname(path) or ".", []).append(posixpath.basename(path))
    label = scope.angle.strip() or "the requirement"
    for directory, names in groups.items():
        lines.append(f"{directory}/: {', '.join(names)} ({len(names)} relevant to {label})")
    if scope.spec.around:
        hubs = sorted(scope.fan_in, key=lambda p: (-scope.fan_in[p], p))[:3]
        if hubs:
            lines.append("Most imported modules: " + ", ".join(f"{p} ({scope.fan_in[p]})" for p in hubs))
    if scope.spec.tests:
        run = index.test_command or "unknown"
        lines.append(f"{len(index.tests_for)} source modules have tests; suite command: {run}")
    return lines[:MAX_STRUCTURE]
