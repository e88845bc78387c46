"""Where a requirement's sentences end. Pure.

After ``.``, ``!``, ``?`` or ``。`` and a space, or at a line's end; not after an abbreviation: "random jitter,
e.g. Retry(max=3)" is one sentence (it was cut at "e.g" in task titles and workflow goals).
"""

from __future__ import annotations

import re

_END = re.compile(r"(?<=[.!?。])\s+|\n")
_ABBREVIATION = re.compile(r"(?:^|[\s(])(?:e\.g|i\.e|etc|vs|cf|approx|incl|resp)\.$", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    """``text``'s sentences, stripped, empty ones left out."""
    found: list[str] = []
    start = 0
    for end in _END.finditer(text):
        if "\n" not in end.group(0) and _ABBREVIATION.search(text[start: end.start()]):
            continue
        found.append(text[start: end.start()])
        start = end.end()
    found.append(text[start:])
    return [s.strip() for s in found if s.strip()]


def first_sentence(text: str) -> str:
    return next(iter(sentences(text)), "")
