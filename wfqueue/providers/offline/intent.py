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
_IN_SENTENCE = r"(?:[^.;]|\.(?=\S))*"
# What may follow the thing asked for: the end, punctuation, or a word saying what it is about ("tests for",
# "a guide to", "docs covering"); not another noun ("test IDs", "docs build", "spec validator", "readme parser").
_ABOUT = (r"(?=\s*$|\s*[,.;:!]|\s+(?:for|to|of|in|on|about|around|covering|that|which|with|and|when|where|so|"
          r"checking|verifying|exercising|explaining|describing|showing|under|against|using|from)\b)")
_TEST_CLASS = r"(?-i:[A-Z][A-Za-z0-9]*[a-z0-9]Tests?)"
_DOC_FILE = r"[\w./-]+\.(?:md|markdown|rst|adoc)\b"
# The documents themselves ("the docs folder", "the README file"), not "the docs builder", "the docs CLI", "the
# readme parser": code named after them.
_DOC_END = (r"(?!\s+(?:builder|build|cli|command|server|parser|generator|renderer|tool|tooling|script|plugin|api|"
            r"config|configuration|dependenc(?:y|ies)|module|package|version|linter|theme|crawler|checker)\b)")
# "Add tests for ...", "Write unit and integration tests covering ...", "Increase test coverage of ...",
# "Cover X with tests", "Test that ...", "Add a new ArrayTypeNameTest", "Add more cases to TypeNameTest".
_TESTS = re.compile(
    r"^\W*(?:please\s+)?(?:"
    r"(?:add|write|create|extend|expand|improve|increase)\s+(?:an?\s+|some\s+|the\s+)?"
    r"(?:(?:more|missing|new|unit|integration|regression|end-to-end|e2e|edge[- ]case|property[- ]based|snapshot|"
    r"fuzz|smoke|pytest|jest|rspec|junit|code)\s+(?:and\s+|or\s+|/\s*)?)*"
    rf"(?:tests?|test\s+cases?|test\s+coverage|coverage|specs?|{_TEST_CLASS}){_ABOUT}"
    rf"|(?:add|write)\s+(?:more\s+|new\s+|missing\s+)?(?:test\s+)?cases?\s+(?:to|in)\s+"
    rf"(?:{_TEST_CLASS}\b|\S*(?:test|spec)\S*)"
    rf"|cover\b{_IN_SENTENCE}\bwith\s+(?:more\s+)?(?:unit\s+|integration\s+)?(?:tests?|specs?)\b"
    r"|test\s+(?:that|how|whether|each|every|all)\b"
    # "Parametrize the deprecation tests", "Refactor the CLI tests": work on tests that are there.
    r"|(?:parametri[sz]e|parameteri[sz]e|refactor|reorgani[sz]e|clean\s+up|split|deduplicate|speed\s+up)\s+"
    r"(?:the\s+)?(?:[\w-]+\s+){0,3}(?:tests?|specs?|test\s+suite|test\s+cases)\b)", re.IGNORECASE)
