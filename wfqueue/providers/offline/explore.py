"""Offline exploration of one angle: findings taken from the index and the code.

``explore_angle`` ranks the repository's files for the requirement plus the
angle's own vocabulary (BM25 via ``rank_files``), then reads only those files
to report what is really there: the constructs the angle cares about (each a
regular expression that matched, with the line it matched), lines where a
change would plug in (definitions, imports, call sites, angle-specific lines),
import edges, constraints and the open questions the analysis cannot settle.

Everything is derived from the ``RepoIndex`` and the text returned by
``read(path)``, the only I/O; the result is deterministic.  Every file, regex,
``file:line`` and import edge it reports was seen, so ``verify_findings``
confirms all of them on an unchanged repository.

The angles are defined in ``wfqueue.lite.angles``; choosing and describing the
files is ``wfqueue.providers.offline.explore_files``; constructs and integration points are
``wfqueue.providers.offline.explore_points``.  This module adds what bounds the change
(import edges, constraints, clarifications) and assembles the findings.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from wfqueue.analysis import RepoIndex, importers_of, novel_terms
from wfqueue.analysis.files import TEST_FOLDERS, language_for
from wfqueue.analysis.testmap import language_family
from wfqueue.lite.angles import angle_names
from wfqueue.lite.models import AngleFindings, Clarification, Dependency
from wfqueue.providers.offline.explore_files import AngleScope, relevant_files, structure
from wfqueue.providers.offline.explore_points import ProbeResults, integration_points, patterns, probe_results

__all__ = ["angle_names", "explore_angle"]

MAX_DEPENDENCIES = 10
OUTER_DEPENDENCIES = 3  # slots structural angles keep for edges leaving the relevant files
MAX_CONSTRAINTS = 6
MAX_CLARIFICATIONS = 3
CLOSE_SCORES = 0.85  # a runner-up within 15 % of the best file is a real choice


def dependencies(scope: AngleScope) -> list[Dependency]:
    """Import edges among the relevant files (for structural angles, also those leaving them and their importers)."""
    relevant = set(scope.files)
    edges: list[tuple[str, str]] = []
    for source in scope.files:
        for target in scope.index.imports.get(source, []):
            if target in relevant or scope.spec.around:
                edges.append((source, target))
    if scope.spec.around:
        for target in scope.files[:3]:
            edges += [(user, target) for user in importers_of(scope.index, target)]
    unique = list(dict.fromkeys(edges))
    inner = [e for e in unique if e[0] in relevant and e[1] in relevant]
    outer = [e for e in unique if e not in inner]
    # Edges among relevant files first; structural angles keep room for
    # the edges reaching out of them (what else a change ripples into).
    keep = MAX_DEPENDENCIES - min(len(outer), OUTER_DEPENDENCIES)
    chosen = inner[:keep] + outer
    return [Dependency(source=s, target=t) for s, t in chosen[:MAX_DEPENDENCIES]]


def _cycle(scope: AngleScope) -> list[str] | None:
    """An import cycle through relevant files, if there is one."""
    graph = scope.index.imports
    for start in scope.code_files():
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, []), reverse=True):
                if nxt == start:
                    return [*path, start]
                if nxt not in seen and len(path) < 8:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return None


def constraints(scope: AngleScope, results: ProbeResults) -> list[str]:
    """Facts that bound the change: shared modules, missing tests, the
    angle's own observations, the convention to follow, tests to keep green."""
    found: list[str] = []
    code = scope.code_files()
    shared = sorted((p for p in code if scope.fan_in[p] >= 2), key=lambda p: (-scope.fan_in[p], code.index(p)))
    for path in shared[:2]:
        users = importers_of(scope.index, path)
        names = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
        found.append(f"{path} is imported by {len(users)} modules ({names}): keep its interface compatible")
    untested = [p for p in code if lacks_tests(scope.index, p)]
    if untested:
        found.append(f"No test covers {', '.join(untested[:4])}")
    key = scope.key
    if scope.spec.tests and code:
        covered = [p for p in code if scope.index.tests_for.get(p)]
        found.append(f"{len(covered)} of {len(code)} relevant modules have tests")
    if scope.spec.around:
        cycle = _cycle(scope)
        if cycle:
            found.append(f"Import cycle: {' -> '.join(cycle)}")
        elif code:
            widest = max(code, key=lambda p: (len(scope.index.imports.get(p, [])), -code.index(p)))
            count = len(scope.index.imports.get(widest, []))
            if count:
                found.append(f"{widest} imports {count} in-repo modules: the widest point of the dependency graph")
    if key in ("performance", "bottlenecks", "data-access") and code:
        largest = max(code, key=lambda p: (scope.by_path[p].line_count, -code.index(p)))
        found.append(f"Largest relevant module: {largest} ({scope.by_path[largest].line_count} lines)")
    if results:
        probe, hits = results[0]
        files = sorted({h.path for h in hits}, key=scope.files.index)
        found.append(f"Follow the existing convention: {probe.description} ({', '.join(files[:3])})")
    tests = sorted({t for p in code for t in scope.index.tests_for.get(p, [])})
    if tests:
        run = f"; run with `{scope.index.test_command}`" if scope.index.test_command else ""
        found.append(f"Existing tests that must keep passing: {', '.join(tests[:6])}{run}")
    return found[:MAX_CONSTRAINTS]


