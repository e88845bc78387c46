"""Turning what the user typed into GOAL / SCOPE / CONTEXT. Pure.

Three shapes: text that already says ``GOAL:`` / ``SCOPE:`` / ``CONTEXT:`` (kept
as written), a Markdown document (first heading or sentence is the goal, bullet
lists are the scope, "must"/"should" lines are constraints), or a sentence
("Add X with Y and Z": the goal is the sentence, the scope its "with" parts).
"""

from __future__ import annotations

import re

from wfqueue.errors import InvalidRequirementError
from wfqueue.sentences import first_sentence
from wfqueue.sessions import has_words
from wfqueue.workflow_session.models import StructuredInput

_LABEL = re.compile(r"^\s*(GOAL|SCOPE|CONTEXT|REQUIREMENTS|CONSTRAINTS)\s*[:：]\s*(.*)$", re.I)
_CONSTRAINT = re.compile(r"\b(must|must not|should|should not|never|only|without)\b|必须|不得|不能", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)")


def _labelled(text: str) -> StructuredInput | None:
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        match = _LABEL.match(line)
        if match:
            current = match.group(1).upper()
            found.setdefault(current, [])
            if match.group(2).strip():
                found[current].append(match.group(2).strip())
        elif current and line.strip():
            found[current].append(_BULLET.sub(r"\1", line).strip())
    if "GOAL" not in found:
        return None
    constraints = found.get("CONSTRAINTS", []) + [r for r in found.get("REQUIREMENTS", []) if _CONSTRAINT.search(r)]
    return StructuredInput(
        goal=" ".join(found["GOAL"]),
        scope="; ".join(found.get("SCOPE", [])) or "; ".join(found.get("REQUIREMENTS", [])) or " ".join(found["GOAL"]),
        context="; ".join(found.get("CONTEXT", [])) or "existing code of the repository",
        constraints=constraints,
    )


def _markdown(text: str) -> StructuredInput:
    lines = [line.rstrip() for line in text.splitlines()]
    heading = next((re.sub(r"^#+\s*", "", line) for line in lines if line.startswith("#")), None)
    prose = [line for line in lines if line.strip() and not line.startswith("#") and not _BULLET.match(line)]
    bullets = [m.group(1) for line in lines if (m := _BULLET.match(line))]
    opening = first_sentence(" ".join(prose))
    goal = heading or opening or bullets[0]
    constraints = [b for b in bullets + prose if _CONSTRAINT.search(b)]
    scope_items = [b for b in bullets if b not in constraints]
    return StructuredInput(
        goal=goal,
        scope="; ".join(scope_items) or goal,
        context=" ".join(p for p in prose if p not in constraints and p != opening)[:600]
        or "existing code of the repository",
        constraints=constraints,
    )


def _sentence(text: str) -> StructuredInput:
    flat = " ".join(text.split())
    head, _, tail = flat.partition(" with ")
    parts = [p.strip(" .") for p in re.split(r",|\band\b", tail) if p.strip(" .")] if tail else []
    constraints = [s.strip() for s in re.split(r"(?<=[.!?;。])\s+", flat) if _CONSTRAINT.search(s)]
    return StructuredInput(
        goal=flat.rstrip("."),
        scope="; ".join(parts) if parts else f"core changes for: {head.rstrip('.')}",
        context="existing code of the repository" if not tail else f"{head.rstrip('.')} in the existing code",
        constraints=constraints,
    )


def structure_input(text: str) -> StructuredInput:
    """GOAL / SCOPE / CONTEXT of ``text``; InvalidRequirementError when it has no word. The commands refuse such
    a requirement before anything starts (wfqueue.sessions.read_requirement); this is for any other caller."""
    if not has_words(text):
        what = "is empty" if not text.strip() else f"has no words ({text.strip()[:60]!r})"
        raise InvalidRequirementError(f"the requirement {what}",
                                      hint='describe the change in words, e.g. "Add OAuth login"')
    labelled = _labelled(text)
    if labelled is not None:
        return labelled
    if "\n" in text.strip() or text.lstrip().startswith("#"):
        return _markdown(text)
    return _sentence(text)


def as_text(structured: StructuredInput) -> str:
    """The structured description every later phase plans from."""
    lines = [f"GOAL: {structured.goal}", f"SCOPE: {structured.scope}", f"CONTEXT: {structured.context}"]
    if structured.constraints:
        lines.append("CONSTRAINTS: " + "; ".join(structured.constraints))
    return "\n".join(lines)
