"""The context dimensions of `wfqueue verify`: E (synthesis) and J (N+1 context). Pure, like every check.

- E synthesis: the critical files of the exploration are touched; medium/high conflict
  risk was resolved; no "Parallel" recommendation over dependent tasks; modified files
  were part of the gathered context.
- J N+1: decisions flagged for revisit; decisions forbidding a path a task changes;
  deferred items that are planned anyway (HIGH) or carried over (LOW reminder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wfqueue.analysis import tokenize
from wfqueue.workflow_session.models import ContextPackage, Finding
from wfqueue.workflow_session.render import PlanningNotes
from wfqueue.workflow_session.verify.rules import (
    CONTROL_ARTIFACTS,
    changes,
    finding,
    forbidden_changes,
    is_under,
    key_terms,
)

if TYPE_CHECKING:
    from wfqueue.workflow_session.verify.checks import VerifyInput


def context_paths(ctx: ContextPackage | None, notes: PlanningNotes | None) -> list[str]:
    """Every path the context package and notes name (assets, critical files, modules, imports)."""
    paths: list[str] = list(notes.critical_files) if notes else []
    if ctx is not None:
        for entries in ctx.assets.values():
            paths += [e.get("path", "") if isinstance(e, dict) else str(e) for e in entries]
        paths += critical_files(ctx, None) + ctx.conflict_detection.affected_modules
        for dep in ctx.dependencies.get("internal", []):
            paths += [str(dep.get(k, "")) for k in ("from", "to")] if isinstance(dep, dict) else []
    return [p.rstrip("/") for p in paths if p]


def critical_files(ctx: ContextPackage | None, notes: PlanningNotes | None) -> list[str]:
    """The exploration's critical files (context package insights, then planning notes), once each."""
    found = ctx.critical_files() if ctx else []
    found += notes.critical_files if notes else []
    return list(dict.fromkeys(p for p in found if p))


def check_synthesis(inp: VerifyInput) -> list[Finding]:
    """E: the plan follows what context gathering and conflict analysis found."""
    out = [finding("E", "MEDIUM", [name], f"{name}: {why}", "re-run context gathering to restore it")
           for name, why in inp.artifact_errors.items() if name not in CONTROL_ARTIFACTS]
    critical = critical_files(inp.context, inp.notes)
    touched = [p.rstrip("/") for t in inp.tasks for p in [*(q for q, _ in changes(t)), *t.focus_paths]]
    text = " ".join(t.description + " " + " ".join(map(str, t.implementation)) for t in inp.tasks)
    # Referenced: a task changes it, focuses on a folder holding it, or names it in its description/steps.
    ignored = [c for c in critical if c not in text and not is_under(c.rstrip("/"), touched)
               and not any(is_under(p, [c.rstrip("/")]) for p in touched)]
    if ignored:
        severity = "HIGH" if len(ignored) == len(critical) else "MEDIUM"
        out.append(finding("E", severity, [".process/context-package.json"], f"no task touches the critical "
                           f"file(s) {', '.join(ignored)}", "cover them in a task or record why they are not changed"))
    ctx = inp.context
    if ctx is not None:
        if ctx.conflict_detection.risk_level in ("medium", "high") and inp.resolution is None:
            out.append(finding("E", "HIGH", [".process/context-package.json"], f"conflict risk is "
                               f"{ctx.conflict_detection.risk_level} but no conflict resolution was recorded",
                               "run conflict resolution before executing"))
        known = context_paths(ctx, inp.notes)
        for t in inp.tasks:
            # Once each: a task changes a file at several symbols.
            outside = list(dict.fromkeys(p for p, a in changes(t)
                                         if a != "create" and inp.exists(p) and not is_under(p, known)))
            if outside:
                out.append(finding("E", "MEDIUM", [f"task:{t.id}"], f"{t.id} changes {', '.join(outside)}, which the "
                                   "gathered context never examined", "re-gather context for these files"))
    parallel = inp.overview is not None and inp.overview.recommended_execution == "Parallel"
    if parallel and any(t.depends_on for t in inp.tasks):
        out.append(finding("E", "MEDIUM", ["plan.json"], "plan.json recommends Parallel execution of dependent tasks",
                           "recommend Phased or Sequential execution"))
    return out


def check_n_plus_one(inp: VerifyInput) -> list[Finding]:
    """J: decisions and deferred items of the N+1 context are honoured."""
    if inp.notes is None:
        return []
    out: list[Finding] = []
    for d in inp.notes.decisions:
        if d.revisit:
            out.append(finding("J", "MEDIUM", ["planning-notes.md"], f"decision flagged for revisit: {d.decision!r}",
                               "settle the decision before executing"))
    for t, path, text, _ in forbidden_changes(inp, [(d.decision, "planning-notes.md") for d in inp.notes.decisions]):
        out.append(finding("J", "HIGH", [f"task:{t.id}", "planning-notes.md"], f"{t.id} changes {path}, "
                           f"contradicting the decision {text!r}", "follow the decision or record a new one"))
    texts = [set(tokenize(f"{t.title} {t.description}")) for t in inp.tasks]
    common = set.intersection(*texts) if texts else set()
    for item in inp.notes.deferred:
        terms = set(key_terms(item))
        if not terms or item.strip().startswith("("):
            continue  # placeholder such as "(For N+1)"
        # Terms every task shares (the goal's subject) say nothing about which task plans the item.
        distinctive = terms - common if len(inp.tasks) > 1 and terms - common else terms
        overlap = [(len(distinctive & set(tokenize(f"{t.title} {t.description}"))), t) for t in inp.tasks]
        best = max(overlap, key=lambda pair: pair[0], default=(0, None))
        planned = [best[1]] if best[1] is not None and best[0] * 3 >= len(distinctive) * 2 else []
        if planned:
            out.append(finding("J", "HIGH", [f"task:{planned[0].id}", "planning-notes.md"], f"deferred item {item!r} "
                               f"is planned anyway by {planned[0].id}",
                               "drop it from the plan or from the deferred list"))
        else:
            out.append(finding("J", "LOW", ["planning-notes.md"], f"deferred to N+1: {item!r}",
                               "carry it into the next session"))
    return out
