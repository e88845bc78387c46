"""Combining the angles of a lite plan: core files, questions, manifest. Pure."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from wfqueue.lite.models import Clarification, VerifiedExploration

_RELEVANCE_RANK = {"high": 3, "medium": 2, "low": 1}
SIMILAR_QUESTION = 0.6  # word overlap (Jaccard) above which two questions ask the same thing


class CoreFile(BaseModel):
    path: str
    relevance: str
    angles: list[str]
    verified: bool
    rationale: str


class MergedQuestion(BaseModel):
    question: str
    options: list[str] = Field(default_factory=list)
    context: str = ""
    angles: list[str]


def core_files(explorations: list[VerifiedExploration], limit: int = 10) -> list[CoreFile]:
    """Files named by any angle, deduplicated, ranked by best relevance, then by how many
    angles name them; unverified files sort last."""
    merged: dict[str, CoreFile] = {}
    for exploration in explorations:
        for item in exploration.findings.relevant_files:
            check = exploration.check_for("file", item.path)
            verified = bool(check and check.verified)
            known = merged.get(item.path)
            if known is None:
                merged[item.path] = CoreFile(path=item.path, relevance=item.relevance,
                                             angles=[exploration.findings.angle],
                                             verified=verified, rationale=item.rationale)
                continue
            known.angles.append(exploration.findings.angle)
            known.verified = known.verified and verified
            if _RELEVANCE_RANK[item.relevance] > _RELEVANCE_RANK[known.relevance]:
                known.relevance, known.rationale = item.relevance, item.rationale
    ranked = sorted(
        merged.values(),
        key=lambda f: (not f.verified, -_RELEVANCE_RANK[f.relevance], -len(f.angles), f.path),
    )
    return ranked[:limit]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_./-]+", text.lower()) if len(w) > 2}


def merge_questions(explorations: list[VerifiedExploration]) -> list[MergedQuestion]:
    """Clarification needs of every angle, with questions of the same intent merged."""
    merged: list[tuple[set[str], MergedQuestion]] = []
    for exploration in explorations:
        for need in exploration.findings.clarification_needs:
            words = _words(need.question)
            for known_words, known in merged:
                overlap = len(words & known_words) / max(1, len(words | known_words))
                if overlap >= SIMILAR_QUESTION:
                    known.options += [o for o in need.options if o not in known.options]
                    if exploration.findings.angle not in known.angles:
                        known.angles.append(exploration.findings.angle)
                    break
            else:
                merged.append((words, MergedQuestion(question=need.question, options=list(need.options),
                                                     context=need.context, angles=[exploration.findings.angle])))
    return [q for _, q in merged]


def as_clarifications(questions: list[MergedQuestion]) -> list[Clarification]:
    return [Clarification(question=q.question, options=q.options, context=q.context) for q in questions]


def rounds(questions: list[MergedQuestion], per_round: int = 4) -> list[list[MergedQuestion]]:
    """Questions in batches of at most ``per_round``, in order."""
    return [questions[i : i + per_round] for i in range(0, len(questions), per_round)]


def manifest(session_id: str, requirement: str, timestamp: str, complexity: str,
             explorations: list[VerifiedExploration], session_dir: str, failed: dict[str, str]) -> dict[str, Any]:
    """explorations-manifest.json, with when and where each angle ran (they run at once)."""
    entries = []
    for index, exploration in enumerate(explorations):
        angle = exploration.findings.angle
        entries.append({
            "angle": angle,
            "file": f"exploration-{angle}.md",
            "path": f"{session_dir}/exploration-{angle}.md",
            "index": index,
            "worker": exploration.worker,
            "pid": exploration.pid,
            "started_at": exploration.started_at,
            "finished_at": exploration.finished_at,
            "verified": sum(1 for c in exploration.checks if c.verified),
            "unverified": sum(1 for c in exploration.checks if not c.verified),
        })
    return {
        "session_id": session_id,
        "task_description": requirement,
        "timestamp": timestamp,
        "complexity": complexity,
        "exploration_count": len(entries),
        "explorations": entries,
        "failed_angles": [{"angle": a, "error": e} for a, e in sorted(failed.items())],
    }
