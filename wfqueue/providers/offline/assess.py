"""Lite-plan assessment: complexity, exploration angles, whether to explore. Pure.

Complexity is judged on four dimensions (scope, depth, risk, dependencies) from
the requirement's wording and from what the repository index says about the
code it touches. Angles come from the first keyword preset that matches, sliced
by complexity (Low 1, Medium 3, High 4).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from wfqueue.analysis import RepoIndex, fan_in, novel_terms
from wfqueue.lite.models import Assessment
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.understand import relevant_files

PRESETS: list[tuple[str, tuple[str, ...], list[str]]] = [
    ("architecture", ("refactor", "architect", "restructure", "modular"),
     ["architecture", "dependencies", "modularity", "integration-points"]),
    ("security", ("security", "auth", "permission", "access"),
     ["security", "auth-patterns", "dataflow", "validation"]),
    ("performance", ("performance", "slow", "optimi", "cache"),
     ["performance", "bottlenecks", "caching", "data-access"]),
    ("bugfix", ("fix", "bug", "error", "issue", "broken"),
     ["error-handling", "dataflow", "state-management", "edge-cases"]),
]
DEFAULT_PRESET = ("feature", ["patterns", "integration-points", "testing", "dependencies"])
# A requirement asking only for tests or documents (intent_of) is about how the code is tested or used, whatever
# its words: "Write tests for the cache" is no performance work.
INTENT_PRESETS: dict[str, tuple[str, list[str]]] = {
    "tests": ("testing", ["testing", "edge-cases", "patterns", "dependencies"]),
    "docs": ("docs", ["patterns", "integration-points", "dependencies", "testing"]),
    "docstrings": ("docs", ["patterns", "integration-points", "dependencies", "testing"]),
}
ANGLES_BY_COMPLEXITY = {"Low": 1, "Medium": 3, "High": 4}

_CHANGE_VERBS = ("add", "fix", "change", "update", "refactor", "implement", "remove", "modify", "rename",
                 "replace", "extend", "support", "migrate", "rewrite", "improve", "optimi", "speed", "cache",
                 "make", "allow", "prevent", "handle")
_ARCHITECTURE_WORDS = ("architect", "restructure", "modular", "refactor", "redesign", "layer", "migrate")
_FILE_MENTION = re.compile(r"[\w./-]+\.(py|js|ts|tsx|jsx|go|rs|java|rb|md|toml|json|ya?ml)\b")


class RepoSignals(BaseModel):
    """What the index says about the code a requirement touches."""

    relevant: list[str]
    max_fan_in: int
    untested: list[str]
    internal_edges: int
    novel_words: list[str]


def signals(index: RepoIndex, requirement: str) -> RepoSignals:
    ranked = [p for p, _ in relevant_files(index, requirement)]
    inside = set(ranked)
    return RepoSignals(
        relevant=ranked,
        max_fan_in=max((fan_in(index, p) for p in ranked), default=0),
        untested=[p for p in ranked if not index.tests_for.get(p)],
        internal_edges=sum(1 for p in ranked for q in index.imports.get(p, []) if q in inside),
        novel_words=novel_terms(index, requirement),
    )


def _level(value: int, medium: int, high: int) -> str:
    return "high" if value >= high else ("medium" if value >= medium else "low")


def select_preset(requirement: str) -> tuple[str, list[str]]:
    intent = intent_of(requirement)
    if intent in INTENT_PRESETS:
        return INTENT_PRESETS[intent]
    # Keywords count in prose only: "fix notes_api/auth/x.py" is a bug fix, not security work.
    text = _FILE_MENTION.sub(" ", requirement).lower()
    for name, keywords, angles in PRESETS:
        if any(k in text for k in keywords):
            return name, angles
    return DEFAULT_PRESET


def assess(requirement: str, repo: RepoSignals, force_explore: bool) -> Assessment:
    text = requirement.lower()
    mentioned = sorted({m.group(0) for m in _FILE_MENTION.finditer(requirement)})
    single_file = len(mentioned) == 1
    scope = "low" if single_file else _level(len(repo.relevant), 3, 6)
    architectural = any(w in text for w in _ARCHITECTURE_WORDS)
    depth = "high" if architectural else ("medium" if repo.novel_words else "low")
    risk = _level(repo.max_fan_in + (1 if repo.untested else 0), 2, 5)
    dependencies = _level(repo.internal_edges, 1, 4)
    levels = [scope, depth, risk, dependencies]
    if single_file and not architectural:
        complexity = "Low"
    elif levels.count("high") >= 2 or (architectural and scope != "low"):
        complexity = "High"
    elif levels.count("low") >= 3:
        complexity = "Low"
    else:
        complexity = "Medium"
    preset, angles = select_preset(requirement)
    reasons = []
    if force_explore:
        reasons.append("--explore given")
    if mentioned:
        reasons.append(f"names files: {', '.join(mentioned)}")
    if any(re.search(rf"\b{verb}(s|es|ed|d|ing|ze|se|zation|sation)?\b", text) for verb in _CHANGE_VERBS):
        reasons.append("modifies existing code")
    if architectural:
        reasons.append("needs architecture context")
    if complexity == "High" and not reasons:  # however it is worded, a change across many modules is explored
        reasons.append("High complexity")
    return Assessment(
        complexity=complexity,
        scope=f"{scope}: {len(repo.relevant)} relevant module(s)" + (f", names {mentioned[0]}" if single_file else ""),
        depth=f"{depth}: " + ("architectural change" if architectural else
                              ("new code for " + ", ".join(repo.novel_words[:3]) if repo.novel_words
                               else "surface change")),
        risk=f"{risk}: most-imported module has {repo.max_fan_in} importer(s); {len(repo.untested)} without tests",
        dependencies=f"{dependencies}: {repo.internal_edges} import edge(s) among the relevant modules",
        preset=preset,
        angles=angles[: ANGLES_BY_COMPLEXITY[complexity]],
        needs_exploration=bool(reasons),
        exploration_reasons=reasons,
    )
