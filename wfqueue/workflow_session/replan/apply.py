"""`wfqueue replan`: change a workflow session's plan safely (seed phase 6, ARTIFACTS §8).

Order of work, and why:

1. read the session once (:func:`load_snapshot`) and parse the request (pure);
2. clarify (questions, or the safe defaults), work out the new task set and its
   impact in memory and show it; a plan with problems (11 tasks, a cycle, an
   unknown dependency, an invalid task, a file to modify that the repository
   lacks) is refused here, before any file is touched, so the session stays
   byte-identical;
3. under the session's replan lock: check nothing changed since step 1, write
   the backup (manifest last), write the new files (session record last);
4. validate what is on disk; on any failure, or an exception while writing,
   put the backup back byte for byte and report why.

The lock is ``.process/replan.lock``; it only orders replans on one host (see
the file-lock pitfalls), which is all a user command needs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from filelock import Timeout
from pydantic import BaseModel, Field, ValidationError

from wfqueue.errors import (
    BadInputError,
    InfrastructureError,
    ReplanCancelledError,
    ReplanRefusedError,
    ReplanRolledBackError,
    SessionBusyError,
    TaskNotFoundError,
)
from wfqueue.fsio import atomic_write_text, remove
from wfqueue.plan_check import in_repository
from wfqueue.sessions import repo_option
from wfqueue.tasks_file import is_legacy, legacy_to_unified
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import ContextPackage, PlanOverview, ReplanEntry
from wfqueue.workflow_session.render import PlanningNotes
from wfqueue.workflow_session.replan.artifacts import render_artifacts, render_impact, unrendered
from wfqueue.workflow_session.replan.backup import (
    Manifest,
    clear_pending,
    mark_pending,
    new_backup_dir,
    pending_backup,
    refuse_half_written,
    restore_command,
    restore_files,
    write_backup,
)
from wfqueue.workflow_session.replan.impact import (
    Impact,
    SessionSnapshot,
    check_task_set,
    plan_changes,
)
from wfqueue.workflow_session.replan.intent import DEFAULT_TOOLS, normalise_id, parse_request
from wfqueue.workflow_session.replan.select import SAFE_DEFAULTS, ReplanUI, clarify
from wfqueue.workflow_session.session import (
    IMPL_PLAN_FILE,
    PLAN_FILE,
    PROCESS_DIR,
    SESSION_FILE,
    TASK_DIR,
    TASK_FILE,
    TODO_FILE,
    changes_locked,
    find_session,
    load_session,
    read_session,
    still_planned_hint,
    task_files,
)

CONTEXT_FILE = "context-package.json"
NOTES_JSON = "planning-notes.json"
MAX_ADJUST_ROUNDS = 5
Writer = Callable[[Path, str], object]


class ReplanSummary(BaseModel):
    status: Literal["applied", "unchanged"]
    session_id: str
    timestamp: str
    mode: Literal["session", "task"]
    task_id: str | None = None
    scope: str
    reason: str
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    dependents: dict[str, list[str]] = Field(default_factory=dict)
    files: list[str] = Field(default_factory=list, description="session files changed")
    execution_config: dict[str, Any] | None = None
    backup: str | None = None
    rollback: str | None = None
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# -- reading ------------------------------------------------------------------------------


def _current_bytes(folder: Path) -> dict[str, bytes]:
    rels = [SESSION_FILE, PLAN_FILE, IMPL_PLAN_FILE, TODO_FILE] + [f"{TASK_DIR}/{p.name}" for p in task_files(folder)]
    return {rel: (folder / rel).read_bytes() for rel in rels if (folder / rel).is_file()}


def _topic(todo: bytes | None, fallback: str) -> str:
    """Keep the TODO list's own heading: it is what the plan command chose."""
    first = (todo or b"").decode("utf-8", "replace").split("\n", 1)[0]
    return first.removeprefix("# Tasks: ").strip() if first.startswith("# Tasks: ") else fallback


