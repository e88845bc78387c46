"""``SESSION_OR_PLAN`` -> one :class:`ExecutablePlan`, validated, or refused with every problem.

Accepted: a session id (collab, lite or workflow, found by :func:`wfqueue.workflow.registry.locate`), or a path
to a collab session folder (every agent's ``agents/*/plan.json``), one agent's ``plan.json``, a lite
session folder or its ``tasks.jsonl``, a workflow session folder or its ``.task/`` folder. Reading and
checking the tasks is :mod:`wfqueue.tasks_file`'s, the same as ``wfqueue validate``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wfqueue.collab.steps import ANALYSIS_FILE, NOTE_FILE, UNFINISHED, is_cancelled, note_status
from wfqueue.errors import BadInputError, WfqueueError
from wfqueue.execute.model import ExecutablePlan, PlanKind, PlanVerdict, exec_task
from wfqueue.execute.plan_context import AGENT_PLAN_FILE, AGENTS_DIR, agent_plan_files, read_context
from wfqueue.execute.safety import ignored, refuse_bare, untracked
from wfqueue.execute.validate import refuse_problems
from wfqueue.fsio import read_json_object
from wfqueue.gitcmd import run_git
from wfqueue.lite.render import says_awaiting, says_cancelled
from wfqueue.lite.steps import PLAN_FILE, TASKS_FILE
from wfqueue.plan_check import check_plan, default_repo, in_repository, repo_relative, validate_path
from wfqueue.sessions import LITE_DIR, repo_option, resolve_repo
from wfqueue.tasks_file import LoadedTask, TaskProblem, load_object, load_task_dir, loads_plan_json
from wfqueue.workflow_session.replan.backup import refuse_half_written
from wfqueue.workflow_session.session import (
    PROCESS_DIR,
    SESSION_FILE,
    TASK_DIR,
    read_session,
    still_planned_hint,
)

TARGET_HINT = ("pass a session id (CPLAN-..., WFS-..., a lite plan's id) or the path of a session folder, "
               "a tasks.jsonl, a .task/ folder or an agent's plan.json")


@dataclass(frozen=True)
class PlanSource:
    """Where a plan's tasks are: its kind, the session folder, the file or folder holding the tasks."""

    kind: PlanKind
    folder: Path
    tasks_at: Path


def _source_of_path(path: Path) -> PlanSource:
    if path.is_file():
        if path.suffix == ".jsonl":
            return PlanSource("lite", path.parent, path)
        if path.name == AGENT_PLAN_FILE and path.parent.parent.name == AGENTS_DIR:
            return PlanSource("collab", path.parent.parent.parent, path)
        raise BadInputError(f"{path}: unsupported file type, not a plan", hint=f"{TARGET_HINT} (for one "
                                                                               ".task/*.json, its folder)")
    if (path / AGENT_PLAN_FILE).is_file() and path.parent.name == AGENTS_DIR:  # one agent's folder
        return PlanSource("collab", path.parent.parent, path / AGENT_PLAN_FILE)
    if (path / AGENTS_DIR).is_dir() or (path / NOTE_FILE).is_file():
        return PlanSource("collab", path, path / AGENTS_DIR)
    if (path / TASKS_FILE).is_file():
        return PlanSource("lite", path, path / TASKS_FILE)
    if (path / TASK_DIR).is_dir():
        return PlanSource("workflow", path, path / TASK_DIR)
    if path.parent.name == LITE_DIR:  # a lite plan's folder before its tasks.jsonl is written
        return PlanSource("lite", path, path / TASKS_FILE)
    if path.name == TASK_DIR:
        return PlanSource("workflow", path.parent, path)
    if path.name == AGENTS_DIR and (path.parent / NOTE_FILE).is_file():  # what an execution records as its source
        return PlanSource("collab", path.parent, path)
    raise BadInputError(f"{path}: holds no plan (no agents/, tasks.jsonl or .task/ folder)", hint=TARGET_HINT)


def resolve_source(target: str, repo: str | None) -> tuple[PlanSource, Path]:
    """The plan ``target`` names and the repository it changes (``--repo``, else the one it lives in)."""
    path = Path(target).expanduser()
    if path.exists():
        root = resolve_repo(repo) if repo is not None else default_repo(path)
        return _source_of_path(path.resolve()), root
    if path.name == TASKS_FILE and path.parent.is_dir() and path.parent.parent.name == LITE_DIR:
        # A lite plan's tasks.jsonl not written yet: said as such (refuse_unfinished), not as a mistyped path.
        root = resolve_repo(repo) if repo is not None else default_repo(path.parent)
        return _source_of_path(path.parent.resolve()), root
    if "/" in target or "\\" in target or path.suffix in (".jsonl", ".json"):
        raise BadInputError(f"{target}: no such file or folder", hint=TARGET_HINT)
    root = resolve_repo(repo)
    # Imported here: the registry imports every workflow's coordinator, execution's among them.
    from wfqueue.workflow.registry import locate

    found_kind, folder = locate(root, target)
    found = found_kind.name
    kinds: dict[str, tuple[PlanKind, Path]] = {"collab": ("collab", folder / AGENTS_DIR),
                                               "lite": ("lite", folder / TASKS_FILE),
                                               "workflow": ("workflow", folder / TASK_DIR)}
    kind, tasks_at = kinds[found]
    return PlanSource(kind, folder, tasks_at), root


