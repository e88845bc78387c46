"""Which files a requirement is about, and how many of them a plan should change. Pure.

Ranking is BM25 over each file's ranking tokens (path words three times,
symbol names twice, docstrings, then the whole text: a field-weighted BM25 by
repetition), restricted to the files a change may touch: product source, and
support files (scripts, build and CI configuration, type-declaration bundles,
vendored code, examples) only when the requirement names them.

How many files to plan comes from the shape of the scores, not a fixed count:
a clear winner (1.5 times the runner-up) is planned alone, otherwise the files
within 40 % of the best, at most five. Measured on real commit history
(bench/localize.py), this keeps plain BM25's recall at five files while
planning about four; separate path/symbol/docstring fields, named-identifier
bonuses and a penalty for much-imported modules were measured too and did not
help on the tuning projects.
"""

from __future__ import annotations

from wfqueue.analysis.index import RepoIndex, rank_files
from wfqueue.analysis.roles import plannable
from wfqueue.analysis.vocabulary import CODE_LANGUAGES

MOST_FILES = 5
RELATIVE_CUT = 0.4  # files below 40 % of the best score are incidental
DOMINANT = 1.5  # a best file scoring this many times the runner-up is the change on its own


def candidates(index: RepoIndex, requirement: str) -> set[str]:
    """Code files a plan may change: product source, and support files the requirement names."""
    return {f.path for f in index.files
            if f.language in CODE_LANGUAGES and not f.is_test and plannable(f.path, f.is_test, requirement)}


def localize(index: RepoIndex, requirement: str) -> list[tuple[str, float]]:
    """Candidate files by relevance, best first (score desc, then path); only positive scores.

    The first line counts twice: it says what the change is, while the lines after it
    (a commit body, a long request) wander into tests, docs and review notes."""
    allowed = candidates(index, requirement)
    lines = requirement.strip().splitlines()
    query = (lines[0] + "\n" if lines else "") + requirement
    return [(p, s) for p, s in rank_files(index, query) if p in allowed]


def focus(ranked: list[tuple[str, float]], most: int = MOST_FILES) -> list[tuple[str, float]]:
    """The head of a ranking worth planning: the best file alone when it dominates, else the
    files within ``RELATIVE_CUT`` of the best, at most ``most``."""
    if not ranked:
        return []
    best = ranked[0][1]
    if len(ranked) == 1 or best >= DOMINANT * ranked[1][1]:
        return ranked[:1]
    return [(p, s) for p, s in ranked if s >= best * RELATIVE_CUT][: max(most, 1)]
