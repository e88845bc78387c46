"""What kind of work a requirement asks for, as its first words say it: tests only, documentation only, or a
change to the code (everything else). Pure.

"Add tests for the router" and "Document the retry options in README.md" change no code; "Add tests for X and
fix Y" or "Update the README and refactor the CLI" do, and are planned as changes.
"""

from __future__ import annotations

import re
from typing import Literal

Intent = Literal["tests", "docs", "docstrings", "change"]

# Within a sentence: a full stop followed by a space ends it, one inside a file name (tokens.py) does not.
# "Add tests for ...", "Write unit tests covering ...", "Increase test coverage of ...", "Cover X with tests",
# "Test that ..."; not "Add a test command".
_TESTS = re.compile(
    r"^\W*(?:please\s+)?(?:"
    r"(?:add|write|create|extend|expand|improve|increase)\s+(?:an?\s+|some\s+|the\s+)?"
    r"(?:(?:more|missing|new|unit|integration|regression|end-to-end|e2e|edge[- ]case|property[- ]based)\s+)*"
    r"(?:tests?|test\s+cases?|test\s+coverage|coverage|specs?|(?-i:[A-Z][A-Za-z0-9]*[a-z0-9]Tests?))\b"
    r"(?!\s+(?:command|runner|helper|mode|flag|option|script|target|server|client|harness)s?\b)"
    # "Add more cases to TypeNameTest", "Add cases to tests/test_router.py"
    r"|(?:add|write)\s+(?:more\s+|new\s+|missing\s+)?(?:test\s+)?cases?\s+(?:to|in)\s+"
    r"(?:(?-i:[A-Z][A-Za-z0-9]*[a-z0-9]Tests?)\b|\S*(?:test|spec)\S*)"
    r"|cover\b(?:[^.;]|\.(?=\S))*\bwith\s+(?:more\s+)?(?:unit\s+|integration\s+)?(?:tests?|specs?)\b"
    r"|test\s+(?:that|how|whether|each|every|all)\b)", re.IGNORECASE)
# "Document the retry options", "Update the README to explain ...", "Write a migration guide", "Add a changelog
# entry", "Explain X in the docs"; not "Add a docs command" nor "Update the documentation builder".
_DOCS = re.compile(
    r"^\W*(?:please\s+)?(?:document\b"
    r"|(?:add|write|update|improve|extend|expand|fix|correct|clarify|rewrite|create|complete)\s+"
    r"(?:an?\s+|the\s+|some\s+|more\s+|missing\s+|our\s+)?"
    r"(?:(?!(?:for|to|of|in|on|with|from)\b)[\w-]+\s+)?"  # one word saying which: "a deployment guide"
    r"(?:docs?|documentation|readme|guide|tutorial|changelog|release\s+notes)\b"
    r"(?!\s+(?:command|builder|generator|site|server|tool|script|target|workflow|pipeline|job)s?\b)"
    r"|(?:explain|describe)\b(?:[^.;]|\.(?=\S))*\bin\s+(?:the\s+)?(?:docs?|documentation|readme)\b)", re.IGNORECASE)
# Documentation inside the code: "Add docstrings to ...", "Document every public function of ... with
# docstrings", "Add comments explaining ...".
_DOCSTRINGS = re.compile(
    r"^\W*(?:please\s+)?(?:(?:add|write|update|improve|complete|fix)\s+(?:the\s+|missing\s+|more\s+)?"
    r"(?:docstrings?|doc\s+comments?|jsdoc|javadoc|rustdoc|type\s+hints|comments?)\b"
    r"|document\b(?:[^.;]|\.(?=\S))*\bwith\s+(?:docstrings?|doc\s+comments?|comments?)\b)", re.IGNORECASE)
_ASKED: tuple[tuple[Intent, re.Pattern[str]], ...] = (("docstrings", _DOCSTRINGS), ("tests", _TESTS), ("docs", _DOCS))
# How a commit-style requirement files itself ("test: ...", "docs(readme): ..."), after a workflow session's
# "GOAL: " (workflow_session.structure.as_text), and an area tag ("[auth] Add tests ...").
_GOAL = re.compile(r"^\s*GOAL:\s*")
_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?([a-z]+)(?:\([^)]*\))?!?:\s", re.IGNORECASE)
_AREA_TAG = re.compile(r"^\s*\[[^\]]*\]\s*")
_PREFIX_INTENTS: dict[str, Intent] = {"test": "tests", "tests": "tests", "docs": "docs", "doc": "docs"}
# A clause, after the first, asking to change the code as well: "... and fix the expiry check", "Then refactor".
_CHANGE_TOO = re.compile(r"(?:\band\b|\bthen\b|\balso\b|[;:]|\.\s|\n)\s*(?:then\s+|also\s+|please\s+)?"
                         r"(?:fix|implement|refactor|rename|remove|delete|change|support|replace|rewrite|migrate|"
                         r"update|move|extract|optimi[sz]e)\b", re.IGNORECASE)
# The lines a workflow session adds to its goal (workflow_session.structure.as_text): its scope, repeated
# context and the constraints chosen in conflict resolution, which say how to work, not what to change.
_STRUCTURE_LINE = re.compile(r"^\s*(?:SCOPE|CONTEXT|CONSTRAINTS):.*(?:\n|$)", re.MULTILINE)


def intent_of(requirement: str) -> Intent:
    """What the requirement asks for: tests only, documents only, docstrings (documentation in the code), or a
    change to the code: the first line says which (or its "test:" / "docs:" prefix), and no later clause may ask
    for a change to the code too."""
    lines = [line for line in _STRUCTURE_LINE.sub("", requirement).splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return "change"
    first = _GOAL.sub("", lines[0])
    prefix = _PREFIX.match(first)
    intent: Intent = "change"
    rest = first
    if prefix:
        intent = _PREFIX_INTENTS.get(prefix.group(1).lower(), "change")
        rest = first[prefix.end():]
    else:
        first = _AREA_TAG.sub("", first)
        for kind, pattern in _ASKED:
            found = pattern.match(first)
            if found:
                intent, rest = kind, first[found.end():]
                break
    if intent == "change" or _CHANGE_TOO.search("\n".join([rest, *lines[1:]])):
        return "change"
    return intent