def _collab_tasks(source: PlanSource) -> tuple[list[LoadedTask], list[TaskProblem]]:
    """Every agent's tasks (or the one agent's, for a plan.json path), in id-range order."""
    files = [source.tasks_at] if source.tasks_at.is_file() else agent_plan_files(source.folder)
    tasks: list[LoadedTask] = []
    problems: list[TaskProblem] = []
    for plan_file in files:
        name = plan_file.relative_to(source.folder).as_posix()
        try:
            data = loads_plan_json(plan_file.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is one
            problems.append(TaskProblem(location=name, task_id=None, code="invalid_json",
                                        message=f"cannot be read as JSON ({exc}); fix or re-plan this agent"))
            continue
        entries = data.get("tasks") if isinstance(data, dict) else None
        if entries is None and (plan_file.parent / TASK_DIR).is_dir():
            # An agent plan may keep its tasks as .task/TASK-NNN.json files instead (ARTIFACTS.md section 3).
            found_tasks, found = load_task_dir(plan_file.parent / TASK_DIR)
            tasks.extend(found_tasks)
            problems.extend(found)
            continue
        if not isinstance(entries, list):
            problems.append(TaskProblem(location=name, task_id=None, code="schema",
                                        message="has no tasks[] list; re-plan this agent"))
            continue
        for n, entry in enumerate(entries):
            task, found = load_object(entry, f"{name} tasks[{n}]")
            tasks.extend([task] if task else [])
            problems.extend(found)
    if not tasks and not problems:
        # Every agent answered with none (the plan ended failed, saying so): a resume has nothing to run again.
        areas = read_json_object(source.folder / ANALYSIS_FILE).get("sub_domains")
        answered = bool(files) and isinstance(areas, list) and len(files) >= len(areas)
        problems.append(TaskProblem(location=f"{source.folder.name}/{AGENTS_DIR}", task_id=None, code="empty",
                                    message="no agent planned a task; plan the requirement again" if answered
                                    else "no agent plan holds a task; finish or resume the plan first"))
    return tasks, problems


def read_verdict(source: PlanSource) -> PlanVerdict | None:
    """A workflow session's last verification, if it has one that can be read (a damaged findings file counts
    as none: `wfqueue verify` writes it again)."""
    if source.kind != "workflow":
        return None
    # Imported here: only workflow sessions carry a verification.
    from wfqueue.workflow_session.verify.run import FINDINGS_FILE, VerificationReport, tasks_digest

    findings = source.folder / PROCESS_DIR / FINDINGS_FILE
    try:
        report = VerificationReport.model_validate_json(findings.read_bytes())
        verified_at = findings.stat().st_mtime_ns
    except (OSError, ValueError):
        return None
    task_dir = source.folder / TASK_DIR
    if report.tasks_digest is not None:  # what execution writes back into the tasks does not count
        stale = report.tasks_digest != tasks_digest(task_dir)
    else:  # a verification from before the digest: the files' times tell
        stale = any(p.stat().st_mtime_ns > verified_at for p in task_dir.glob("*.json") if p.is_file())
    return PlanVerdict(quality_gate=report.quality_gate,
                       critical=[f"{f.id} {', '.join(f.location)}: {f.summary}" for f in report.findings
                                 if f.severity == "CRITICAL"],
                       stale=stale)


def refuse_unaccepted(source: PlanSource, root: Path) -> None:
    """A plan the user cancelled when it was shown, or was shown and not accepted yet (lite: its plan.md says so;
    collab: its note), is not run: it has tasks on disk, but nobody accepted them."""
    if source.kind == "lite":
        plan_md = source.folder / PLAN_FILE
        said = plan_md.read_text(encoding="utf-8", errors="replace") if plan_md.is_file() else ""
        if says_awaiting(said):
            raise BadInputError(f"{source.folder.name} was shown for acceptance and is not accepted yet",
                                hint=f"answer its question (allow, modify or cancel), or, if its command stopped, run "
                                     f"`wfqueue resume {source.folder.name}{repo_option(root)}`; then execute it")
        cancelled = says_cancelled(said)
    else:
        cancelled = source.kind == "collab" and is_cancelled(source.folder)
    if cancelled:
        # A lite plan is cancelled once its tasks are shown; a collaborative one when its split is, before any
        # agent planned.
        what = "its plan was shown: its tasks were never accepted" if source.kind == "lite" else (
            "its split into areas was shown: no agent planned its tasks")
        raise BadInputError(f"{source.folder.name} was cancelled when {what}",
                            hint="plan the requirement again, then execute the new plan")


def refuse_unfinished(source: PlanSource, root: Path) -> None:
    """A plan whose planning has not finished (its command stopped, or still runs) has no plan to run yet: a
    collaborative plan whose note still says understanding or planning (agents' plans missing, its conflicts never
    detected: its tasks passed validate and ran), a lite plan with no tasks.jsonl yet, a workflow session whose
    task generation has not finished (what its .task/ holds is an earlier generation's, or part of one)."""
    name = source.folder.name
    if source.kind == "collab" and note_status(source.folder) in UNFINISHED:
        raise BadInputError(f"{name} is still being planned: not every agent's plan is in, and its conflicts are "
                            "not detected yet", hint=still_planned_hint(name, root, "execute it"))
    if source.kind == "lite" and source.folder.parent.name == LITE_DIR and not source.tasks_at.exists():
        raise BadInputError(f"{name} has no {TASKS_FILE} yet: its plan did not finish",
                            hint=still_planned_hint(name, root, "execute it"))
    if source.kind != "workflow" or not (source.folder / SESSION_FILE).is_file():
        return  # a plan's own files, or another tool's: its tasks are the plan
    refuse_half_written(source.folder, "execute it", lock_timeout_s=60.0)  # a replan writing now: waited for
    state = read_session(source.folder).tasks_unfinished()
    if state is not None:
        raise BadInputError(
            f"{source.folder.name} is still being planned (its tasks phase is {state}): it has no plan to execute yet",
            hint=still_planned_hint(source.folder.name, root, "execute it"))


def readiness_problems(source: PlanSource, root: Path) -> list[TaskProblem]:
    """Why `execute` would refuse the plan at ``source`` before reading its tasks (not accepted, still being
    planned, a replan or restore stopped half-way), as ``wfqueue validate`` reports it: it said "0 problems"."""
    return [problem for check in (refuse_unaccepted, refuse_unfinished)
            if (problem := _not_ready(check, source, root)) is not None]


def unfinished_problem(source: PlanSource, root: Path) -> TaskProblem | None:
    """The problem of a plan still being planned: its tasks are no plan yet, and their own problems (dependencies
    on tasks other agents have not planned) would only mislead."""
    return _not_ready(refuse_unfinished, source, root)


def _not_ready(check: Callable[[PlanSource, Path], None], source: PlanSource, root: Path) -> TaskProblem | None:
    try:
        check(source, root)
    except WfqueueError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        return TaskProblem(location=source.folder.name, task_id=None, code="not_ready", message=exc.message + hint)
    return None


def read_plan(source: PlanSource, root: Path) -> tuple[list[LoadedTask], list[TaskProblem]]:
    """Every task of the plan at ``source`` and every problem with them (``wfqueue validate``'s findings)."""
    if source.kind == "collab":
        tasks, problems = _collab_tasks(source)
        problems += check_plan(tasks, root, in_repository(root))
    else:
        tasks, problems = validate_path(source.tasks_at, root)
    return tasks, problems + _ignored_by_git(tasks, root)


def _ignored_by_git(tasks: list[LoadedTask], root: Path) -> list[TaskProblem]:
    """Files a task modifies or deletes that git ignores: there on disk, so `validate` passed them, but never in
    HEAD, where every task of an execution starts (`execute` refused the plan). Nothing outside a git work tree."""
    changed = {(loaded.location, loaded.task.id, rel) for loaded in tasks for entry in loaded.task.files
               if entry.action != "create" and (rel := repo_relative(entry.path)) is not None}
    paths = sorted({rel for _, _, rel in changed})
    try:
        top = run_git(root, "rev-parse", "--show-toplevel", check=False) if paths else None
        if top is None or top.returncode != 0:
            return []
        if Path(top.stdout.strip()).resolve() != root.resolve() and run_git(
                root, "check-ignore", "-q", ".", check=False).returncode == 0:
            return []  # a copy inside another checkout that ignores it: execute says to make it a repository
        found = set(ignored(root, untracked(root, paths)))
    except WfqueueError:  # git missing or failing: the other checks stand
        return []
    return [TaskProblem(location=location, task_id=task_id, code="bad_path",
                        message=f"file {rel} is ignored by git: every task of an execution starts from HEAD, where it "
                                "is not; stop ignoring it and commit it, or leave it out")
            for location, task_id, rel in sorted(changed) if rel in found]


def load_plan(target: str, repo: str | None = None) -> ExecutablePlan:
    """The plan ``target`` names, every task checked; a plan with any problem is refused (exit 2)."""
    source, root = resolve_source(target, repo)
    refuse_bare(root)
    refuse_unaccepted(source, root)
    refuse_unfinished(source, root)
    tasks, problems = read_plan(source, root)
    refuse_problems(problems)
    return ExecutablePlan(
        kind=source.kind, session_id=source.folder.name, source=str(source.tasks_at), repo=str(root),
        tasks=[exec_task(t.task, t.location) for t in tasks], context=read_context(source.kind, source.folder, root),
        verdict=read_verdict(source),
    )
