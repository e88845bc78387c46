"""Replan backups: ``.process/backup/replan-{UTC timestamp}/`` and putting one back.

A backup holds the exact bytes of every session file a replan is about to change
or delete (flat, by file name, as in the seed's layout) and ``MANIFEST.md``,
written last, so a folder with a manifest is a complete backup. The manifest
also lists the files the replan *creates*: restoring removes them, which is
what makes a restore give back the session byte for byte.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
from datetime import datetime
from pathlib import Path

from filelock import Timeout
from pydantic import BaseModel, Field

from wfqueue.errors import BadInputError, NotABackupError, SessionBusyError
from wfqueue.fsio import atomic_write_bytes, atomic_write_text, remove
from wfqueue.workflow_session.session import PROCESS_DIR, SESSION_FILE, changes_locked, load_session

BACKUP_DIR = "backup"
MANIFEST = "MANIFEST.md"
# Only session files a replan writes may be restored: a hand-edited manifest cannot
# make a restore write anywhere else.
RESTORABLE = re.compile(r"^(?:workflow-session\.json|plan\.json|IMPL_PLAN\.md|TODO_LIST\.md"
                        r"|\.task/IMPL-\d+(?:\.\d+)?\.json)$")


class Manifest(BaseModel):
    session_id: str
    timestamp: str
    reason: str
    scope: str
    mode: str
    files: list[str] = Field(default_factory=list, description="backed up: restored by --restore")
    deleted: list[str] = Field(default_factory=list, description="subset of files the replan deleted")
    created: list[str] = Field(default_factory=list, description="created by the replan: removed by --restore")
    digests: dict[str, str] = Field(default_factory=dict, description="sha256 of each backed-up file, as made")
    # The backup folder's name as made (replan-2026-11-27T19-29-57-2): a copy kept elsewhere is known by it, where
    # two replans of the same second share timestamp, reason and scope. Empty in a manifest written before it.
    backup: str = ""
    # sha256 of each file as the replan writes it: a restore keeps a copy of any changed since (an edit by hand).
    written: dict[str, str] = Field(default_factory=dict)


def backup_root(folder: Path) -> Path:
    return folder / PROCESS_DIR / BACKUP_DIR


# In .process/: the backup of a replan whose writes began and did not end (killed half-way, or a roll-back the disk
# refused). The session's history is written last, so it does not know that replan: its backup is restorable by
# this mark alone, and no other replan starts on the half-written plan.
PENDING = "replan.pending"


def pending_backup(folder: Path) -> Path | None:
    """The backup a half-written replan left, or None: no mark, one whose backup is gone, or one whose replan
    wrote everything, its record last (killed before it cleared the mark: the history names it, and the usual
    restore of the last replan undoes it)."""
    pending = _pending(folder)
    return pending[0] if pending else None


def _pending(folder: Path) -> tuple[Path, bool] | None:
    """:func:`pending_backup`, and whether a restore (not a replan) left it."""
    try:
        rel = (folder / PROCESS_DIR / PENDING).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    restoring = rel.startswith(_RESTORING)
    backup = folder / rel.removeprefix(_RESTORING)
    if not rel or not (backup / MANIFEST).is_file():
        return None
    if restoring:  # a restore writes the record last: until then the history names the replan it undoes
        return backup, True
    try:
        history = load_session(folder).replan_history
    except (OSError, ValueError):  # a record that does not read: the mark is all there is to go by
        return backup, False
    return None if history and (folder / history[-1].backup).resolve() == backup.resolve() else (backup, False)


_RESTORING = "restoring "  # the mark's prefix while a restore, not a replan, writes


def refuse_half_written(folder: Path, then: str, *, lock_timeout_s: float | None = None) -> None:
    """Refuse (exit 2) to read a session whose replan or restore stopped half-way: its plan is neither the one
    before nor the one after (verifying or executing it would judge or run a plan nobody made). ``then``: what
    the user does once it is undone.

    ``lock_timeout_s``: the caller does not hold the session's change lock. A replan writing right now has its mark
    set too, and holds the lock: the mark is looked at again once the lock is free (waiting that long at most).
    Read without it, a replan still writing was called "stopped half-way", with the advice to undo it."""
    half = pending_backup(folder)
    if half is not None and lock_timeout_s is not None:
        try:
            with changes_locked(folder, lock_timeout_s):
                half = pending_backup(folder)
        except Timeout:
            raise SessionBusyError(f"a replan of {folder.name} holds its lock", hint=f"wait for it to finish, then "
                                                                                     f"{then}") from None
    said = half_written(folder) if half is not None else None
    if said is not None:
        message, hint = said
        raise BadInputError(f"{message}; nothing was changed", hint=f"{hint}, then {then}")


# The status `wfqueue status` and `sessions` give a session whose replan or restore stopped half-way.
HALF_WRITTEN = "half-written"


def half_written_now(folder: Path) -> tuple[str, str] | None:
    """:func:`half_written` for a reader that waits for no one (``status``, ``sessions``): a replan writing right now
    holds the session's lock and has its mark set too; it is not called stopped half-way, nor its undoing advised."""
    if pending_backup(folder) is None:
        return None
    try:
        with changes_locked(folder, 0):
            return half_written(folder)
    except Timeout:
        return None
    except OSError:  # a session it may not write its lock file in (read-only): the mark alone says it
        return half_written(folder)


