"""The context package of a workflow session. Pure: index + explorations in, package out.

Conflict risk follows the spec: fewer than 5 existing files touched -> low,
5-15 -> medium, more than 15 -> high (none when nothing is touched), raised one
step by API, architecture or data-model changes.
"""

from __future__ import annotations

import posixpath
import re

from wfqueue.analysis import RepoIndex, fan_in, importers_of, rank_symbols, tokenize
from wfqueue.analysis.roles import plannable
from wfqueue.analysis.testmap import suite_runner, where_tests_live
from wfqueue.lite.models import Assessment, VerifiedExploration
from wfqueue.lite.synthesis import core_files, merge_questions
from wfqueue.providers.offline.changes import import_order
from wfqueue.providers.offline.intent import intent_of
from wfqueue.providers.offline.new_module import new_module_path
from wfqueue.providers.offline.tests_placement import where_tests_go
from wfqueue.providers.offline.understand import files_to_write, relevant_files
from wfqueue.workflow_session.models import ConflictDetection, ContextPackage, RiskFactors, StructuredInput
from wfqueue.workflow_session.structure import as_text

_LEVELS = ["none", "low", "medium", "high"]
_API_WORDS = re.compile(r"\b(api|endpoint|route|interface|signature|protocol|contract|rest|graphql)\b", re.I)
_ARCH_WORDS = re.compile(r"\b(architect\w*|restructur\w*|refactor\w*|modular\w*|layer\w*|migrat\w*|redesign\w*)\b",
                         re.I)
_DATA_WORDS = re.compile(r"\b(model|schema|database|table|column|migration|storage|persist\w*)\b", re.I)
OUTSIDE_THE_RANKING = 0.5  # how central a verified finding the localizer does not rank is: "medium"
_CONFIG_NAMES = ("pyproject.toml", "setup.cfg", "setup.py", "requirements.txt", "package.json", "go.mod", "Cargo.toml")
_DEPENDENCY = re.compile(r"""^\s*["']?([A-Za-z0-9_.\-\[\]]+)\s*((?:[<>=!~]=?|@)\s*[^"',;\s]+)?""")


def risk_level(existing_touched: int, factors: RiskFactors) -> str:
    if existing_touched == 0:
        base = "none"
    elif existing_touched < 5:
        base = "low"
    elif existing_touched <= 15:
        base = "medium"
    else:
        base = "high"
    raised = any((factors.api_changes, factors.architecture_changes, factors.data_model_changes))
    return _LEVELS[min(len(_LEVELS) - 1, _LEVELS.index(base) + 1)] if raised and base != "none" else base


def external_dependencies(manifest_texts: dict[str, str]) -> list[dict[str, str]]:
    """Packages declared in pyproject.toml ``dependencies`` or requirements.txt."""
    found: list[dict[str, str]] = []
    for name, text in sorted(manifest_texts.items()):
        if name.endswith("requirements.txt"):
            lines = [line for line in text.splitlines() if line.strip() and not line.startswith(("#", "-"))]
        elif name.endswith("pyproject.toml"):
            block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
            lines = re.findall(r"""["']([^"']+)["']""", block.group(1)) if block else []
        else:
            continue
        for line in lines:
            match = _DEPENDENCY.match(line)
            if match:
                found.append({"package": match.group(1), "version": (match.group(2) or "*").strip()})
    return found


def touched_files(index: RepoIndex, requirement: str,
                  explorations: list[VerifiedExploration]) -> list[tuple[str, float]]:
    """Existing code files the change will touch, with how central each is (1.0 the most): the verified, highly
    relevant findings of the explorations (files an angle only mentions are context, not changes), else the
    ranking. A finding is as central as the ranking makes it; one the ranking leaves out is context (0.5), not
    a critical file: an angle reading sinatra-contrib's respond_with.rb for a content_type fix made it one,
    and verify then asked every plan to change it."""
    # Product code: an exploration reading examples/ (express's) made "reuse and extend examples/error/index.js" a
    # constraint of the change's tasks.
    code = {f.path for f in index.files if not f.is_test and plannable(f.path, False, requirement)}
    ranked = relevant_files(index, requirement, max_agents=5)
    best = max((s for _, s in ranked), default=1.0) or 1.0
    share = {p: round(s / best, 2) for p, s in ranked}
    verified = [(c.path, share.get(c.path, OUTSIDE_THE_RANKING)) for c in core_files(explorations, limit=40)
                if c.verified and c.path in code and c.relevance == "high"]
    return verified or list(share.items())


def _code_read_only(index: RepoIndex, structured: StructuredInput) -> list[str] | None:
    """The code a session asking only for tests or documents is about (read, not changed), as the offline
    planner finds it; None when the session changes code."""
    text = as_text(structured)
    intent = intent_of(text)
    if intent not in ("tests", "docs"):
        return None
    return list(dict.fromkeys(p for _, _, code in files_to_write(index, text, intent == "tests") for p in code))


