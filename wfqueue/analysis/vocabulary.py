"""What the repository's words say about a requirement. Pure."""

from __future__ import annotations

import re

from wfqueue.analysis.index import RepoIndex
from wfqueue.analysis.ranking import tokenize


def novel_terms(index: RepoIndex, requirement: str) -> list[str]:
    """Requirement words (as written, lower-cased) that no file of the repository uses:
    the concepts a plan has to create rather than change. A word counts as used when
    its stem is, so "limiting" is not novel in code that says "limit"."""
    vocabulary = {token for tokens in index.doc_tokens.values() for token in tokens}
    words: list[str] = []
    for word in re.findall(r"[A-Za-z][A-Za-z0-9]*", requirement):
        stems = tokenize(word)
        if stems and len(word) > 2 and all(s not in vocabulary for s in stems) and word.lower() not in words:
            words.append(word.lower())
    return words