def half_written(folder: Path) -> tuple[str, str] | None:
    """What a session whose replan or restore stopped half-way is, and what mends it, as (message, hint); None
    when none did. ``status`` and ``validate`` say it; the commands that would read the plan refuse with it."""
    pending = _pending(folder)
    if pending is None:
        return None
    half, restoring = pending
    command = restore_command(half, folder.name)
    if restoring:  # the same restore, run again, finishes it
        return (f"the restore of {half.name} in {folder.name} stopped half-way: its files are partly written",
                f"run it again ({command})")
    return (f"the replan {half.name} of {folder.name} stopped half-way: its files are partly written",
            f"undo it first ({command})")


def mark_pending(folder: Path, backup: Path, *, restoring: bool = False) -> None:
    """Mark ``backup`` (the session's own, or a copy kept elsewhere a restore reads) as the one to restore."""
    try:
        named = backup.resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:  # a copy outside the session: by its absolute path
        named = str(backup.resolve())
    atomic_write_text(folder / PROCESS_DIR / PENDING, (_RESTORING if restoring else "") + named + "\n")


def clear_pending(folder: Path) -> None:
    remove(folder / PROCESS_DIR / PENDING, missing_ok=True)


def new_backup_dir(folder: Path, now: datetime) -> Path:
    """``replan-2026-11-22T08-00-00``; ``-2``, ``-3``... when two replans share a second."""
    base = backup_root(folder) / f"replan-{now.strftime('%Y-%m-%dT%H-%M-%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def restore_command(backup: Path, session_id: str) -> str:
    return f"wfqueue replan --restore {shlex.quote(str(backup))} --session {session_id}"


def _one(text: str) -> str:
    return " ".join(text.split())


def render_manifest(manifest: Manifest, backup: Path) -> str:
    lines = ["# Replan Backup Manifest", "", f"**Session**: {manifest.session_id}",
             f"**Timestamp**: {manifest.timestamp}", f"**Reason**: {_one(manifest.reason)}",
             f"**Scope**: {manifest.scope}", f"**Mode**: {manifest.mode}", f"**Backup**: {backup.name}", "",
             "## Files", ""]
    lines += [f"- `{rel}`" + (" (deleted by this replan)" if rel in manifest.deleted else "")
              + (f" sha256 {manifest.digests[rel]}" if rel in manifest.digests else "") for rel in manifest.files]
    lines += ["", "## Created by this replan", ""]
    lines += [f"- `{rel}`" for rel in manifest.created] or ["- (none)"]
    if manifest.written:
        lines += ["", "## Written by this replan", ""]
        lines += [f"- `{rel}` sha256 {digest}" for rel, digest in manifest.written.items()]
    lines += ["", "## Restoration Command", "", "```", restore_command(backup, manifest.session_id), "```", ""]
    return "\n".join(lines)


