"""Which files a requirement is about, and how many of them a plan should change. Pure.

Ranking is BM25 over each file's ranking tokens (path words three times,
symbol names twice, docstrings, then the whole text: a field-weighted BM25 by
repetition), restricted to the files a change may touch: product source, and
support files (scripts, build and CI configuration, type declarations,
vendored code, examples) only when the requirement names them. Each score is
then weighted by the file's size (``SIZE_PRIOR``): BM25's length normalisation
favours short files, while changes land in the large modules that hold most
of the code, so of two files matching alike the larger is the likelier change.

How many files to plan comes from the shape of the scores, not a fixed count:
a clear winner (``DOMINANT`` times the runner-up) is planned alone; otherwise
the ranking is uncertain and every file within ``RELATIVE_CUT`` of the best is
planned, at most ``MOST_FILES``: a flat head means several files are as likely
as the best, and missing the file a change needs costs more than reading one
too many.

A file defining an identifier the requirement writes out (`quoted`, dotted,
snake_case, camelCase or PascalCase), or named after one (``validate.URL`` ->
validate.py), gains half the best score; the modules the best file imports,
and its companion in the same folder, gain a share of their own score. Last,
the repository's history (wfqueue.analysis.history): each file's score becomes
its share of the best text score plus ``HISTORY_WEIGHT`` times its share of the
credit from the past commits most like the requirement, which also brings in
files those commits changed that no word of the requirement reaches.

Measured on real commit history (bench/localize.py, docs/BENCHMARKS.md): on
eighteen projects held out of all tuning, 4.4 files planned at recall 0.84
(plain BM25 at five files: 0.73) and precision 0.39; without the history, 4.8
files at recall 0.82 and precision 0.36. Precision varies by project (0.18 to
0.95): where the scores are flat the cut plans five or more files.

Separate path/symbol/docstring fields and other field weights, a
test-vocabulary signal, scores of symbol names and docstrings alone or of
40-80-line windows, file names written as words, a penalty for much-imported
modules, other BM25 constants, other cut-offs, word-pair (phrase) matches, and
for the history a recency weight, a per-file field of commit messages and a
prior for often-changed files were measured too and did not help on projects
held out of their tuning.
"""

from __future__ import annotations

import posixpath
import re

from wfqueue.analysis.files import CODE_LANGUAGES
from wfqueue.analysis.history import history_credit
from wfqueue.analysis.index import RepoIndex, rank_files
from wfqueue.analysis.roles import plannable

MOST_FILES = 7
RELATIVE_CUT = 0.35  # files below 35 % of the best score are incidental
DOMINANT = 2.0  # a best file scoring this many times the runner-up is the change on its own
# A file's score is multiplied by (1 + lines) ** SIZE_PRIOR: a 1000-line module outweighs a
# 100-line one matching alike by about 1.4.
SIZE_PRIOR = 0.15
DEFINER_BONUS = 0.5  # share of the best score a file gains for defining an identifier the requirement names
# Structure around the best file: what it imports, and its companion in the same folder
# (_termui_impl.py beside termui.py) change with it; both must match the requirement on their own.
NEIGHBOUR_BOOST = 0.3
COMPANION_BOOST = 0.5
# Credit from the past changes most like the requirement (wfqueue.analysis.history), scaled so that
# the file with the most credit gains this much of the best text score.
HISTORY_WEIGHT = 1.0
# `quoted`, dotted (Queue.enqueue), snake_case, camelCase or PascalCase (StaticFiles) words.
# A private name (`_encode_files`, `__cache_key`) is one too; a dunder (`__init__`) names no one symbol.
_IDENTIFIER = re.compile(r"`([^`\s]{3,})`|\b([A-Za-z_][A-Za-z0-9]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
                         r"|[A-Za-z]+_[A-Za-z0-9_]+|_{1,2}[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]"
                         r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)\b")


# A file's name, not a dotted identifier ("config.rs"; not "response.json", a call as often as a file), unless
# it is called.
_FILE_NAME = re.compile(r"\.(?:py|pyi|js|jsx|mjs|cjs|ts|tsx|md|rst|rs|go|rb|java|kt|kts|cs|php|swift|scala|toml|ya?ml)"
                        r"$")


# `Type::member` between two names, and Ruby's `Type#member` after a capitalised name (not "#123", an issue
# number, nor a document's anchor, README.md#usage).
_MEMBER_SEPARATOR = re.compile(r"(?<=[A-Za-z0-9_])::(?=[A-Za-z_])|(?<![\w.#/-])([A-Z]\w*)#(?=[a-z_])")


def candidates(index: RepoIndex, requirement: str) -> set[str]:
    """Code files a plan may change: product source, and support files the requirement names."""
    return {f.path for f in index.files
            if f.language in CODE_LANGUAGES and not f.is_test and plannable(f.path, f.is_test, requirement)}


def named_identifiers(requirement: str) -> list[str]:
    """Identifiers the requirement writes out (`quoted`, dotted, snake_case or camelCase), in order. Rust's and
    C++'s ``Error::root_cause`` and Ruby's ``IndifferentHash#dig`` are dotted names too."""
    found: list[str] = []
    dotted = _MEMBER_SEPARATOR.sub(lambda m: f"{m.group(1)}." if m.group(1) else ".", requirement)
    for match in _IDENTIFIER.finditer(dotted):
        name = (match.group(1) or match.group(2)).strip("().,:;")
        if all(len(part) <= 1 for part in name.split(".")):
            continue  # an abbreviation (e.g., i.e.), not a dotted name
        called = dotted.startswith("(", match.end())  # router.go() is a call, history.go a file
        if (called or not _FILE_NAME.search(name)) and name not in found:
            found.append(name)
    return found


