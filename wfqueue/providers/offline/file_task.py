"""A task that writes one file, a test or a document, about code it reads and leaves as it is. Pure.

Plans of requirements asking only for tests (tests_only) or documents (docs_only) are made of these; the lite
planner and a collab area give them their ids, priority and source.
"""

from __future__ import annotations

import shlex
from typing import Literal

from wfqueue.analysis import RepoIndex
from wfqueue.providers.offline.changes import (
    change_phrase,
    file_entries,
    names_to_find,
    requirement_short,
    written_in,
)
from wfqueue.unified_task import Convergence, TaskFile, TaskTest, UnifiedTask

FileKind = Literal["testing", "docs"]


def code_and_symbols(index: RepoIndex, requirement: str, code: list[str]) -> str:
    """``code`` as a task names it: the files, then the symbols of them the requirement touches."""
    targets = [f.target for path in code for f in file_entries(index, path, requirement) if f.target]
    return ", ".join(code) + (f" ({', '.join(targets[:4])})" if targets else "")


def unchanged_criterion(code: list[str], what: str = "the code under test") -> list[str]:
    """The acceptance criterion that ``code`` (``what`` it is to the task) did not change; none without code."""
    shown = " ".join(shlex.quote(c) for c in code[:3])  # a path with a space is one path
    return [f"`git status --short -- {shown}` lists nothing: {what} is unchanged"] if code else []


def file_task(index: RepoIndex, requirement: str, task_id: str, path: str, exists: bool, code: list[str], *,
              kind: FileKind, description: str, verification: str) -> UnifiedTask:
    """The task writing ``path`` (extended when it ``exists``) about ``code``: the file changed, the name the
    requirement writes out in it (if it lacks it yet), ``verification`` passing and the code unchanged. It waits
    for no other task: the code it reads is there already."""
    tests = kind == "testing"
    # A Rust module holding its own tests gets new ones there: the file is both the one written and the code read.
    beside = path in code
    code = [c for c in code if c != path]
    short = requirement_short(requirement)
    names = names_to_find(requirement, written_in(index, [path], requirement))
    quoted = shlex.quote(path)
    criteria = ([f"`git status --short -- {quoted}` lists the file"]
                + [f"`grep -n \"{name}\" {quoted}` finds it" for name in names[:1]]
                + ([f"`{verification}` passes"] if verification else [])
                + ([f"`git diff -- {quoted}` changes only its test module: the code under test in it is unchanged"]
                   if beside else [])
                + unchanged_criterion(code, "the code under test" if tests else "the code it describes"))
    return UnifiedTask(
        id=task_id,
        title=f"{change_phrase(requirement)} ({path})",
        description=description,
        depends_on=[],
        convergence=Convergence(
            criteria=criteria[:5],
            verification=verification or (f"manual: run the tests in {path}" if tests
                                          else f"manual: read {path} beside {', '.join(code) or 'the code'}"),
            definition_of_done=(f"{path} holds the tests asked for and they pass" if tests
                                else f"{path} says what the requirement asks and the suite passes"),
        ),
        type=kind,
        priority="medium",
        effort="medium" if tests and not exists else "small",
        scope=", ".join([path, *code]),
        focus_paths=[path, *code],
        files=[TaskFile(path=path, action="modify" if exists else "create",
                        changes=[f"{'tests for' if tests else 'document'}: {short}"], conflict_risk="low")],
        implementation=[*(f"Read {p}" for p in code),
                        f"Write {'tests ' if tests else ''}in {path}{' (its test module)' if beside else ''} for: "
                        f"{short}"],
        test=TaskTest(commands=[verification] if verification else [], unit=[path] if tests else []),
    )