def parse_manifest(text: str) -> Manifest:
    """Inverse of :func:`render_manifest`; raises NotABackupError for anything else."""
    fields = dict(re.findall(r"^\*\*(\w+)\*\*: (.*)$", text, re.M))
    sections: dict[str, list[tuple[str, bool]]] = {}
    digests: dict[str, str] = {}
    after: dict[str, str] = {}
    current, line_section = None, ""
    for line in text.splitlines():
        if line.startswith("## "):
            line_section = line[3:].strip()
            current = sections.setdefault(line_section, [])
        elif current is not None and (item := re.match(
                r"^- `([^`]+)`( \(deleted by this replan\))?(?: sha256 ([0-9a-f]{64}))?$", line)):
            current.append((item.group(1), bool(item.group(2))))
            if item.group(3):  # a manifest written before digests has none: its files are taken as they are
                (after if line_section == "Written by this replan" else digests)[item.group(1)] = item.group(3)
    missing = [k for k in ("Session", "Timestamp", "Scope") if k not in fields]
    if missing or "Files" not in sections:
        raise NotABackupError(f"{MANIFEST} is not a replan manifest (missing {', '.join(missing) or 'Files'})")
    files = [rel for rel, _ in sections["Files"]]
    created = [rel for rel, _ in sections.get("Created by this replan", [])]
    written = [rel for rel, _ in sections.get("Written by this replan", [])]
    unsafe = [rel for rel in [*files, *created, *written] if not RESTORABLE.match(rel)]
    if unsafe:
        raise NotABackupError(f"{MANIFEST} names files a replan never writes: {', '.join(unsafe)}")
    return Manifest(session_id=fields["Session"].strip(), timestamp=fields["Timestamp"].strip(),
                    reason=fields.get("Reason", ""), scope=fields["Scope"].strip(), mode=fields.get("Mode", ""),
                    files=files, deleted=[rel for rel, gone in sections["Files"] if gone], created=created,
                    digests=digests, backup=fields.get("Backup", "").strip(),
                    written={rel: after[rel] for rel in written if rel in after})


def write_backup(folder: Path, backup: Path, manifest: Manifest) -> None:
    """Copy every file of the manifest into ``backup``; the manifest goes in last. Through fsio: a full disk is
    an error that says so (exit 3), and a backup that could not be finished is removed, not left half made."""
    backup.mkdir(parents=True, exist_ok=False)
    try:
        digests = {}
        for rel in manifest.files:
            data = (folder / rel).read_bytes()
            atomic_write_bytes(backup / Path(rel).name, data)
            digests[rel] = hashlib.sha256(data).hexdigest()
        atomic_write_text(backup / MANIFEST, render_manifest(manifest.model_copy(update={"digests": digests}), backup))
    except BaseException:
        shutil.rmtree(backup, ignore_errors=True)
        raise


def _session_keeping(backup: Path) -> Path | None:
    """The session folder whose backup folder holds ``backup`` (``SESSION/.process/backup/NAME``), or None."""
    resolved = backup.resolve()
    parent = resolved.parent
    if parent.name == BACKUP_DIR and parent.parent.name == PROCESS_DIR:
        return parent.parent.parent
    return None


