"""`wfqueue verify`: read-only verification of a workflow session with a quality gate (ARTIFACTS §7).

``verify_session`` loads the session (the only reads), runs the checks of
``verify_checks`` (pure), limits and numbers the findings, and writes exactly two
files: ``.process/PLAN_VERIFICATION.md`` and ``.process/verification-findings.json``.
No other session file is touched. A session still being planned is refused before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from filelock import Timeout
from pydantic import BaseModel, Field, ValidationError

from wfqueue.errors import BadInputError, SessionBusyError, SessionNotFoundError
from wfqueue.fsio import atomic_write_json, atomic_write_text
from wfqueue.gitcmd import gitlinks
from wfqueue.markdown import table_cell as _cell
from wfqueue.plan_check import default_repo, in_repository
from wfqueue.sessions import WORKFLOW_DIR, repo_option
from wfqueue.tasks_file import load_task_dir
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import (
    ConflictResolution,
    ContextPackage,
    Finding,
    PlanOverview,
    QualityGate,
    WorkflowSession,
)
from wfqueue.workflow_session.render import PlanningNotes
from wfqueue.workflow_session.replan.backup import refuse_half_written
from wfqueue.workflow_session.session import (
    IMPL_PLAN_FILE,
    PLAN_FILE,
    PROCESS_DIR,
    SESSION_FILE,
    TASK_DIR,
    TODO_FILE,
    changes_locked,
    now_iso,
    read_session,
    still_planned_hint,
    task_number,
)
from wfqueue.workflow_session.verify.checks import (
    DIMENSIONS,
    UNMEASURED,
    VerifyInput,
    compute_coverage,
    goal_of,
    run_checks,
)

M = TypeVar("M", bound=BaseModel)
REPORT_FILE = "PLAN_VERIFICATION.md"
FINDINGS_FILE = "verification-findings.json"
SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
ID_PREFIX = {"CRITICAL": "C", "HIGH": "H", "MEDIUM": "M", "LOW": "L"}
TIER_LIMITS: dict[int, int | None] = {1: None, 2: 15, 3: 20, 4: 15}
TOTAL_LIMIT = 50
DIMENSION_ORDER = list(DIMENSIONS)  # A B C I D E J F G H: tier by tier
NEXT_STEPS: dict[str, str] = {
    "PROCEED": "The plan is ready: run `wfqueue execute`.",
    "PROCEED_WITH_CAUTION": "Medium findings only: execution may start; fix them when convenient "
                            "(`wfqueue replan`) and watch the affected tasks.",
    "PROCEED_WITH_FIXES": "Fix the HIGH findings first (`wfqueue replan`), then run `wfqueue verify` again.",
    "BLOCK_EXECUTION": "Do not execute: resolve every CRITICAL finding (`wfqueue replan` or re-plan), "
                       "then run `wfqueue verify` again. Until then `wfqueue execute` refuses the plan "
                       "(`--force` overrides).",
}


class CoverageSummary(BaseModel):
    percent: float = Field(description="0.0 when UNMEASURED")
    colour: Literal["GREEN", "YELLOW", "RED", "UNMEASURED"] = Field(
        description="UNMEASURED: the goal has no key word to look for, so coverage cannot be measured")
    terms: list[str] = Field(default_factory=list, description="the goal's key words, as the goal wrote them")
    missing: list[str] = Field(default_factory=list, description="key words no task addresses, as written")

    def describe(self) -> str:
        """What the CLI and PLAN_VERIFICATION.md show: '83.3 % (YELLOW)', or why there is no percentage."""
        if self.colour == UNMEASURED:
            return "not measured (the goal has no key word to match)"
        return f"{self.percent:.1f} % ({self.colour})"


class VerificationReport(BaseModel):
    """verification-findings.json. ``counts`` is keyed by severity (CRITICAL, HIGH, MEDIUM, LOW)."""

    session_id: str
    timestamp: str
    quality_gate: QualityGate
    coverage: CoverageSummary
    counts: dict[str, int]
    findings: list[Finding]
    task_count: int = 0
    skipped_tiers: list[int] = Field(default_factory=list, description="tiers not reported (tier-1 CRITICAL)")
    omitted: int = Field(default=0, description="findings dropped by the per-tier and total limits")
    tasks_digest: str | None = Field(default=None, description="the .task/ files verified, less what execution "
                                                               "writes back into them (tasks_digest)")


# -- pure core ----------------------------------------------------------------------------------


def tier_of(f: Finding) -> int:
    return DIMENSIONS[f.dimension][1]


def _rank(f: Finding) -> tuple[int, int, int]:
    return SEVERITIES.index(f.severity), tier_of(f), DIMENSION_ORDER.index(f.dimension)


def apply_limits(findings: list[Finding]) -> tuple[list[Finding], list[int], int]:
    """Kept findings, skipped tiers, number omitted.

    Tier 1 is never cut (even past the total of 50: those are the findings that
    block execution); lower tiers keep their most severe findings up to their own
    limit and what remains of the total. Any tier-1 CRITICAL skips tiers 3-4.
    """
    skipped = [3, 4] if any(tier_of(f) == 1 and f.severity == "CRITICAL" for f in findings) else []
    kept: list[Finding] = []
    for tier, limit in TIER_LIMITS.items():
        if tier in skipped:
            continue
        # sorted() is stable: equal severities keep the checks' order
        ranked = sorted((f for f in findings if tier_of(f) == tier), key=_rank)
        room = len(ranked) if limit is None else max(0, min(limit, TOTAL_LIMIT - len(kept)))
        kept += ranked[:room]
    return kept, skipped, len(findings) - len(kept)


def assign_ids(findings: list[Finding]) -> list[Finding]:
    """Sorted by severity, tier, dimension; numbered C1, C2.., H1.., M1.., L1.."""
    counters = dict.fromkeys(SEVERITIES, 0)
    numbered = []
    for f in sorted(findings, key=_rank):
        counters[f.severity] += 1
        numbered.append(f.model_copy(update={"id": f"{ID_PREFIX[f.severity]}{counters[f.severity]}"}))
    return numbered


def quality_gate(findings: list[Finding]) -> QualityGate:
    severities = {f.severity for f in findings}
    if "CRITICAL" in severities:
        return "BLOCK_EXECUTION"
    if "HIGH" in severities:
        return "PROCEED_WITH_FIXES"
    return "PROCEED_WITH_CAUTION" if "MEDIUM" in severities else "PROCEED"


def build_report(inp: VerifyInput, timestamp: str) -> VerificationReport:
    kept, skipped, omitted = apply_limits(run_checks(inp))
    findings = assign_ids(kept)
    cov = compute_coverage(inp)
    return VerificationReport(
        session_id=inp.session.session_id, timestamp=timestamp, quality_gate=quality_gate(findings),
        coverage=CoverageSummary(percent=cov.percent, colour=cov.colour, terms=cov.terms, missing=cov.missing),
        counts={s: sum(f.severity == s for f in findings) for s in SEVERITIES}, findings=findings,
        task_count=len(inp.tasks) + len(set(inp.broken_ids) - {t.id for t in inp.tasks}),
        skipped_tiers=skipped, omitted=omitted,
    )


def render_report(report: VerificationReport, goal: str) -> str:
    """PLAN_VERIFICATION.md: header, summary table, findings, per dimension, per severity, next steps."""
    cov = report.coverage
    lines = [f"# Plan Verification: {report.session_id}", "",
             f"- **Goal**: {_cell(goal)}", f"- **Verified at**: {report.timestamp}",
             f"- **Quality gate**: **{report.quality_gate}**", "",
             "## Executive Summary", "", "| Metric | Value |", "|---|---|",
             f"| Quality gate | {report.quality_gate} |",
             f"| Requirements coverage | {cov.describe()} |",
             f"| Tasks | {report.task_count} |",
             *[f"| {s.title()} findings | {report.counts[s]} |" for s in SEVERITIES],
             f"| Skipped tiers | {', '.join(map(str, report.skipped_tiers)) or '-'} |",
             f"| Omitted by limits | {report.omitted} |", "",
             "## Findings Summary", ""]
    if report.findings:
        lines += ["| ID | Dimension | Severity | Location | Summary |", "|---|---|---|---|---|"]
        lines += [f"| {f.id} | {f.dimension} {f.dimension_name} | {f.severity} | {_cell(', '.join(f.location))} "
                  f"| {_cell(f.summary)} |" for f in report.findings]
    else:
        lines.append("No findings.")
    lines += ["", "## Analysis by Dimension", ""]
    for dim in sorted(DIMENSIONS):
        name, tier = DIMENSIONS[dim]
        lines += [f"### {dim}. {name} (tier {tier})", ""]
        mine = [f for f in report.findings if f.dimension == dim]
        if tier in report.skipped_tiers:
            lines.append("- Skipped: tier-1 CRITICAL findings must be resolved first.")
        elif dim == "B":
            missing = "" if cov.colour == UNMEASURED else f"; missing: {_cell(', '.join(cov.missing)) or 'none'}"
            lines.append(f"- Coverage of the goal's key words: {cov.describe()}{missing}")
        lines += [f"- [{f.id}] {_cell(f.summary)}" for f in mine]
        if not mine and tier not in report.skipped_tiers:
            lines.append("- No findings.")
        lines.append("")
    lines += ["## Findings by Severity", ""]
    for severity in SEVERITIES:
        mine = [f for f in report.findings if f.severity == severity]
        lines += [f"### {severity} ({len(mine)})", ""]
        lines += [f"- **{f.id}** ({f.dimension} {f.dimension_name}) `{'`, `'.join(f.location)}`: {_cell(f.summary)}\n"
                  f"  - Recommendation: {_cell(f.recommendation)}" for f in mine] or ["- None."]
        lines.append("")
    lines += ["## Next Steps", "", NEXT_STEPS[report.quality_gate]]
    return "\n".join(lines) + "\n"


# -- I/O ----------------------------------------------------------------------------------------


def _read_text(folder: Path, name: str, errors: dict[str, str]) -> str | None:
    try:
        return (folder / name).read_text(encoding="utf-8")
    except FileNotFoundError:
        errors[name] = "missing"
    except (OSError, UnicodeDecodeError) as exc:
        errors[name] = f"unreadable ({exc})"
    return None


def _read_model(folder: Path, name: str, model: type[M], errors: dict[str, str], *,
                optional: bool = False) -> M | None:
    text = _read_text(folder, name, errors)
    if text is None:
        if optional and errors.get(name) == "missing":
            del errors[name]
        return None
    try:
        return model.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        errors[name] = f"invalid ({str(exc).splitlines()[0]})"
        return None


def load_input(folder: Path) -> VerifyInput:
    """Read every artifact of the session; problems become findings, not exceptions, except a session that is
    missing or still being planned (BadInputError: there is no plan to judge)."""
    if not (folder / SESSION_FILE).is_file():
        raise SessionNotFoundError(f"{folder} holds no {SESSION_FILE}", hint="pass a WFS-* session folder")
    session = read_session(folder)
    repo = _repo_of(folder, session.repo)
    _refuse_unfinished(session, repo)
    errors: dict[str, str] = {}
    loaded, problems = load_task_dir(folder / TASK_DIR) if (folder / TASK_DIR).is_dir() else ([], [])
    problems = [p for p in problems if p.code != "empty"]  # "no tasks" is reported by dimension B
    tasks: list[UnifiedTask] = [lt.task for lt in loaded]
    tasks.sort(key=lambda t: _order(t.id))
    process = folder / PROCESS_DIR
    return VerifyInput(
        session=session, tasks=tasks, task_locations={lt.task.id: lt.location for lt in loaded},
        load_problems=problems,
        # Tasks whose file cannot be used; a stray copy of a task is not a task of its own.
        broken_ids=sorted({p.location.rsplit("/", 1)[-1].removesuffix(".json") for p in problems
                           if p.code != "stray_copy"}),
        overview=_read_model(folder, PLAN_FILE, PlanOverview, errors),
        context=_read_model(process, "context-package.json", ContextPackage, errors),
        resolution=_read_model(process, "conflict-resolution.json", ConflictResolution, errors, optional=True),
        notes=_read_model(process, "planning-notes.json", PlanningNotes, errors),
        impl_plan=_read_text(folder, IMPL_PLAN_FILE, errors), todo=_read_text(folder, TODO_FILE, errors),
        artifact_errors=errors,
        # As validate and execute judge them: a file git tracks is there to change, on disk or not (a sparse
        # checkout leaves it out of the folder; every task's worktree has it).
        exists=in_repository(repo), is_dir=lambda rel: (repo / rel).is_dir(), submodules=gitlinks(repo),
    )


def _refuse_unfinished(session: WorkflowSession, repo: Path) -> None:
    """A session whose task generation has not finished (an interrupted `wfqueue plan`) has no plan yet: judging
    its missing files would send the user to `wfqueue replan`, which refuses it too. `wfqueue resume` finishes it.
    A session from another tool records no phases and is taken as finished (as replan does)."""
    state = session.tasks_unfinished()
    if state is not None:
        raise BadInputError(
            f"{session.session_id} is still being planned (its tasks phase is {state}), so it has no plan to "
            "verify yet; nothing was written",
            hint=still_planned_hint(session.session_id, repo,
                                    f"run `wfqueue verify --session {session.session_id}{repo_option(repo)}`"))


def _repo_of(folder: Path, recorded: str | None) -> Path:
    """The repository task paths are relative to: the folder holding .workflow/ (the session may have
    moved with its repository, so this wins over the recorded path), else the recorded repo."""
    if any(parent.name == WORKFLOW_DIR for parent in folder.resolve().parents):
        return default_repo(folder)
    return Path(recorded) if recorded else folder


def _order(task_id: str) -> tuple[int, ...]:
    try:
        return task_number(task_id)
    except (ValueError, IndexError):
        return (1 << 30,)  # odd ids (not IMPL-N) after the numbered ones


# What `wfqueue execute` writes back into a task file (wfqueue.execute.writeback): not part of the plan verified.
RUNTIME_FIELDS = frozenset({"status", "executed_at", "result", "commit", "branch", "attempts", "executor"})


def tasks_digest(task_dir: Path) -> str:
    """A digest of the plan in ``task_dir``: every ``*.json`` file's name and content, less the fields execution
    writes back. Whether the tasks changed since a verification, whatever their files' times say."""
    digest = hashlib.sha256()
    for path in sorted(p for p in task_dir.glob("*.json") if p.is_file()):
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError):
            data = path.read_bytes().hex()  # unreadable as JSON: its bytes are what it is
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in RUNTIME_FIELDS}
        digest.update(path.name.encode("utf-8") + b"\0" + json.dumps(data, sort_keys=True).encode("utf-8") + b"\0")
    return digest.hexdigest()


