"""Tokenisation and BM25 scoring for matching a task description to files.

Queries are prose ("add per-user rate limiting") while documents are code
("RateLimiter", "per_user_limit"), so both sides go through the same
tokenizer: identifiers are split into words, noise is dropped and words are
lightly stemmed so inflections meet ("limiting", "limiter" -> "limit").
"""

from __future__ import annotations

import math
import re
from collections import Counter

# Words: plural acronyms ("URLs"), acronyms ("HTTP" in "HTTPServer"),
# capitalised or lower words, and digit runs.  Anything else (_, -, /, .,
# spaces, non-ASCII) separates words, which splits snake/kebab case and paths.
_WORD = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

STOPWORDS: frozenset[str] = frozenset(
    # English function words.
    """a an the and or but nor not no of to in on at by for from with without into onto
    over under about as than then so if else when while where which who whom whose what
    how why this that these those it its is are was were be been being am do does did
    done has have had having can could should would will shall may might must i me my
    we us our you your he him his she her they them their there here all any each every
    some such only own same too very just also via per both either neither up down out
    off again once new""".split()
    # Request verbs: how tasks are phrased, not what code is about.
    + "add adds adding implement implementing fix fixes fixing make ensure allow please need want".split()
    # Code keywords and noise that every file of a language shares.
    + """self cls def return import none true false null nil undefined class function func
    fn const let var elif pass lambda async await yield try except finally raise throw
    throws catch public private protected static void int float bool boolean dict tuple
    args kwargs pkg src lib py js ts""".split()
)
_MIN_STEM = 3
_PLURAL_ES: tuple[str, ...] = ("sses", "xes", "zes", "ches", "shes")
_KEEP_S: tuple[str, ...] = ("ss", "us", "is")
_UNDOUBLE_EXCEPT = frozenset("lsz")


def _undouble(word: str) -> str:
    """ "mapp" -> "map", "runn" -> "run"; "pass"/"call" keep their pair."""
    if (
        len(word) > _MIN_STEM
        and word[-1] == word[-2]
        and word[-1] not in _UNDOUBLE_EXCEPT
        and word[-1].isalpha()
    ):
        return word[:-1]
    return word


def stem(word: str) -> str:
    """Light suffix stripping; a stem never drops below three characters.

    Order: plurals, then one of -ing/-ed/-er (with a second -er pass so
    "filtering" -> "filter" -> "filt" meets "filter" -> "filt"), then a final
    silent "e" so "cache"/"caching"/"caches" all become "cach".
    """
    if len(word) <= _MIN_STEM or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) - 3 >= _MIN_STEM - 1:
        word = word[:-3] + "y"
    elif word.endswith(_PLURAL_ES) and len(word) - 2 >= _MIN_STEM:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(_KEEP_S) and len(word) - 1 >= _MIN_STEM:
        word = word[:-1]
    for suffix in ("ing", "ed", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            word = _undouble(word[: -len(suffix)])
            break
    if word.endswith("er") and len(word) - 2 >= _MIN_STEM:
        word = word[:-2]
    if word.endswith("e") and not word.endswith("ee") and len(word) - 1 >= _MIN_STEM:
        word = word[:-1]
    return word


def _normalise(raw: str) -> str:
    """Token for one raw word, or "" when it is noise."""
    word = raw.lower()
    if len(word) < 2 or word in STOPWORDS:
        return ""
    stemmed = stem(word)
    return "" if stemmed in STOPWORDS else stemmed


def tokenize(text: str) -> list[str]:
    """Lowercase, stemmed, stopword-free words of prose, code or a path.

    Splits camelCase, snake_case, kebab-case, paths and letter/digit runs;
    drops one-character words.  Order and repetitions are kept (BM25 needs
    term frequencies).
    """
    words = _WORD.findall(text)
    # Identifiers repeat a lot, so each distinct word is normalised once; the
    # memo is local, so no state outlives the call.
    memo = {word: _normalise(word) for word in set(words)}
    return [token for token in map(memo.__getitem__, words) if token]


def bm25_scores(
    query_tokens: list[str], docs: dict[str, list[str]], k1: float = 1.5, b: float = 0.75
) -> dict[str, float]:
    """Okapi BM25 score of every document (id -> tokens) for the query.

    Uses the non-negative idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``.  A term
    repeated in the query counts that many times.  Every document id gets a
    score (0.0 when nothing matches); iteration orders are fixed, so equal
    input always gives bit-identical output.
    """
    if not docs:
        return {}
    query = Counter(query_tokens)
    terms = sorted(query)
    ids = sorted(docs)
    # Counter() counts in C; only the query terms' counts are kept.
    tfs: dict[str, list[int]] = {}
    for doc_id in ids:
        counts = Counter(docs[doc_id])
        tfs[doc_id] = [counts.get(term, 0) for term in terms]
    total = len(ids)
    average = (sum(len(docs[doc_id]) for doc_id in ids) / total) or 1.0
    idf = [
        math.log(1.0 + (total - df + 0.5) / (df + 0.5))
        for df in (sum(1 for doc_id in ids if tfs[doc_id][k]) for k in range(len(terms)))
    ]
    weights = [query[term] for term in terms]
    scores: dict[str, float] = {}
    for doc_id in ids:
        norm = k1 * (1.0 - b + b * len(docs[doc_id]) / average)
        score = 0.0
        for k, tf in enumerate(tfs[doc_id]):
            if tf:
                score += weights[k] * idf[k] * tf * (k1 + 1.0) / (tf + norm)
        scores[doc_id] = score
    return scores