def read_backup(folder: Path, backup: Path) -> Manifest:
    """The manifest of a complete backup of this session folder, or NotABackupError (exit 2)."""
    session_id = folder.name
    kept_in = _session_keeping(backup)
    if kept_in is not None and kept_in != folder.resolve():  # a copied folder's backups are copies: not this one's
        raise NotABackupError(f"{backup} is kept in the session {kept_in.name}, not in {session_id}",
                              hint=f"restore it there: --session {kept_in.name}")
    if not (backup / MANIFEST).is_file():
        raise NotABackupError(f"{backup} is not a replan backup of {session_id} (no {MANIFEST})",
                              hint=f"backups of {session_id} are under {backup_root(folder)}")
    try:
        manifest = parse_manifest((backup / MANIFEST).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:  # edited by hand, or damaged: not a manifest this version wrote
        raise NotABackupError(f"{backup / MANIFEST} is not UTF-8 text ({exc})", hint="nothing was restored") from None
    if manifest.session_id != session_id and kept_in != folder.resolve():  # kept here: the folder was renamed
        raise NotABackupError(f"{backup} is a backup of {manifest.session_id}, not of {session_id}",
                              hint=f"pass --session {manifest.session_id}")
    absent = [rel for rel in manifest.files if not (backup / Path(rel).name).is_file()]
    if absent:
        raise NotABackupError(f"{backup} is incomplete: {', '.join(absent)} missing", hint="nothing was restored")
    # A file changed since (an edit, a damaged disk) was restored as it was: the session then did not read, and
    # with the replan undone no backup was left to restore.
    changed = [rel for rel, digest in manifest.digests.items()
               if hashlib.sha256((backup / Path(rel).name).read_bytes()).hexdigest() != digest]
    if changed:
        raise NotABackupError(f"{backup}: {', '.join(Path(rel).name for rel in changed)} changed since the backup "
                              "was made; nothing was restored",
                              hint="put the backup's files back as they were, or change the plan with "
                                   "`wfqueue replan`")
    return manifest


def keep_replaced(folder: Path, backup: Path, manifest: Manifest, now: datetime) -> Path | None:
    """Copy what a restore is about to replace or remove that differs from what the replan wrote: an edit made
    since, by hand (a restore put the backup back over a criterion added to a task, and the edit was gone). Kept
    under the session's backups, by path; None when nothing would be lost."""
    def changed_since(rel: str, current: bytes) -> bool:
        if rel in manifest.written:  # as the replan wrote it, or edited since
            return hashlib.sha256(current).hexdigest() != manifest.written[rel]
        # A manifest written before it recorded what it wrote: all the restore replaces that the backup lacks.
        return rel in manifest.created or current != (backup / Path(rel).name).read_bytes()

    # Not the session's record: wfqueue's own, rewritten since by the commands that ran on (verify, execute).
    present = {rel: (folder / rel).read_bytes() for rel in [*manifest.created, *manifest.files] if rel != SESSION_FILE
               and (folder / rel).is_file() and (rel in manifest.created or (backup / Path(rel).name).is_file())}
    replaced = {rel: data for rel, data in present.items() if changed_since(rel, data)}
    if not replaced:
        return None
    kept = backup_root(folder) / f"replaced-by-restore-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{backup.name}"
    for rel, data in replaced.items():
        atomic_write_bytes(kept / rel, data)
    return kept


def restore_files(folder: Path, backup: Path, manifest: Manifest) -> tuple[list[str], list[str]]:
    """Remove the files the replan created and put every backed-up file back, the session's record last: it
    holds the history that says which replan a backup undoes, so a restore stopped half-way (a full disk) can be
    run again. Put back first, the record forgot the replan while its new task files were still there. Done, the
    session is whole again: a pending mark (of the replan undone, or of this restore) goes."""
    removed = []
    for rel in manifest.created:
        if (folder / rel).exists():
            remove(folder / rel)
            removed.append(rel)
    for rel in sorted(manifest.files, key=lambda rel: rel == SESSION_FILE):
        atomic_write_bytes(folder / rel, (backup / Path(rel).name).read_bytes())
    clear_pending(folder)
    return list(manifest.files), removed
