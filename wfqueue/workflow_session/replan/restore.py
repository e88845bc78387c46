"""`wfqueue replan --restore` and `wfqueue sessions`: a replan undone from its backup, and every session listed."""

from __future__ import annotations

import glob
from datetime import UTC, datetime
from pathlib import Path

from filelock import Timeout
from pydantic import BaseModel

from wfqueue.errors import NotABackupError, ReplanRefusedError, SessionBusyError
from wfqueue.sessions import linked_folder, repo_option
from wfqueue.workflow_session.replan.backup import (
    HALF_WRITTEN,
    Manifest,
    backup_root,
    half_written_now,
    keep_replaced,
    mark_pending,
    pending_backup,
    read_backup,
    restore_command,
    restore_files,
)
from wfqueue.workflow_session.session import (
    SESSION_FILE,
    active_root,
    changes_locked,
    find_session,
    load_session,
    read_session,
    task_files,
)


class RestoreResult(BaseModel):
    session_id: str
    backup: str
    restored: list[str]
    removed: list[str]
    # Where the files the restore replaced or removed are kept (the replan's, with any edit made since); None when
    # it replaced nothing but what the backup holds.
    kept: str | None = None


def _refuse_out_of_order(folder: Path, backup: Path, manifest: Manifest, repo: Path) -> None:
    """Backups undo replans last first: restoring an older one over a later replan would keep that replan's new
    task files beside the older plan.json (a session `verify` blocks). The session's history says which replan
    is the last one still applied: its backup folder, or for a copy kept outside the session what its manifest
    records; once every replan is undone there is none left to restore."""
    history = read_session(folder).replan_history
    if not history:
        raise ReplanRefusedError(
            f"{folder.name} has no replan left to undo: the one {backup.name} was made by is undone already; "
            "nothing was restored", hint="`wfqueue replan` changes the plan again")
    last = history[-1]
    try:
        same = backup.resolve().relative_to(folder.resolve()).as_posix() == last.backup
    except ValueError:  # a copy kept elsewhere: known by the backup folder its manifest names
        if manifest.backup:
            same = manifest.backup == Path(last.backup).name
        else:  # an older manifest: by what it records, which two replans of the same second may share
            # The manifest keeps the reason on one line: a request with a newline or a double space differed.
            same = (manifest.timestamp, manifest.reason, manifest.scope) == (
                last.timestamp, " ".join(last.reason.split()), last.scope)
    if not same and not (folder / last.backup).is_dir():
        raise ReplanRefusedError(
            f"{backup.name} is not the backup of {folder.name}'s last replan, and that one's backup "
            f"({Path(last.backup).name}) is gone: no earlier backup can be restored over it; nothing was restored",
            hint=f"change the plan back with `wfqueue replan`{repo_option(repo)}, or plan the requirement again")
    if not same:
        raise ReplanRefusedError(
            f"{backup.name} is not the backup of {folder.name}'s last replan ({Path(last.backup).name}); nothing was "
            "restored", hint=f"undo the last replan first: {restore_command(folder / last.backup, folder.name)}"
            f"{repo_option(repo)}, then this one")


def restore(repo: Path, backup: Path, session_id: str | None = None, lock_timeout_s: float = 60.0) -> RestoreResult:
    """Put a replan backup back, byte for byte; files the replan created are removed."""
    folder = find_session(repo, session_id)
    backup = backup if backup.is_absolute() else Path.cwd() / backup
    if not backup.is_dir():
        raise NotABackupError(f"{backup}: no such backup folder",
                              hint=f"backups of {folder.name} are under {backup_root(folder)}")
    try:
        # The checks too, under the lock: a replan waiting for it changes the history they read.
        with changes_locked(folder, lock_timeout_s):
            manifest = read_backup(folder, backup)
            pending = pending_backup(folder)
            if pending is None:
                _refuse_out_of_order(folder, backup, manifest, repo)
            elif pending.resolve() != backup.resolve():
                raise ReplanRefusedError(f"the replan {pending.name} of {folder.name} stopped half-way; nothing was "
                                         "restored", hint=f"undo it first: {restore_command(pending, folder.name)}")
            # Not when run again after a stop: the files are then partly the backup's already.
            kept = keep_replaced(folder, backup, manifest, datetime.now(UTC)) if pending is None else None
            mark_pending(folder, backup, restoring=True)  # stopped half-way, it is run again before any replan
            restored, removed = restore_files(folder, backup, manifest)
            if pending is not None:  # killed mid-write: an atomic write's temporary file may be left beside a file
                for rel in {*manifest.files, *manifest.created}:
                    target = folder / rel
                    for stray in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
                        stray.unlink(missing_ok=True)
    except Timeout:
        raise SessionBusyError(f"a replan of {folder.name} holds its lock", hint="wait for it to finish") from None
    return RestoreResult(session_id=folder.name, backup=str(backup), restored=restored, removed=removed,
                         kept=str(kept) if kept else None)


class SessionRow(BaseModel):
    session_id: str
    status: str
    tasks: int
    created_at: str | None = None
    last_replan: str | None = None
    replans: int = 0
    error: str | None = None


def session_rows(repo: Path) -> list[SessionRow]:
    """Every workflow session under ``.workflow/active``, damaged ones included (marked)."""
    root = active_root(repo)
    rows = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if (linked := linked_folder(folder)) is not None:  # listed, as no session of this repository
            rows.append(SessionRow(session_id=folder.name, status="damaged", tasks=0, error=linked.message))
            continue
        count = sum(p.is_file() for p in task_files(folder)) if folder.is_dir() else 0  # as validate counts
        if not (folder / SESSION_FILE).is_file():
            if folder.is_dir() and folder.name.startswith("WFS-"):  # a session that lost its record: not hidden
                rows.append(SessionRow(session_id=folder.name, status="damaged", tasks=count,
                                       error=f"{SESSION_FILE} is missing"))
            continue
        try:
            s = load_session(folder)
        except (OSError, ValueError) as exc:
            rows.append(SessionRow(session_id=folder.name, status="damaged", tasks=count,
                                   error=f"{SESSION_FILE}: {str(exc).splitlines()[0]}"))
            continue
        said = half_written_now(folder)
        rows.append(SessionRow(session_id=s.session_id, status=s.status if said is None else HALF_WRITTEN,
                               tasks=count, created_at=s.created_at, last_replan=s.progress.last_replan,
                               replans=len(s.replan_history), error=f"{said[0]}: {said[1]}" if said else None))
    return rows