def load_snapshot(folder: Path) -> SessionSnapshot:
    """Read the session once; a task file that is not JSON stops the replan (exit 2)."""
    session = read_session(folder)
    files = _current_bytes(folder)
    for rel in (PLAN_FILE, IMPL_PLAN_FILE, TODO_FILE):  # what a replan writes, besides task files (below)
        if (folder / rel).exists() and rel not in files:  # a folder by its name: the write, then its rollback, fail
            raise ReplanRefusedError(f"{rel} is not a file; nothing was changed",
                                     hint=f"remove it (a replan writes {rel} anew), or put the file back in its place")
    tasks: dict[str, dict[str, Any]] = {}
    file_of: dict[str, str] = {}
    for path in task_files(folder):
        rel = f"{TASK_DIR}/{path.name}"
        if rel not in files:  # a folder (or something else) by a task file's name
            raise ReplanRefusedError(f"{rel} is not a file; nothing was changed",
                                     hint="remove it, or put the task's JSON file back in its place")
        try:
            data = json.loads(files[rel].decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReplanRefusedError(f"{rel} is not valid JSON ({exc}); nothing was changed",
                                     hint=f"fix or remove it first (wfqueue validate {folder / TASK_DIR})") from None
        if not isinstance(data, dict):
            raise ReplanRefusedError(f"{rel} holds no task object; nothing was changed", hint="fix or remove it first")
        if is_legacy(data):
            data = legacy_to_unified(data)  # the 6-field layout is read, mapped, and written unified
        tid = str(data.get("id") or path.stem)
        if not TASK_FILE.match(f"{tid}.json"):  # hand-edited: the plan's order and renumbering need IMPL-N ids
            raise ReplanRefusedError(f"{rel} holds the id {tid!r}, not an IMPL-N id; nothing was changed",
                                     hint=f"give it the id {path.stem}, as its file name says")
        if tid != normalise_id(tid):  # a request's IMPL-01 is IMPL-1, and the task by that id was "not found"
            raise ReplanRefusedError(f"{rel} holds the id {tid}, which a replan request names {normalise_id(tid)} (an "
                                     "id's numbers have no leading zeros); nothing was changed",
                                     hint=f"rename the task {normalise_id(tid)}: its file, its id, and the "
                                          "depends_on lists and plan.json that name it")
        if tid in tasks:
            raise ReplanRefusedError(f"{rel} and {file_of[tid]} both hold {tid}; nothing was changed",
                                     hint="give each task its own id and file")
        if tid != path.stem:  # plan.json and the other tasks know it by its file name: the replan failed its own check
            raise ReplanRefusedError(f"{rel} holds the id {tid}, not {path.stem} as its file name says; nothing was "
                                     "changed", hint=f"give it back the id {path.stem}: a task's id and its file's "
                                                     "name are one (plan.json and the dependencies use it)")
        tasks[tid] = data
        file_of[tid] = rel
    process = folder / PROCESS_DIR
    plan = _readable(PLAN_FILE, lambda: _plan_fields(files[PLAN_FILE])) if PLAN_FILE in files else None
    # The planning's own records: no backup holds them, and a replan goes on without them (IMPL_PLAN.md then
    # keeps the text it has).
    without = "move it out of the session folder (the replan then leaves IMPL_PLAN.md as it is), or plan it again"
    context = _readable(f"{PROCESS_DIR}/{CONTEXT_FILE}", lambda: ContextPackage.model_validate_json(
        (process / CONTEXT_FILE).read_text(encoding="utf-8")), hint=without) \
        if (process / CONTEXT_FILE).is_file() else None
    notes = _readable(f"{PROCESS_DIR}/{NOTES_JSON}", lambda: PlanningNotes.model_validate_json(
        (process / NOTES_JSON).read_text(encoding="utf-8")), hint=without) \
        if (process / NOTES_JSON).is_file() else None
    goal = session.structured.goal if session.structured else session.description
    return SessionSnapshot(session=session, tasks=tasks, task_files=file_of, files=files, plan=plan,
                           context=context, constraints=notes.consolidated if notes else [],
                           topic=_topic(files.get(TODO_FILE), goal))


T = TypeVar("T")


def _plan_fields(raw: bytes) -> dict[str, Any]:
    """plan.json's fields, unknown ones kept (a replan writes them back), once they read as a PlanOverview: a
    hand-edited `[]` or `"summary": 5` ended the replan in a traceback."""
    data = json.loads(raw.decode("utf-8-sig"))
    PlanOverview.model_validate(data)  # a ValueError (pydantic's ValidationError) when it is not one
    return cast(dict[str, Any], data)


def _readable(rel: str, read: Callable[[], T],
              hint: str = "restore the session from a backup (wfqueue replan --restore), or plan it again") -> T:
    """``read()``, with a damaged file (not UTF-8, not JSON, not the shape this version writes) refused by
    name: pydantic's ValidationError and JSONDecodeError are both ValueErrors."""
    try:
        return read()
    except (UnicodeDecodeError, ValueError) as exc:
        raise ReplanRefusedError(f"{rel} cannot be read ({str(exc).splitlines()[0]}); nothing was changed",
                                 hint=hint) from None


def validate_session(folder: Path, repo: Path | None = None) -> list[str]:
    """Consistency of what is on disk (ARTIFACTS §8): every task file JSON and a valid unified
    task named after its id, at least one and at most 10, every dependency known, no cycle; plan.json in sync;
    with ``repo``, every file a task modifies exists there."""
    problems: list[str] = []
    items: list[tuple[str, Any]] = []
    for path in task_files(folder):
        rel = f"{TASK_DIR}/{path.name}"
        try:
            items.append((rel, json.loads(path.read_text(encoding="utf-8-sig"))))  # a BOM, as verify reads it
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(f"{rel}: invalid JSON ({exc})")
    problems += check_task_set(items, in_repository(repo.resolve()) if repo is not None else None)
    try:
        load_session(folder)
    except (OSError, ValueError) as exc:
        problems.append(f"{SESSION_FILE}: {exc}")
    if (folder / PLAN_FILE).is_file():
        try:
            plan = json.loads((folder / PLAN_FILE).read_text(encoding="utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:  # a problem to list, not a traceback
            return [*problems, f"{PLAN_FILE}: invalid JSON ({exc})"]
        ids = [Path(rel).stem for rel, _ in items]
        if not isinstance(plan, dict) or plan.get("task_ids") != ids or plan.get("task_count") != len(ids):
            problems.append(f"{PLAN_FILE}: task_ids/task_count do not match the task files ({', '.join(ids)})")
    return problems


# -- replanning ---------------------------------------------------------------------------


def _refuse_unknown_task(snap: SessionSnapshot, task_id: str) -> None:
    if task_id not in snap.tasks:
        raise TaskNotFoundError(f"Task {task_id} not found in session {snap.session.session_id}",
                                hint=f"available tasks: {', '.join(snap.tasks) or 'none'}")


def _refuse_unfinished(snap: SessionSnapshot, repo: Path) -> None:
    """A session whose task generation has not finished: `wfqueue resume` generates its tasks afresh, which would
    replace what a replan wrote. A session from another tool records no phases and is taken as finished."""
    session = snap.session
    state = session.tasks_unfinished()
    if state is not None:
        raise ReplanRefusedError(
            f"{session.session_id} is still being planned (its tasks phase is {state}); nothing was changed",
            hint=still_planned_hint(session.session_id, repo, "replan it"))


def run_replan(repo: Path, text: str | None, ui: ReplanUI, *, task_id: str | None = None,
               session_id: str | None = None, interactive: bool = False, tools: Sequence[str] = DEFAULT_TOOLS,
               lock_timeout_s: float = 60.0, now: datetime | None = None,
               write: Writer = atomic_write_text) -> ReplanSummary:
    """Replan one session (task mode when ``task_id`` is given). ``interactive`` asks the
    clarification questions and the confirmation through ``ui``; otherwise the safe defaults
    apply. ``write`` is the file writer (tests pass one that fails)."""
    folder = find_session(repo, session_id)
    refuse_half_written(folder, "replan it again", lock_timeout_s=lock_timeout_s)
    snap = load_snapshot(folder)
    _refuse_unfinished(snap, repo)
    if task_id is not None:
        _refuse_unknown_task(snap, task_id)
    if not (text or "").strip() and interactive:
        text = ui.ask_text(f"What should change in {task_id or snap.session.session_id}?")
    request = parse_request(text or "", task_id, tools)
    if request.empty:
        raise BadInputError("No modifications specified", hint="use --interactive, or say what changes")
    stamp = (now or datetime.now(UTC)).astimezone(UTC)
    when = stamp.isoformat(timespec="seconds")
    if not interactive:
        ui.info("using safe defaults: scope tasks_only, task changes update_only, dependencies preserved "
                "(operations the request states itself still apply)")
    if snap.plan is None:  # its task list would not follow the change: `verify` and `resume` then disagree with it
        raise ReplanRefusedError(
            f"{PLAN_FILE} is missing from {folder.name}: a replan keeps its task list in step with the task files; "
            "nothing was changed",
            hint=f"put it back (a backup under {PROCESS_DIR}/backup/ may hold it), or plan the requirement again")
    if snap.context is None:
        ui.info(f"{IMPL_PLAN_FILE} will not be re-rendered: .process/{CONTEXT_FILE} is missing")
    tasks = [t for t in (_as_unified(d) for d in snap.tasks.values()) if t is not None]
    for round_ in range(1, MAX_ADJUST_ROUNDS + 1):
        selections = clarify(ui, request, tasks) if interactive else SAFE_DEFAULTS
        draft = plan_changes(snap, request, selections, when, repo_option(repo), in_repository(repo.resolve()))
        impact = draft.impact
        backup = new_backup_dir(folder, stamp)
        entry = ReplanEntry(timestamp=when, reason=request.text, scope=impact.scope, added=impact.added,
                            updated=impact.updated, deleted=impact.deleted,
                            backup=backup.relative_to(folder).as_posix())
        artifacts = render_artifacts(snap, draft, entry) if impact.changed and not impact.problems else {}
        if artifacts and (broken := unrendered(draft)):
            ui.info(f"{IMPL_PLAN_FILE} and {TODO_FILE} will not be re-rendered while {', '.join(broken)} "
                    f"{'is' if len(broken) == 1 else 'are'} not a valid task (see the warnings); a replan of "
                    f"{broken[0]} can mend it")
        ui.show_impact(render_impact(impact, list(artifacts)))
        if impact.problems:
            raise ReplanRefusedError("replan refused, nothing was changed: " + "; ".join(impact.problems),
                                     hint="change the request so the plan stays consistent")
        if not interactive or not impact.changed:
            break
        decision = ui.confirm("Modification plan generated. Confirm action:")
        if decision == "cancel":
            raise ReplanCancelledError("replan cancelled; nothing was changed")
        if decision == "confirm":
            break
        if round_ == MAX_ADJUST_ROUNDS:
            raise ReplanCancelledError(f"no decision after {MAX_ADJUST_ROUNDS} adjustments; nothing was changed")
    summary = ReplanSummary(status="unchanged", session_id=snap.session.session_id, timestamp=when,
                            mode=impact.mode, task_id=task_id, scope=impact.scope, reason=request.text,
                            dependents=impact.dependents, execution_config=impact.execution_config,
                            warnings=impact.warnings, notes=impact.notes)
    if not impact.changed:
        ui.info("nothing to change: the session already matches the request")
        return summary
    _apply(folder, repo, snap, impact, artifacts, backup, when, write, lock_timeout_s)
    return summary.model_copy(update={
        "status": "applied", "added": impact.added, "updated": impact.updated, "deleted": impact.deleted,
        "files": list(artifacts), "backup": str(backup), "rollback": restore_command(backup, snap.session.session_id)})


def _as_unified(data: dict[str, Any]) -> UnifiedTask | None:
    try:
        return UnifiedTask.model_validate(data)
    except ValidationError:
        return None  # reported by the consistency check of the draft


def _apply(folder: Path, repo: Path, snap: SessionSnapshot, impact: Impact, artifacts: dict[str, str | None],
           backup: Path, when: str, write: Writer, lock_timeout_s: float) -> None:
    manifest = Manifest(session_id=snap.session.session_id, timestamp=when, reason=impact.reason, scope=impact.scope,
                        mode=f"task {impact.task_id}" if impact.task_id else "session",
                        files=[rel for rel in artifacts if rel in snap.files],
                        deleted=[rel for rel, text in artifacts.items() if text is None],
                        created=[rel for rel in artifacts if rel not in snap.files],
                        written={rel: hashlib.sha256(text.encode("utf-8")).hexdigest()
                                 for rel, text in artifacts.items() if text is not None})
    try:
        with changes_locked(folder, lock_timeout_s):
            if _current_bytes(folder) != snap.files or backup.exists() or pending_backup(folder) is not None:
                raise SessionBusyError(f"{snap.session.session_id} changed while the replan was prepared; "
                                       "nothing was written", hint="run the replan again")
            # Only what this replan breaks rolls it back: a problem the plan had before is not its doing, and
            # refusing every replan would leave no way to fix it.
            known = set(validate_session(folder, repo))
            try:
                write_backup(folder, backup, manifest)  # backup first, always; a failed one is removed
            except InfrastructureError as exc:  # a full or read-only disk
                raise InfrastructureError(f"{exc.message}: the backup could not be written; nothing was changed",
                                          hint="free some space there (or make it writable), then run the replan "
                                               "again") from None
            try:
                mark_pending(folder, backup)  # until the replan is checked or rolled back (a SIGKILL in between)
                for rel, text in artifacts.items():
                    if text is None:
                        remove(folder / rel)  # its bytes are in the backup: a move, not a deletion
                    else:
                        write(folder / rel, text)
                problems = [p for p in validate_session(folder, repo) if p not in known]
            except (OSError, InfrastructureError) as exc:  # fsio names a full or read-only disk
                _roll_back(folder, backup, manifest)
                why = exc.message if isinstance(exc, InfrastructureError) else str(exc)  # not its hint: ours says
                raise InfrastructureError(f"writing the replan failed ({why}); the backup was restored, "
                                          "nothing changed", hint=f"backup kept at {backup}; free some space "
                                                                  "there (or make it writable), then run the replan "
                                                                  "again") from exc
            except BaseException:  # Ctrl-C or a bug half-way: never leave a half-applied plan
                _roll_back(folder, backup, manifest)
                raise
            if problems:
                _roll_back(folder, backup, manifest)
                raise ReplanRolledBackError(
                    "validation failed after applying the replan; the backup was restored, nothing changed: "
                    + "; ".join(problems), hint=f"backup kept at {backup}")
            clear_pending(folder)
    except Timeout:
        raise SessionBusyError(f"another replan of {snap.session.session_id} holds its lock",
                               hint=f"wait for it, or delete {folder / PROCESS_DIR / 'replan.lock'} "
                               "if none is running") from None


def _roll_back(folder: Path, backup: Path, manifest: Manifest) -> None:
    """Put the backup back; a roll-back the disk refuses too (fsio says so as an InfrastructureError) leaves the
    session half-written, and says so: its pending mark lets the restore it names undo it."""
    try:
        restore_files(folder, backup, manifest)
    except (OSError, InfrastructureError) as exc:
        why = exc.message if isinstance(exc, InfrastructureError) else str(exc)
        raise InfrastructureError(f"the replan failed half-way and rolling it back failed too ({why}): the session "
                                  "is partly written", hint=f"once the disk takes writes again, undo it: "
                                                            f"{restore_command(backup, manifest.session_id)}") from exc