# "Document the retry options", "Update the README to explain ...", "Write a migration guide", "Add a changelog
# entry", "Explain X in the docs", "Add a section to docs/quickstart.md about ...", "Fix typos in the README",
# "Create CONTRIBUTING.md"; not "Add a docs command", "Fix the docs build" nor "Add OpenAPI docs".
_DOCS = re.compile(
    r"^\W*(?:please\s+)?(?:document\b(?!\s+(?:type|model|store|schema|upload)s?\b)"
    r"|(?:add|write|update|improve|extend|expand|fix|correct|clarify|rewrite|create|complete)\s+"
    r"(?:an?\s+|the\s+|some\s+|more\s+|missing\s+|our\s+)?"
    r"(?:(?!(?:for|to|of|in|on|with|from|openapi|swagger|redoc)\b)[\w-]+\s+)?"  # which: "a deployment guide"
    rf"(?:docs?|documentation|readme|guide|tutorial|changelog(?:\s+entr(?:y|ies))?|release\s+notes){_ABOUT}"
    rf"|(?:add|write|create|update|rewrite|improve|extend|expand)\s+(?:an?\s+|the\s+)?(?:new\s+)?{_DOC_FILE}"
    r"|(?:add|write)\s+(?:an?\s+|the\s+|some\s+|more\s+)?(?:new\s+)?(?:usage\s+)?"
    rf"(?:section|page|paragraph|note|examples?|faq)\s+(?:to|in|on)\s+(?:the\s+)?(?:docs?\b|documentation|readme|{_DOC_FILE})"
    r"|(?:fix|correct)\s+(?:the\s+|a\s+)?(?:typos?|wording|grammar|broken\s+links?)\s+in\s+(?:the\s+)?"
    rf"(?:docs?\b|documentation|readme|{_DOC_FILE})"
    rf"|(?:explain|describe)\b{_IN_SENTENCE}\bin\s+(?:the\s+)?(?:docs?|documentation|readme)\b"
    # "Fix the broken link to the AI Policy in CONTRIBUTING.md", "Add a FAQ entry to the docs about ...": a part
    # of a document, in a document.
    r"|(?:fix|update|correct|remove|replace|add|clarify|rewrite|reword)\s+(?:the\s+|an?\s+|some\s+|all\s+)?"
    r"(?:(?!(?:for|to|of|in|on|with|from|and|or)\b)[\w-]+\s+){0,2}(?:links?|urls?|typos?|wording|sections?|"
    r"examples?|entr(?:y|ies)|paragraphs?|headings?|badges?|instructions|steps|references?|faqs?)"
    rf"(?=\s+(?:to|in|of|on|from|for|about|at)\b|\s*$|\s*[,.;:]){_IN_SENTENCE}"  # not "link detection"
    r"\b(?:in|to|of|on|from)\s+(?:the\s+)?"
    rf"(?:{_DOC_FILE}|(?:docs?|documentation|readme){_DOC_END}))", re.IGNORECASE)
# Documentation inside the code: "Add docstrings to ...", "Add a docstring to ...", "Document every public
# function of ... with docstrings", "Add comments explaining ..."; not "Add comments endpoint" nor "Add docstring
# support".
_DOCSTRINGS = re.compile(
    r"^\W*(?:please\s+)?(?:(?:add|write|update|improve|complete|fix)\s+(?:an?\s+|the\s+|missing\s+|more\s+)?"
    rf"(?:docstrings?|doc\s+comments?|jsdoc|javadoc|rustdoc|type\s+hints|(?:code\s+)?comments?){_ABOUT}"
    rf"|document\b{_IN_SENTENCE}\bwith\s+(?:docstrings?|doc\s+comments?|comments?)\b)", re.IGNORECASE)
# What a "docs:" change names when it is documentation inside the code.
_IN_CODE = re.compile(r"\b(?:comments?|docstrings?|doc\s+comments?|jsdoc|javadoc|godoc|rustdoc)\b", re.IGNORECASE)
_NAMES_A_DOCUMENT = re.compile(rf"{_DOC_FILE}|\b(?:docs?|documentation|readme|changelog)\b{_DOC_END}(?!/)",
                               re.IGNORECASE)
_ASKED: tuple[tuple[Intent, re.Pattern[str]], ...] = (("docstrings", _DOCSTRINGS), ("tests", _TESTS), ("docs", _DOCS))
# How a commit-style requirement files itself ("test: ...", "docs(readme): ..."), after a workflow session's
# "GOAL: " (workflow_session.structure.as_text), and an area tag ("[auth] Add tests ...").
_GOAL = re.compile(r"^\s*GOAL:\s*")
_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?([a-z]+)(?:\([^)]*\))?!?:\s", re.IGNORECASE)
_AREA_TAG = re.compile(r"^\s*\[[^\]]*\]\s*")
_HEADING = re.compile(r"^\s*#+\s*")
_PREFIX_INTENTS: dict[str, Intent] = {"test": "tests", "tests": "tests", "docs": "docs", "doc": "docs"}
# A clause, after the first, asking to change the code as well: "... and fix the expiry check", "Then refactor",
# "..., and add a 404 handler", a bullet "- Fix the handler"; not "... and add more tests".
_MORE_OF_THE_SAME = (r"(?!\s+(?:an?\s+|the\s+|some\s+)?(?:more\s+|new\s+|missing\s+)?"
                     r"(?:tests?|cases?|specs?|docs?|examples?)\b)")
