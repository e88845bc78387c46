"""A requirement that asks only for tests ("Add tests for the router", intent.intent_of): the code it is
about, the test files to write, and what their tasks say. Pure.

Such a plan changes no code: a task per test file, extended or created where the project keeps the tests of
the code it covers (tests_placement), naming that code so the agent reads it, and checking that it stayed as
it was.
"""

from __future__ import annotations

from wfqueue.analysis import RepoIndex, test_command_for
from wfqueue.providers.offline.changes import named_code, requirement_brief
from wfqueue.providers.offline.file_task import code_and_symbols, file_task
from wfqueue.providers.offline.tests_placement import where_tests_go
from wfqueue.unified_task import UnifiedTask


def tests_to_write(index: RepoIndex, requirement: str, ranked: list[str]) -> dict[str, tuple[bool, list[str]]]:
    """Each test file a tests-only requirement writes, best first: whether it exists, and the code it covers."""
    plan: dict[str, tuple[bool, list[str]]] = {}
    for path in named_code(index, requirement, ranked):
        test_file, exists = where_tests_go(index, [path], requirement)
        plan.setdefault(test_file, (exists, []))[1].append(path)
    if not plan:  # no code at all: the test file the requirement names, or a first test file
        test_file, exists = where_tests_go(index, [], requirement)
        plan[test_file] = (exists, [])
    return plan


def _description(index: RepoIndex, requirement: str, test_file: str, exists: bool, code: list[str]) -> str:
    """What a tests-only task does: the requirement, where its tests go, the code they cover (not changed)."""
    brief = requirement_brief(requirement)
    where = code_and_symbols(index, requirement, code)
    place = "its own test module, extended" if test_file in code else "extended" if exists else "a new file"
    return (f"{brief[:1].upper() + brief[1:]}: the tests go in {test_file} ({place})."
            + (f" The code under test, {where}, stays as it is: the tests describe what it does now and pass "
               "against it." if code else ""))


def tests_task(index: RepoIndex, requirement: str, task_id: str, path: str, exists: bool,
               code: list[str]) -> UnifiedTask:
    """The task writing tests of ``code`` in the test file ``path``, verified by running that file."""
    return file_task(index, requirement, task_id, path, exists, code, kind="testing",
                     description=_description(index, requirement, path, exists, code),
                     verification=test_command_for(index, [path]) or index.test_command)
