"""A requirement that asks only for tests ("Add tests for the router"): the code it is about, the test files
to write, and what their tasks say. Pure.

Such a plan changes no code: a task per test file, extended or created where the project keeps the tests of
the code it covers (tests_placement), naming that code so the agent reads it, and checking that it stayed as
it was.
"""

from __future__ import annotations

import posixpath
import re

from wfqueue.analysis import RepoIndex, tokenize
from wfqueue.analysis.files import is_test_path
from wfqueue.analysis.localize import named_identifiers
from wfqueue.analysis.testmap import subject_stem
from wfqueue.providers.offline.changes import file_entries, is_code, requirement_brief
from wfqueue.providers.offline.tests_placement import where_tests_go

# A requirement that asks for tests, as its first words say it: "Add tests for ...", "Write unit tests covering
# ...", "Increase test coverage of ...", "Cover X with tests", "Test that ..."; not "Add a test command".
_TESTS_ASKED = re.compile(
    r"^\W*(?:please\s+)?(?:"
    r"(?:add|write|create|extend|expand|improve|increase)\s+(?:an?\s+|some\s+|the\s+)?"
    r"(?:(?:more|missing|new|unit|integration|regression|end-to-end|e2e|edge[- ]case|property[- ]based)\s+)*"
    r"(?:tests?|test\s+cases?|test\s+coverage|coverage|specs?)\b"
    r"(?!\s+(?:command|runner|helper|mode|flag|option|script|target|server|client|harness)s?\b)"
    r"|cover\b[^.;]*\bwith\s+(?:more\s+)?(?:unit\s+|integration\s+)?(?:tests?|specs?)\b"
    r"|test\s+(?:that|how|whether|each|every|all)\b)", re.IGNORECASE)
# How a commit-style requirement files itself ("test: ...", "test(parser): ..."), after a workflow session's
# "GOAL: " (workflow_session.structure.as_text).
_GOAL = re.compile(r"^\s*GOAL:\s*")
_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?([a-z]+)(?:\([^)]*\))?!?:\s", re.IGNORECASE)
_AREA_TAG = re.compile(r"^\s*\[[^\]]*\]\s*")  # "[auth] Add tests for ..."
# A clause asking to change the code as well: "... and fix the expiry check", "Then refactor ...".
_CHANGE_TOO = re.compile(r"(?:\band\b|\bthen\b|\balso\b|[;:]|\.\s|^)\s*(?:then\s+|also\s+|please\s+)?"
                         r"(?:fix|implement|refactor|rename|remove|delete|change|support|replace|rewrite|migrate|"
                         r"update|move|extract|optimi[sz]e)\b", re.IGNORECASE | re.MULTILINE)
# The lines a workflow session adds to its goal (workflow_session.structure.as_text): its scope, repeated
# context and the constraints chosen in conflict resolution, which say how to work, not what to change.
_STRUCTURE_LINE = re.compile(r"^\s*(?:SCOPE|CONTEXT|CONSTRAINTS):.*$", re.MULTILINE)


def asks_only_for_tests(requirement: str) -> bool:
    """Whether the requirement asks for tests of code that stays as it is: its first line asks for tests (or is
    filed as "test:"), and no clause asks for a change to the code too ("Add tests for X and fix Y" changes Y)."""
    lines = [line for line in requirement.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return False
    first = _GOAL.sub("", lines[0])
    prefix = _PREFIX.match(first)
    if prefix:
        asked = prefix.group(1).lower() == "test"
        first = first[prefix.end():]
    else:
        asked = bool(_TESTS_ASKED.match(_AREA_TAG.sub("", first)))
    own_words = _STRUCTURE_LINE.sub("", "\n".join([first, *lines[1:]]))
    return asked and not _CHANGE_TOO.search(own_words)


def code_under_test(index: RepoIndex, requirement: str, ranked: list[str]) -> list[str]:
    """The code files a requirement asking for tests is about, in ``ranked`` order (the localizer's): the files
    it names; else those defining an identifier it names (``verify_token``); else those its words name
    (router.py for "the router"); else the files of a folder it names ("the auth package"); else the best
    ranked. The localizer also ranks the modules using the code: their tests are not what is asked for."""
    code = [p for p in ranked if is_code(index, p)]
    # A test file named says where the tests go, not what they test ("in tests/test_handlers.py for the router").
    words = set(tokenize(" ".join(w for w in requirement.split() if not is_test_path(w.strip("`'\",.;:()")))))
    identifiers = {name.lower() for name in named_identifiers(requirement)}

    def defines_named(path: str) -> bool:
        return any(s.qualname.lower() in identifiers or s.name.lower() in identifiers
                   for s in index.symbols.get(path, []))

    def named_by(name: str) -> bool:
        terms = set(tokenize(name))
        return bool(terms) and terms <= words

    def package_file(path: str) -> bool:  # named after its folder (subject_stem): the folder's tier decides
        return posixpath.basename(path).split(".")[0] in ("__init__", "index", "mod", "lib", "main")

    tiers = [
        [p for p in code if p in requirement],
        [p for p in code if defines_named(p)],
        [p for p in code if not package_file(p) and named_by(subject_stem(p))],
        [p for p in code if index.symbols.get(p) and named_by(posixpath.basename(posixpath.dirname(p)))],
    ]
    return next((tier for tier in tiers if tier), code[:1])


def tests_to_write(index: RepoIndex, requirement: str, ranked: list[str]) -> dict[str, tuple[bool, list[str]]]:
    """Each test file a tests-only requirement writes, best first: whether it exists, and the code it covers."""
    plan: dict[str, tuple[bool, list[str]]] = {}
    for path in code_under_test(index, requirement, ranked):
        test_file, exists = where_tests_go(index, [path], requirement)
        plan.setdefault(test_file, (exists, []))[1].append(path)
    if not plan:  # no code at all: the test file the requirement names, or a first test file
        test_file, exists = where_tests_go(index, [], requirement)
        plan[test_file] = (exists, [])
    return plan


def tests_task_description(index: RepoIndex, requirement: str, test_file: str, exists: bool,
                           code: list[str]) -> str:
    """What a tests-only task does: the requirement, where its tests go, the code they cover (not changed)."""
    brief = requirement_brief(requirement)
    targets = [f.target for path in code for f in file_entries(index, path, requirement) if f.target]
    where = ", ".join(code) + (f" ({', '.join(targets[:4])})" if targets else "")
    return (f"{brief[:1].upper() + brief[1:]}: the tests go in {test_file} ({'extended' if exists else 'a new file'})."
            + (f" The code under test, {where}, stays as it is: the tests describe what it does now and pass "
               "against it." if code else ""))


def unchanged_criterion(code: list[str]) -> list[str]:
    """The acceptance criterion that the code under test did not change (none without code)."""
    return [f"`git status --short -- {' '.join(code[:3])}` lists nothing: the code under test is unchanged"] if code \
        else []