_CHANGE_TOO = re.compile(r"(?:\band\b|\bthen\b|\balso\b|\bif\s+not\b|[;:,]|\.\s|\n)\s*(?:[-*•]\s*)?"
                         r"(?:then\s+|also\s+|please\s+)?"
                         r"(?:fix|implement|refactor|rename|remove|delete|change|support|replace|rewrite|migrate|"
                         r"update|move|extract|optimi[sz]e|correct|introduce|handle|build|"
                         rf"(?:add|create|make){_MORE_OF_THE_SAME})\b", re.IGNORECASE)
# What tests are for may be a list of operations, verbs read as nouns ("tests for update and delete", "for
# create, update and delete operations", "for the update and delete handlers"): no clause asking for a change.
# Only words naming operations, ending the list (or followed by what they are, and where): "tests for the cache
# and optimize" and "for the router and fix handlers that return 500" still ask for a change.
_OPERATION = (r"(?:create|read|get|list|fetch|find|search|add|insert|update|upsert|patch|put|post|delete|remove|"
              r"rename|move|copy|save|load|import|export|login|logout|register|sign[- ]?(?:in|up|out))")
_OPERATION_LIST = re.compile(
    rf"\b(?:for|of|covering)\s+(?:the\s+)?{_OPERATION}(?:\s*(?:,|\band\b|\bor\b)\s*{_OPERATION})*\b"
    r"(?=\s*(?:$|[.,;:!?)\n])|\s+(?:and|or|of|in|on|at|from)\b|\s+(?:operations?|endpoints?|handlers?|methods?|functions?|commands?|"
    r"routes?|actions?|requests?|calls?|paths?|flows?|cases?|logic)\s*(?:$|[.,;:!?)\n]|\b(?:of|in|on|at|from)\b))",
    re.IGNORECASE)
# The line a workflow session adds for the constraints chosen in conflict resolution
# (workflow_session.structure.as_text): they say how to work, not what to change. Its SCOPE and CONTEXT come
# from the requirement (a Markdown requirement's bullets and body): they count.
_CONSTRAINTS_LINE = re.compile(r"^\s*CONSTRAINTS:.*(?:\n|$)", re.MULTILINE)


def intent_of(requirement: str) -> Intent:
    """What the requirement asks for: tests only, documents only, docstrings (documentation in the code), or a
    change to the code: the first line says which (or its "test:" / "docs:" prefix; a Markdown heading counts as
    a line), and no later clause may ask for a change to the code too."""
    lines = [_HEADING.sub("", line) for line in _CONSTRAINTS_LINE.sub("", requirement).splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return "change"
    first = _GOAL.sub("", lines[0])
    prefix = _PREFIX.match(first)
    intent: Intent = "change"
    rest = first
    if prefix:
        intent = _PREFIX_INTENTS.get(prefix.group(1).lower(), "change")
        rest = first[prefix.end():]
        if intent == "docs" and _IN_CODE.search(rest) and not _NAMES_A_DOCUMENT.search(rest):
            intent = "docstrings"  # "docs: fix malformed comment in cleanPath", not "docs: explain comments in README"
    else:
        first = _AREA_TAG.sub("", first)
        for kind, pattern in _ASKED:
            found = pattern.match(first)
            if found:
                intent, rest = kind, first[found.end():]
                break
    # A workflow session's SCOPE and CONTEXT repeat its goal ("SCOPE: core changes for: Update the README ..."):
    # the repetition is no second clause.
    later = [line.replace(first.strip(), "") for line in lines[1:]]
    text = _OPERATION_LIST.sub(lambda m: " " * len(m.group()), "\n".join([rest, *later]))
    if intent == "change" or _CHANGE_TOO.search(text):
        return "change"
    return intent
