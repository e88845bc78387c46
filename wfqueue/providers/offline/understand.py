"""Offline understanding: which code the requirement touches, split into sub-domains.

Pure: takes the requirement and a RepoIndex, returns an UnderstandingDraft.
The files are the localizer's (``analysis.localize``: field-weighted BM25 over
product source, sized by its scores); sub-domains are packages of those files,
merged along the import graph until the assessed complexity's share of
``max_agents`` remain (a one-file change is one area and its tests). Area
dependencies follow one import order, so an import cycle never becomes a
dependency cycle.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Callable

from wfqueue.analysis import RepoIndex, fan_in, fan_ins, novel_terms, rank_symbols
from wfqueue.analysis.files import CODE_LANGUAGES, is_test_path, language_for
from wfqueue.analysis.localize import MOST_FILES, candidates, focus, localize
from wfqueue.collab.models import ProposedArea, Understanding, UnderstandingDraft
from wfqueue.providers.offline.changes import dependency_order, earlier_needs, named_code, plan_needs
from wfqueue.providers.offline.docs_only import (
    docstrings_scope,
    documents_beside_change,
    documents_to_write,
    is_document,
)
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.new_module import new_module_path
from wfqueue.providers.offline.tests_only import tests_to_write
from wfqueue.providers.offline.tests_placement import where_tests_go
from wfqueue.sentences import sentences
from wfqueue.settings import MAX_AGENTS_LIMIT


def relevant_files(index: RepoIndex, requirement: str, max_agents: int = MOST_FILES) -> list[tuple[str, float]]:
    """Code files worth changing, best first: the requirement's named files when it names
    some, else the head of the localizer's ranking (``analysis.localize``). Falls back to the
    most imported modules when nothing in the repository shares a word with the requirement."""
    code = sorted(candidates(index, requirement))
    named = [p for p in code if p in requirement]
    # A file the index did not read (too large, not UTF-8) is still one to change when the requirement names it.
    named += [p for p in index.unread if p in requirement and language_for(p) in CODE_LANGUAGES and not is_test_path(p)]
    if named:  # the requirement names the files to change: plan those, not their neighbours
        return [(p, 1.0) for p in named]
    # The localizer sizes the plan from its scores whatever the agent count (clustering fits the files
    # to the agents); "every service", "all handlers": a change meant to reach many places may plan
    # one file per agent beyond that.
    most = max(MOST_FILES, max_agents) if BROAD.search(requirement) else MOST_FILES
    ranked = focus(localize(index, requirement), most=most)
    if ranked:
        return ranked
    imported = fan_ins(index)  # fan_in per file looked at every file's imports: quadratic on a large repository
    central = sorted((p for p in code if index.symbols.get(p)), key=lambda p: (-imported[p], p))
    return [(p, 0.0) for p in central[:2]]


BROAD = re.compile(r"\b(every|each|all)\b", re.IGNORECASE)


def _area_name(directory: str, taken: set[str]) -> str:
    parts = [p for p in directory.split("/") if p] or ["root"]
    for depth in range(1, len(parts) + 1):
        name = re.sub(r"[^a-z0-9]+", "-", "-".join(parts[-depth:]).lower()).strip("-") or "root"
        if name not in taken:
            return name[:40].strip("-")
    return f"{parts[-1]}-{len(taken) + 1}"


def _coupling(index: RepoIndex, a: list[str], b: list[str]) -> int:
    b_set = set(b)
    a_set = set(a)
    forward = sum(1 for f in a for g in index.imports.get(f, []) if g in b_set)
    backward = sum(1 for f in b for g in index.imports.get(f, []) if g in a_set)
    return forward + backward


def cluster_files(index: RepoIndex, ranked: list[tuple[str, float]], max_agents: int) -> list[list[str]]:
    """Group files by package, then merge the weakest group into the one it is most
    coupled to until at most ``max_agents`` groups remain; split to reach two."""
    score = dict(ranked)
    groups: dict[str, list[str]] = defaultdict(list)
    for path, _ in ranked:
        groups[posixpath.dirname(path)].append(path)
    clusters = sorted(groups.values(), key=lambda g: (-sum(score[p] for p in g), g[0]))
    if len(clusters) == 1 and len(clusters[0]) >= 2:
        clusters = [[p] for p in clusters[0]]  # one package: one group per module
    while len(clusters) > max_agents:
        weakest = clusters.pop()
        target = max(
            range(len(clusters)),
            key=lambda i: (_coupling(index, weakest, clusters[i]), -i),
        )
        clusters[target] = clusters[target] + weakest
    return clusters


def _describe(files: list[str], index: RepoIndex, requirement: str) -> str:
    symbols = [s.qualname for f in files[:3] for s in rank_symbols(index, f, requirement, limit=2)]
    where = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    named = f" ({', '.join(symbols[:4])})" if symbols else ""
    return f"{where}{named}"


def _complexity(file_count: int) -> str:
    if file_count <= 1:
        return "Low"
    return "Medium" if file_count <= 3 else "High"


# Agents for the code, by complexity (the tests become one more area): a one-file fix is one
# change and its tests, not four agents; a High one may use every agent it is given.
CODE_AREAS = {"Low": 1, "Medium": 2, "High": MAX_AGENTS_LIMIT}


def _effort(files: list[str], index: RepoIndex) -> str:
    lines = sum(f.line_count for f in index.files if f.path in set(files))
    return "small" if lines < 150 else ("medium" if lines < 600 else "large")


def _proposed_areas(index: RepoIndex, clusters: list[list[str]],
                    describe: Callable[[list[str]], str]) -> list[ProposedArea]:
    """One area per cluster, named after its package (or module), ordered along the imports between them."""
    taken: set[str] = set()
    names: list[str] = []
    lead_dirs = [posixpath.dirname(files[0]) for files in clusters]
    for files, lead_dir in zip(clusters, lead_dirs, strict=True):
        # Name an area after its package, or after its module when packages repeat.
        shared_dir = lead_dirs.count(lead_dir) > 1 and len(files) == 1
        base = posixpath.splitext(files[0])[0] if shared_dir or not lead_dir else lead_dir
        name = _area_name(base, taken)
        taken.add(name)
        names.append(name)
    owner = {f: names[i] for i, files in enumerate(clusters) for f in files}
    needs_of = plan_needs(index, list(owner))
    uses = {name: sorted({owner[g] for f in files for g in needs_of[f] if owner.get(g, name) != name})
            for name, files in zip(names, clusters, strict=True)}
    # Areas whose modules import each other are ordered, not made to wait on each other.
    needs = earlier_needs(dependency_order(names, uses), uses)
    return [ProposedArea(focus_area=name, description=describe(files), focus_paths=files,
                         estimated_effort=_effort(files, index), dependencies=needs[name])
            for name, files in zip(names, clusters, strict=True)]


def tests_to_write_for(index: RepoIndex, requirement: str) -> dict[str, tuple[bool, list[str]]]:
    """The test files a tests-only requirement writes (tests_only.tests_to_write), from the localizer's files at
    their usual number whatever the agent count: every agent of the plan derives the same."""
    return tests_to_write(index, requirement, [p for p, _ in relevant_files(index, requirement)])


def described_code(index: RepoIndex, requirement: str) -> list[str]:
    """The code a documentation requirement describes (changes.named_code), three files at most, the same for
    every agent."""
    return named_code(index, requirement, [p for p, _ in relevant_files(index, requirement)])[:3]


def files_to_write(index: RepoIndex, requirement: str, tests: bool) -> list[tuple[str, bool, list[str]]]:
    """What a requirement asking only for tests (or only for documents) writes: each test file (document) as
    (path, whether it exists, the code it is about)."""
    if tests:
        return [(path, exists, code) for path, (exists, code) in tests_to_write_for(index, requirement).items()]
    code = described_code(index, requirement)
    return [(path, exists, code) for path, exists in documents_to_write(index, requirement)]


def _one_file_areas(index: RepoIndex, requirement: str, max_agents: int, tests: bool) -> UnderstandingDraft:
    """A requirement asking only for tests (or documents): areas of test files (documents), grouped by folder,
    about code that does not change (files_to_write)."""
    writes = {path: code for path, _, code in files_to_write(index, requirement, tests)}
    code = list(dict.fromkeys(p for about in writes.values() for p in about))
    complexity = _complexity(len(writes))
    clusters = cluster_files(index, [(t, float(len(writes) - n)) for n, t in enumerate(writes)],
                             max(1, min(max_agents, CODE_AREAS[complexity])))

    def describe(files: list[str]) -> str:
        about = list(dict.fromkeys(p for t in files for p in writes[t]))
        return (f"{'Tests' if tests else 'Documentation'} in {', '.join(files[:4])}"
                + (f"{' for' if tests else ' about'} {_describe(about, index, requirement)}" if about else ""))

    areas = _proposed_areas(index, clusters, describe)
    strategy = "; ".join(f"{a.focus_area}: {', '.join(a.focus_paths[:3])}" for a in areas)
    what = "code under test" if tests else "code the documents describe"
    return UnderstandingDraft(
        complexity=complexity,
        understanding=Understanding(
            objectives=sentences(requirement)[:5],
            key_points=[f"{'Tests' if tests else 'Documentation'} only: {', '.join(writes)}"
                        + (f" {'for' if tests else 'about'} {', '.join(code)}" if code else "")],
            constraints=[f"The {what} does not change: {', '.join(code)}"] if code else [],
            split_strategy=f"By {'test file' if tests else 'document'}, grouped by folder ({strategy})",
            clarifications=[],
        ),
        sub_domains=areas,
    )


def understand(index: RepoIndex, requirement: str, max_agents: int) -> UnderstandingDraft:
    intent = intent_of(requirement)
    if intent in ("tests", "docs"):
        return _one_file_areas(index, requirement, max_agents, tests=intent == "tests")
    ranked = relevant_files(index, requirement, max_agents)
    if intent == "docstrings":
        ranked = docstrings_scope(index, requirement, ranked)
    complexity = _complexity(len(ranked))
    clusters = cluster_files(index, ranked, max(1, min(max_agents, CODE_AREAS[complexity])))
    tests = sorted({t for f, _ in ranked for t in index.tests_for.get(f, [])})
    if len(clusters) < 2 and (intent == "change" or not clusters):
        # A single relevant module: its test file becomes the second area (one file: every test importing a
        # widely used module is not the change's test), unless the module holds its own tests (Rust's `mod
        # tests`), which its area writes. Docstrings get no test.
        paths = [p for p, _ in ranked]
        test_file = where_tests_go(index, paths, requirement, new_module_path(index, paths, requirement))[0]
        if not any(test_file in cluster for cluster in clusters):
            clusters.append([test_file])
    # Documents the change asks to update too ("..., document it in README.md"): an area of their own while
    # agents are left, else the last area's.
    documents = [p for p, _ in documents_beside_change(index, requirement)] if intent == "change" else []
    if documents and len(clusters) < max_agents:
        clusters.append(documents)
    elif documents:
        clusters[-1].extend(documents)

    def describe(files: list[str]) -> str:
        if all(is_document(f) for f in files):
            return f"Documentation of the change in {', '.join(files[:4])}"
        return f"Changes in {_describe(files, index, requirement)}"

    areas = _proposed_areas(index, clusters, describe)
    shared = sorted((p for p, _ in ranked if fan_in(index, p) >= 3), key=lambda p: -fan_in(index, p))
    novel = novel_terms(index, requirement)
    top = [f"{p} ({', '.join(s.qualname for s in rank_symbols(index, p, requirement, limit=2)) or 'module'})"
           for p, _ in ranked[:3]]
    key_points = [f"Most relevant code: {', '.join(top)}"] if top else []
    if novel:
        key_points.append(f"Not present in the code yet: {', '.join(novel[:5])}; new code is needed")
    constraints = [f"{p} is imported by {fan_in(index, p)} modules: change it compatibly" for p in shared[:3]]
    if tests:
        constraints.append(f"Existing tests must keep passing: {', '.join(tests[:6])}")
    clarifications = []
    if novel:
        clarifications.append(
            f"Should {' '.join(novel[:3])} live in a new module or extend "
            f"{ranked[0][0] if ranked else 'existing code'}?"
        )
    if not any(s > 0 for _, s in ranked):
        clarifications.append("No file shares a word with the requirement: which modules does it concern?")
    strategy = "; ".join(f"{a.focus_area}: {', '.join(a.focus_paths[:3])}" for a in areas)
    return UnderstandingDraft(
        complexity=complexity,
        understanding=Understanding(
            objectives=sentences(requirement)[:5],
            key_points=key_points,
            constraints=constraints,
            split_strategy=f"By package, ranked by relevance and merged along imports ({strategy})",
            clarifications=clarifications,
        ),
        sub_domains=areas,
    )
