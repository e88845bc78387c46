"""Where workflow sessions live and how they are found, read and written.

``{repo}/.workflow/active/WFS-{slug}/`` holds one session; ``archives/`` the
archived ones. Session ids from the command line are checked before any file is
touched; a missing session or task is reported with the list of what exists.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock
from pydantic import ValidationError

from wfqueue.errors import BadInputError, SessionNotFoundError
from wfqueue.fsio import atomic_write_json, lock_for
from wfqueue.sessions import WORKFLOW_DIR, check_session_id, linked_folder, record_lost, repo_option
from wfqueue.tasks_file import field_path
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.models import WorkflowSession

ACTIVE_DIR = "active"
SESSION_FILE = "workflow-session.json"
TASK_DIR = ".task"
PROCESS_DIR = ".process"
NOTES_FILE = "planning-notes.md"
IMPL_PLAN_FILE = "IMPL_PLAN.md"
TODO_FILE = "TODO_LIST.md"
PLAN_FILE = "plan.json"
EXPLORATIONS_MANIFEST = "explorations-manifest.json"  # in PROCESS_DIR
TASK_FILE = re.compile(r"^IMPL-\d+(?:\.\d+)?\.json$")  # a task's file, named by its id


def changes_locked(folder: Path, timeout_s: float) -> FileLock:
    """The lock a replan or a restore holds while it changes the session's files, and a verify while it reads
    them: a verify reading half of a replan's writes reported findings of a plan that never was."""
    return lock_for(folder / PROCESS_DIR / "replan", timeout_s)


def still_planned_hint(session_id: str, repo: Path, then: str) -> str:
    """What to do with a session whose tasks phase has not finished before ``then`` (replan, verify or execute
    it): its command may still run, waiting for an answer, and would refuse a resume meanwhile."""
    return ("let the command planning it finish (it may be waiting for an answer), or if it stopped, finish it with "
            f"`wfqueue resume {session_id}{repo_option(repo)}`; then {then}")


def active_root(repo: Path) -> Path:
    return repo / WORKFLOW_DIR / ACTIVE_DIR


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def list_sessions(repo: Path) -> list[WorkflowSession]:
    root = active_root(repo)
    sessions = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if (folder / SESSION_FILE).is_file() and not folder.is_symlink():  # see wfqueue.sessions.linked_folder
            try:
                sessions.append(load_session(folder))
            except (OSError, ValueError):
                continue  # a damaged session is listed by `wfqueue sessions`, not used implicitly
    return sessions


def find_session(repo: Path, session_id: str | None) -> Path:
    """The folder of ``session_id``, or of the active session when it is None."""
    root = active_root(repo)
    existing = sorted(p.name for p in root.iterdir()
                      if (p / SESSION_FILE).is_file() and not p.is_symlink()) if root.is_dir() else []
    listing = ", ".join(existing) or "none"
    if session_id is None:
        readable = list_sessions(repo)
        candidates = [s for s in readable if s.status != "archived"]
        damaged = sorted(set(existing) - {s.session_id for s in readable})
        if not candidates:
            if damaged:  # a session is there, but its workflow-session.json cannot be read
                raise SessionNotFoundError(
                    f"no usable workflow session under {root}: {SESSION_FILE} cannot be read in "
                    f"{', '.join(damaged)}",
                    hint="fix that file (`wfqueue sessions` lists every session and its state)")
            raise SessionNotFoundError(f"no workflow session under {root}",
                                       hint='create one with `wfqueue plan "..."`')
        # The newest session not carried out yet; one execute completed only when every session is, however
        # recently its execution wrote to it.
        chosen = max(candidates, key=lambda s: (s.status != "completed", s.updated_at or s.created_at,
                                                s.session_id))
        return root / chosen.session_id
    check_session_id(session_id)
    if (linked := linked_folder(root / session_id)) is not None:
        raise linked
    folder = (root / session_id).resolve()
    if folder.parent != root.resolve() or not (folder / SESSION_FILE).is_file():
        elsewhere = [p for p in sorted((repo / WORKFLOW_DIR).glob(f"*/{session_id}")) if p.parent != root]
        if elsewhere:  # a lite plan, a collaborative plan or an execution of that name
            raise SessionNotFoundError(
                f"{session_id} is not a workflow session: it is in {elsewhere[0].parent}",
                hint=f"this command works on workflow sessions ({listing}); `wfqueue validate {elsewhere[0]}` checks "
                     f"the tasks of any plan, `wfqueue status {session_id}` shows it")
        if folder.parent == root.resolve() and folder.is_dir():  # the session's folder, without its record
            raise record_lost(folder, SESSION_FILE)
        raise SessionNotFoundError(f"session {session_id} not found under {root}",
                                   hint=f"available sessions: {listing}")
    return folder