def verify_session(folder: Path, lock_timeout_s: float = 60.0) -> VerificationReport:
    """Verify the session in ``folder``; writes only the two verification files under .process/. Its files are
    read while no replan or restore changes them: under their lock once a replan has made it (a session never
    replanned gets no lock file from a verify; one a replan starts meanwhile is read again under it)."""

    def read() -> tuple[VerifyInput, str]:
        refuse_half_written(folder, "verify it")
        return load_input(folder), tasks_digest(folder / TASK_DIR)

    lock = changes_locked(folder, lock_timeout_s)
    try:
        if not Path(lock.lock_file).exists():
            inp, digest = read()
            if not Path(lock.lock_file).exists():
                return _report(folder, inp, digest)
        with lock:
            inp, digest = read()
    except Timeout:
        raise SessionBusyError(f"a replan of {folder.name} holds its lock", hint="wait for it to finish, then verify "
                               "again") from None
    return _report(folder, inp, digest)


def _report(folder: Path, inp: VerifyInput, digest: str) -> VerificationReport:
    report = build_report(inp, now_iso()).model_copy(update={"tasks_digest": digest})
    # The findings first: `execute` follows their verdict. Stopped between the two writes, the findings are new and
    # the report a person reads the earlier one (verify again rewrites both); the other way round, execute
    # followed a verdict older than the one the report showed.
    atomic_write_json(folder / PROCESS_DIR / FINDINGS_FILE, report.model_dump(mode="json"))
    atomic_write_text(folder / PROCESS_DIR / REPORT_FILE, render_report(report, goal_of(inp)))
    return report