def planned_test(index: RepoIndex, structured: StructuredInput) -> str:
    """Where the offline planner puts the change's tests, read as it reads the session's input: context, so
    that verify does not find the plan changing a test "the gathered context never examined" (the test using
    the name the requirement gives may test another file: sinatra's helpers_test.rb for base.rb's
    content_type)."""
    text = as_text(structured)
    ranked = [p for p, _ in relevant_files(index, text)]
    return where_tests_go(index, ranked, text, new_module_path(index, ranked, text))[0]


def build_context_package(index: RepoIndex, session_id: str, timestamp: str, structured: StructuredInput,
                          assessment: Assessment, explorations: list[VerifiedExploration],
                          manifest_texts: dict[str, str]) -> ContextPackage:
    requirement = f"{structured.goal}. {structured.scope}"
    # Tests or documents only (intent_of): the code they are about is what the plan reads, and it does not
    # change, so nothing can break: no conflict to resolve.
    reads_only = _code_read_only(index, structured)
    touched = [(p, 1.0) for p in reads_only] if reads_only is not None \
        else touched_files(index, requirement, explorations)
    paths = [p for p, _ in touched]
    text = f"{structured.goal} {structured.scope}"
    changes = reads_only is None
    factors = RiskFactors(
        existing_implementations=[f"{p}: {', '.join(s.qualname for s in rank_symbols(index, p, requirement, 2))}"
                                  for p in paths if rank_symbols(index, p, requirement, 1)][:10],
        api_changes=changes and bool(_API_WORDS.search(text)),
        architecture_changes=changes and bool(_ARCH_WORDS.search(text)),
        data_model_changes=changes and bool(_DATA_WORDS.search(text)),
        breaking_changes=[f"{p} is imported by {fan_in(index, p)} modules" for p in paths
                          if changes and fan_in(index, p) >= 3],
    )
    level = risk_level(len(paths), factors) if changes else "low" if paths else "none"
    affected = sorted({posixpath.dirname(p) or "." for p in paths})
    tests = sorted({t for p in paths for t in index.tests_for.get(p, [])} | {planned_test(index, structured)})
    inside = set(paths)
    internal = [{"from": p, "to": q, "type": "import"} for p in paths for q in index.imports.get(p, []) if q in inside]
    patterns = sorted({p.description for e in explorations for p in e.findings.patterns
                       if (c := e.check_for("pattern", p.search)) and c.verified})
    constraints = sorted({c for e in explorations for c in e.findings.constraints})
    tiers: dict[str, list[str]] = {"critical": [], "high": [], "medium": [], "low": []}
    for path, score in touched:
        tier = "critical" if score >= 0.9 else "high" if score >= 0.6 else "medium" if score >= 0.3 else "low"
        tiers[tier].append(path)
    return ContextPackage(
        metadata={"task_description": structured.goal, "timestamp": timestamp,
                  "keywords": sorted(set(tokenize(structured.goal)))[:20], "complexity": assessment.complexity,
                  "session_id": session_id},
        project_context={
            "architecture_patterns": patterns[:10],
            "coding_conventions": {"test_command": index.test_command,
                                   "test_layout": where_tests_live([f.path for f in index.files if f.is_test])},
            "tech_stack": {"language": max(index.languages, key=lambda k: index.languages[k])
                                       if index.languages else "",
                           "frameworks": [], "libraries": [d["package"] for d in external_dependencies(manifest_texts)],
                           "testing": [suite_runner(index.test_command)] if index.test_command else []},
        },
        assets={
            "documentation": sorted(f.path for f in index.files if f.language == "markdown")[:10],
            "source_code": [{"path": p, "role": "modify", "relevance_score": s} for p, s in touched],
            "config": sorted(f.path for f in index.files if posixpath.basename(f.path) in _CONFIG_NAMES),
            "tests": tests,
        },
        dependencies={"internal": internal, "external": external_dependencies(manifest_texts)},
        conflict_detection=ConflictDetection(
            risk_level=level,
            risk_factors=factors,
            affected_modules=affected,
            mitigation_strategy=(
                "change the most imported modules compatibly and run their importers' tests"
                if factors.breaking_changes else "run the covering tests after each task"
            ),
        ),
        exploration_results={
            "angles": [e.findings.angle for e in explorations],
            "aggregated_insights": {
                "critical_files": tiers["critical"] + tiers["high"],
                "conflict_indicators": factors.breaking_changes
                + [f"{p} has importers: {', '.join(importers_of(index, p)[:3])}"
                   for p in paths if importers_of(index, p)][:10],
                "clarification_needs": [q.question for q in merge_questions(explorations)],
                "constraints": constraints,
            },
        },
        prioritized_context={
            "user_intent": {"goal": structured.goal, "scope": structured.scope,
                            "key_constraints": structured.constraints},
            "priority_tiers": tiers,
            "dependency_order": import_order(index, paths),
        },
    )