def _definers(index: RepoIndex, paths: list[str], requirement: str) -> dict[str, float]:
    """path -> how much of the named identifiers it defines (a name defined in many files says little)."""
    names = {part.lower() for name in named_identifiers(requirement)
             for part in (name.split(".")[0], name.rsplit(".", 1)[-1]) if len(part) >= 4}
    owners: dict[str, set[str]] = {}
    for path in paths:
        # A module is named by its stem too: validate.URL points at validate.py as much as at URL.
        stem = posixpath.splitext(posixpath.basename(path))[0].strip("_").lower()
        defined = [symbol.name for symbol in index.symbols.get(path, [])] + index.attributes.get(path, [])
        for name in [name.lower() for name in defined] + [stem]:
            if name in names:
                owners.setdefault(name, set()).add(path)
    strength: dict[str, float] = {}
    for files in owners.values():
        for path in files:
            strength[path] = strength.get(path, 0.0) + 1.0 / len(files)
    return strength


def localize(index: RepoIndex, requirement: str) -> list[tuple[str, float]]:
    """Candidate files by relevance, best first (score desc, then path); only positive scores.

    The first line counts twice: it says what the change is, while the lines after it
    (a commit body, a long request) wander into tests, docs and review notes."""
    allowed = candidates(index, requirement)
    lines = requirement.strip().splitlines()
    query = (lines[0] + "\n" if lines else "") + requirement
    lines_of = {f.path: f.line_count for f in index.files}
    ranked = sorted(((p, round(s * (1 + lines_of.get(p, 0)) ** SIZE_PRIOR, 9))
                     for p, s in rank_files(index, query) if p in allowed), key=lambda item: (-item[1], item[0]))
    if not ranked:
        return []
    # An identifier the requirement writes out (`verify_token`, Queue.enqueue) points at the file defining it.
    best = ranked[0][1]
    bonus = _definers(index, [p for p, _ in ranked], requirement)
    boosted = [(p, s + DEFINER_BONUS * best * min(1.0, bonus.get(p, 0.0))) for p, s in ranked]
    around = _around_best(index, sorted(boosted, key=lambda item: (-item[1], item[0])))
    return _private_owner_first(index, _with_history(around, history_credit(index.history, query, allowed)),
                                requirement)


def _private_owner_first(index: RepoIndex, ranked: list[tuple[str, float]],
                         requirement: str) -> list[tuple[str, float]]:
    """``ranked`` with the one file defining a private name the requirement writes out (`_encode_files`) first,
    dominant: a module's private function is changed there. Loose words of a four-line fix ("file", "detection")
    spread its plan over eight files."""
    private = {name.lower() for name in named_identifiers(requirement) if name.startswith("_") and "." not in name}
    if not private or not ranked:
        return ranked
    owners = {path for path, _ in ranked
              if any(symbol.name.lower() in private for symbol in index.symbols.get(path, []))}
    if len(owners) != 1:
        return ranked  # defined in several files (or none): the words decide
    (owner,) = owners
    best = max(score for _, score in ranked)
    return [(owner, round(best * DOMINANT * 1.01, 9))] + [(p, s) for p, s in ranked if p != owner]


def _with_history(ranked: list[tuple[str, float]], credit: dict[str, float]) -> list[tuple[str, float]]:
    """Text scores as shares of the best, plus ``HISTORY_WEIGHT`` x each file's share of the most
    history credit. A file no word of the requirement reaches can enter on history alone: earlier
    changes like this one touched it."""
    if not credit:
        return ranked
    best, most = ranked[0][1], max(credit.values())
    text = dict(ranked)
    combined = {path: round(text.get(path, 0.0) / best + HISTORY_WEIGHT * credit.get(path, 0.0) / most, 9)
                for path in text.keys() | credit.keys()}
    return sorted(combined.items(), key=lambda item: (-item[1], item[0]))


def _around_best(index: RepoIndex, ranked: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scores of the modules the best file imports and of its companions, raised by a share of
    their own score (never from nothing: a neighbour that shares no word stays out)."""
    top = ranked[0][0]
    stem = posixpath.splitext(posixpath.basename(top))[0].strip("_").lower()
    folder = posixpath.dirname(top)
    imported = set(index.imports.get(top, []))
    raised: list[tuple[str, float]] = []
    for path, score in ranked:
        factor = 1.0 + (NEIGHBOUR_BOOST if path in imported else 0.0)
        name = posixpath.splitext(posixpath.basename(path))[0].lower()
        if path != top and posixpath.dirname(path) == folder and len(stem) >= 4 and stem in name:
            factor += COMPANION_BOOST
        raised.append((path, round(score * factor, 9)))
    return sorted(raised, key=lambda item: (-item[1], item[0]))


def focus(ranked: list[tuple[str, float]], most: int = MOST_FILES) -> list[tuple[str, float]]:
    """The head of a ranking worth planning: the best file alone when it dominates, else the
    files within ``RELATIVE_CUT`` of the best, at most ``most``."""
    if not ranked:
        return []
    best = ranked[0][1]
    if len(ranked) == 1 or best >= DOMINANT * ranked[1][1]:
        return ranked[:1]
    return [(p, s) for p, s in ranked if s >= best * RELATIVE_CUT][: max(most, 1)]