# Files of a project's build, never its tests' subject ("Rakefile has no tests: should this change add them?").
BUILD_FILES = frozenset({"Rakefile", "Gemfile", "setup.py", "build.rs", "noxfile.py", "Makefile", "Package.swift"})


def lacks_tests(index: RepoIndex, path: str) -> bool:
    """Whether ``path`` is product code no test covers, as far as the index can tell: where its language has
    tests but none maps to a file (a Rust crate's tests/ use the crate, Ruby's `require` it), the index cannot
    tell; where it has none, nothing covers it; a test folder's helper (spec/okjson.rb) and a build file are
    no code to test."""
    if index.tests_for.get(path) or posixpath.basename(path) in BUILD_FILES or path.endswith(".gemspec"):
        return False
    if set(path.split("/")[:-1]) & TEST_FOLDERS:
        return False
    family = language_family(language_for(path))
    if not any(f.is_test and language_family(f.language) == family for f in index.files):
        # No test of its language at all: nothing covers it, unless tests live in the source (Rust's
        # `#[cfg(test)] mod tests`).
        return family != "rust"
    return any(language_family(language_for(source)) == family for source in index.tests_for)


def clarifications(scope: AngleScope) -> list[Clarification]:
    """Questions the code cannot answer: a close call between modules, new words, missing tests, no match."""
    found: list[Clarification] = []
    product = set(scope.code_files())
    code = [(p, s) for p, s in scope.ranked if p in product]
    label = scope.angle.strip() or "this"
    if len(code) >= 2 and code[0][1] > 0 and code[1][1] >= code[0][1] * CLOSE_SCORES:
        first, second = code[0][0], code[1][0]
        found.append(
            Clarification(
                question=f"Which module should own the {label} side of the change: {first} or {second}?",
                options=[first, second, "both, split between them"],
                context=f"their scores are within {round((1 - CLOSE_SCORES) * 100)}% "
                f"({code[0][1]:.2f} vs {code[1][1]:.2f})",
            )
        )
    novel = novel_terms(scope.index, scope.requirement)
    if novel:
        words = ", ".join(f"'{w}'" for w in novel[:3])
        anchor = code[0][0] if code else "the existing modules"
        found.append(
            Clarification(
                question=f"The code never uses {words}: is this a new concept to build, "
                "or does it exist under another name?",
                options=[f"new code, next to {anchor}", "it exists under another name (please name it)"],
                context="requirement words absent from every indexed file",
            )
        )
    untested = [p for p, s in code if s > 0 and lacks_tests(scope.index, p)]
    if untested:
        found.append(
            Clarification(
                question=f"{untested[0]} has no tests: should this change add them?",
                options=[f"yes, add tests for {untested[0]}", "no, rely on existing higher-level tests"],
                context="no test imports it or is named after it",
            )
        )
    if not any(s > 0 for _, s in scope.ranked):
        candidates = [p for p, _ in scope.ranked[:2]]
        viewpoint = f"the {label} angle" if scope.angle.strip() else "any angle"
        found.append(
            Clarification(
                question=f"No file matches the requirement from {viewpoint}: which modules does it concern?",
                options=[*candidates, "another module (please name it)"]
                if candidates
                else ["please name the modules", "start a new module"],
                context="the candidates are the most imported modules"
                if candidates
                else "the repository has no source file to anchor the change",
            )
        )
    return found[:MAX_CLARIFICATIONS]


def explore_angle(index: RepoIndex, requirement: str, angle: str, read: Callable[[str], str]) -> AngleFindings:
    """Findings for one angle, all taken from ``index`` and the files ``read`` returns.

    ``read(path)`` returns the text of a repository file (the only I/O).  An
    angle without its own vocabulary is explored with the requirement's words
    alone.  Deterministic for equal inputs.
    """
    scope = AngleScope(index, requirement, angle, read)
    results = probe_results(scope)
    return AngleFindings(
        angle=angle,
        structure=structure(scope),
        relevant_files=relevant_files(scope),
        patterns=patterns(scope, results),
        integration_points=integration_points(scope, results),
        dependencies=dependencies(scope),
        constraints=constraints(scope, results),
        clarification_needs=clarifications(scope),
    )
