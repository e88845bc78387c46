"""Per-file planning decisions shared by the offline planners (collab areas, lite plans). Pure.

Which symbols of a file a requirement touches, how risky and large a change
is, where a module for a concept the code lacks would go, and the order in
which files should change (a module after the modules it imports).
"""

from __future__ import annotations

import posixpath
import re

from wfqueue.analysis import RepoIndex, fan_in, novel_terms, rank_symbols, test_command_for
from wfqueue.analysis.symbols import Symbol
from wfqueue.unified_task import TaskFile

_VERB_TYPES = {
    "add": "feature", "implement": "feature", "support": "feature", "create": "feature", "introduce": "feature",
    "fix": "fix", "repair": "fix", "resolve": "fix", "refactor": "refactor", "restructure": "refactor",
    "test": "testing", "document": "docs", "remove": "chore", "upgrade": "chore",
}


def requirement_short(requirement: str, limit: int = 80) -> str:
    first = re.split(r"(?<=[.!?。])\s+|\n", requirement.strip(), maxsplit=1)[0].rstrip(".。")
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def task_type(requirement: str) -> str:
    words = re.findall(r"[a-z]+", requirement.lower())
    return next((_VERB_TYPES[w] for w in words[:3] if w in _VERB_TYPES), "enhancement")


def _is_code(index: RepoIndex, path: str) -> bool:
    return any(f.path == path and not f.is_test for f in index.files)


def import_order(index: RepoIndex, files: list[str]) -> list[str]:
    """Files ordered so that a module comes after the modules it imports (stable)."""
    remaining = list(files)
    done: list[str] = []
    while remaining:
        ready = [f for f in remaining if not any(g in remaining and g != f for g in index.imports.get(f, []))]
        pick = ready[0] if ready else remaining[0]  # an import cycle: keep the given order
        done.append(pick)
        remaining.remove(pick)
    return done


def new_module_path(index: RepoIndex, focus_paths: list[str], requirement: str) -> str | None:
    """Where code for concepts the repository lacks would go, in the most relevant area."""
    if task_type(requirement) != "feature":
        return None  # fixes and refactors change existing code; only features add modules
    novel = novel_terms(index, requirement)
    code = [p for p in focus_paths if _is_code(index, p)]
    if not novel or not code:
        return None
    # Name it after the first new concept and the word that follows it: "rate limiting" -> rate_limiting.
    words = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]*", requirement)]
    start = words.index(novel[0])
    name = "_".join(w for w in words[start : start + 2] if w not in {"to", "the", "a", "an", "for", "of", "in"})
    directory = posixpath.dirname(code[0])
    extension = posixpath.splitext(code[0])[1] or ".py"
    path = posixpath.join(directory, name + extension)
    return None if any(f.path == path for f in index.files) else path


def symbols_to_change(index: RepoIndex, path: str, requirement: str) -> list[Symbol]:
    ranked = rank_symbols(index, path, requirement, limit=3)
    if ranked:
        return ranked
    public = [s for s in index.symbols.get(path, []) if s.kind in ("class", "function") and not s.name.startswith("_")]
    return public[:2]


def conflict_risk(index: RepoIndex, path: str) -> str:
    count = fan_in(index, path)
    return "high" if count >= 3 else ("medium" if count >= 1 else "low")


def effort_of(index: RepoIndex, path: str) -> tuple[str, str]:
    lines = next((f.line_count for f in index.files if f.path == path), 0)
    if lines > 300:
        return "large", "High"
    return ("medium", "Medium") if lines > 100 else ("small", "Low")


def file_entries(index: RepoIndex, path: str, requirement: str) -> list[TaskFile]:
    """One ``files[]`` entry per symbol to change (the module itself when none stands out)."""
    risk = conflict_risk(index, path)
    entries = [
        TaskFile(path=path, action="modify", target=s.qualname, conflict_risk=risk,
                 changes=[f"adapt {s.kind} {s.qualname} (lines {s.line}-{s.end_line})"])
        for s in symbols_to_change(index, path, requirement)
    ]
    return entries or [TaskFile(path=path, action="modify", changes=["adapt the module"], conflict_risk=risk)]


def covering_tests(index: RepoIndex, paths: list[str]) -> list[str]:
    """Test files that cover any of ``paths`` (a test file covers itself)."""
    found: list[str] = []
    for path in paths:
        own = [path] if any(f.path == path and f.is_test for f in index.files) else index.tests_for.get(path, [])
        # conftest.py is shared set-up, not a test of the module: running it alone proves nothing
        found += [t for t in own if t not in found and posixpath.basename(t) != "conftest.py"]
    return found


def verification_for(index: RepoIndex, tests: list[str]) -> str:
    """A command that runs ``tests`` (the whole suite's command when there are none)."""
    return test_command_for(index, tests) if tests else index.test_command