def load_session(folder: Path) -> WorkflowSession:
    """The session record of ``folder``. The folder names the session: a copied or renamed folder is a session of
    its own (its record says so at its next write), never the one it was copied from."""
    session = WorkflowSession.model_validate_json((folder / SESSION_FILE).read_text(encoding="utf-8"))
    if session.session_id != folder.name:
        session = session.model_copy(update={"session_id": folder.name})
    return session


def save_session(folder: Path, session: WorkflowSession) -> None:
    session = session.model_copy(update={"updated_at": now_iso()})
    atomic_write_json(folder / SESSION_FILE, session.model_dump(mode="json", exclude_none=True))


def task_number(task_id: str) -> tuple[int, ...]:
    """IMPL-2 < IMPL-2.1 < IMPL-10 (numeric, not alphabetical)."""
    return tuple(int(part) for part in task_id.split("-", 1)[1].split("."))


def task_files(folder: Path) -> list[Path]:
    """``.task/IMPL-N.json`` / ``IMPL-N.M.json`` in id order. Other files there (``IMPL-1 copy.json`` left by a
    file manager) are not tasks of the plan: never counted, read, sorted or removed as one."""
    paths = [p for p in (folder / TASK_DIR).glob("IMPL-*.json") if TASK_FILE.match(p.name)]
    return sorted(paths, key=lambda p: task_number(p.stem))


def check_layout(folder: Path) -> None:
    """Refuse a session whose folders are files, or files folders (nothing is changed): its phases would fail on
    the workers writing there (".task" a file: the tasks phase failed with FileExistsError, once Redis and the
    workers had started)."""
    expected = [(TASK_DIR, True), (PROCESS_DIR, True), (PLAN_FILE, False), (IMPL_PLAN_FILE, False), (TODO_FILE, False)]
    expected += [(path.relative_to(folder).as_posix(), False) for path in task_files(folder)]
    for name, a_folder in expected:
        path = folder / name
        if (path.exists() or path.is_symlink()) and (path.is_dir() if a_folder else path.is_file()) is False:
            what = "a folder" if a_folder else "a file"
            raise BadInputError(f"{folder.name}: {name} is not {what}, and the session writes {what} there; nothing "
                                "was changed", hint=f"move {path} out of the session (or put back what it was)")


def read_session(folder: Path) -> WorkflowSession:
    """``load_session`` for a command: a damaged record is bad input naming the file (exit 2), not a traceback."""
    try:
        return load_session(folder)
    except (OSError, ValueError) as exc:  # pydantic's ValidationError and UnicodeDecodeError are ValueErrors
        kept = (folder / ".process" / "backup").is_dir()  # only a replanned session has backups to go back to
        # Which field, and what is wrong with it ("1 validation error for WorkflowSession" said neither).
        why = (f"{field_path(exc.errors()[0]['loc'])}: {exc.errors()[0]['msg']}" if isinstance(exc, ValidationError)
               and exc.errors() else str(exc).splitlines()[0])
        raise BadInputError(f"{folder / SESSION_FILE} is not a valid session record: {why}",
                            hint=("put it back from a backup (.process/backup/*/workflow-session.json), mend it, "
                                  "or plan again" if kept else "mend it, or plan again")) from None


def load_tasks(folder: Path) -> list[UnifiedTask]:
    """The session's tasks in id order."""
    tasks = [UnifiedTask.model_validate_json(p.read_text(encoding="utf-8")) for p in task_files(folder)]
    return sorted(tasks, key=lambda t: task_number(t.id))


def task_path(folder: Path, task_id: str) -> Path:
    return folder / TASK_DIR / f"{task_id}.json"


def read_json(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def recorded_failed_angles(folder: Path) -> dict[str, str]:
    """The exploration angles the context phase could not explore, as its manifest recorded them ({angle: why});
    empty when it has none or cannot be read."""
    try:
        recorded = json.loads((folder / PROCESS_DIR / EXPLORATIONS_MANIFEST).read_text(encoding="utf-8"))
        return {str(f["angle"]): str(f.get("error", "")) for f in recorded.get("failed_angles") or []}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}
