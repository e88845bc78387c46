"""The plan's context an executor is given with every task: the requirement, the plan's summary and
constraints, and the planning documents worth reading.

Context helps an executor but never decides whether a plan runs, so a missing or damaged context file
leaves its part empty instead of refusing the plan (the tasks themselves are validated strictly).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from wfqueue.collab.steps import ANALYSIS_FILE, NOTE_FILE, SUMMARY_FILE
from wfqueue.execute.model import PlanContext, PlanKind
from wfqueue.fsio import read_json_object
from wfqueue.lite.steps import NOTES_FILE as LITE_NOTES_FILE
from wfqueue.lite.steps import PLAN_FILE as LITE_PLAN_FILE
from wfqueue.workflow_session.session import IMPL_PLAN_FILE, NOTES_FILE, PLAN_FILE, SESSION_FILE

AGENTS_DIR = "agents"
AGENT_PLAN_FILE = "plan.json"
AGENT_CONTEXT_FILE = "planning-context.md"
# Characters of the requirement every task carries (its message, its executor's prompt at every turn): a
# requirements document of a megabyte went whole into each, about 250 000 tokens per model turn. A longer one
# is cut at a word, and the prompt says so (the session's files are not in a task's worktree to read instead).
REQUIREMENT_SHOWN = 8_000


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _shown(path: Path, repo: Path) -> str:
    """Repository-relative when the document is inside the repository, else absolute."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(repo.resolve()).as_posix()
    except ValueError:
        return os.fspath(resolved)


def _requirement(text: str) -> tuple[str, int]:
    """PlanContext's ``requirement`` and ``requirement_length`` for ``text``: its beginning, cut at a word, when
    it is longer than REQUIREMENT_SHOWN, and then its whole length (else 0)."""
    if len(text) <= REQUIREMENT_SHOWN:
        return text, 0
    cut = text[:REQUIREMENT_SHOWN]
    cut = cut[: cut.rfind(" ")] if " " in cut[REQUIREMENT_SHOWN // 2:] else cut
    return cut.rstrip(), len(text)


def _documents(paths: list[Path], repo: Path) -> list[str]:
    return [_shown(p, repo) for p in paths if p.is_file()]


def agent_plan_files(folder: Path) -> list[Path]:
    """A collaborative session's ``agents/*/plan.json`` in the order of its sub-domains (so task ids ascend),
    then any other agent folder by name."""
    order = [s.get("focus_area") for s in read_json_object(folder / ANALYSIS_FILE).get("sub_domains", [])
             if isinstance(s, dict)]
    root = folder / AGENTS_DIR
    present = sorted(p.name for p in root.iterdir() if (p / AGENT_PLAN_FILE).is_file()) if root.is_dir() else []
    ranked = [a for a in order if isinstance(a, str) and a in present] + [a for a in present if a not in order]
    return [root / area / AGENT_PLAN_FILE for area in ranked]


def _collab(folder: Path, repo: Path) -> PlanContext:
    analysis = read_json_object(folder / ANALYSIS_FILE)
    understanding = analysis.get("understanding") if isinstance(analysis.get("understanding"), dict) else {}
    summary: list[str] = []
    for plan_file in agent_plan_files(folder):
        plan = read_json_object(plan_file)
        summary.extend(_text(plan.get(key)) for key in ("summary", "approach") if _text(plan.get(key)))
    contexts = [p.parent / AGENT_CONTEXT_FILE for p in agent_plan_files(folder)]
    requirement, length = _requirement(_text(analysis.get("original_requirement")))
    return PlanContext(requirement=requirement, requirement_length=length, summary=summary,
                       constraints=_strings((understanding or {}).get("constraints")),
                       documents=_documents([folder / NOTE_FILE, folder / SUMMARY_FILE, *contexts], repo))


def _lite(folder: Path, repo: Path) -> PlanContext:
    analysis = read_json_object(folder / ANALYSIS_FILE)
    requirement, length = _requirement(_text(analysis.get("original_requirement")))
    return PlanContext(requirement=requirement, requirement_length=length,
                       documents=_documents([folder / LITE_PLAN_FILE, folder / LITE_NOTES_FILE], repo))


def _workflow(folder: Path, repo: Path) -> PlanContext:
    session = read_json_object(folder / SESSION_FILE)
    structured = session.get("structured") if isinstance(session.get("structured"), dict) else {}
    plan = read_json_object(folder / PLAN_FILE)
    summary = [_text(plan.get(key)) for key in ("summary", "approach") if _text(plan.get(key))]
    goal = _text((structured or {}).get("goal")) or _text(session.get("description"))
    requirement, length = _requirement(goal)
    return PlanContext(requirement=requirement, requirement_length=length, summary=summary,
                       constraints=_strings((structured or {}).get("constraints")),
                       documents=_documents([folder / IMPL_PLAN_FILE, folder / NOTES_FILE], repo))


def for_executor(context: PlanContext, repo: Path, executor: str) -> PlanContext:
    """``context`` as the executor named ``executor``, working in a task's worktree of ``repo`` on this host, can
    use it. The planning documents are the session's files, which the worktree does not hold (listed relative to
    the repository, they pointed at nothing there): a command executor, a program that may read any file, is
    given the absolute path of each one this host has (a worker without the coordinator's disk has none); the
    claude executor, whose tools read only its worktree, none."""
    if executor != "command":
        return context.model_copy(update={"documents": []})
    paths = [Path(d) if Path(d).is_absolute() else repo / d for d in context.documents]
    return context.model_copy(update={"documents": [os.fspath(p.absolute()) for p in paths if p.is_file()]})


def read_context(kind: PlanKind, folder: Path, repo: Path) -> PlanContext:
    """The context of the session in ``folder`` (a collab, lite or workflow session folder)."""
    reader = {"collab": _collab, "lite": _lite, "workflow": _workflow}[kind]
    return reader(folder, repo)
