"""Purge, stale locks, archive: the slow maintenance passes.

Each pass gathers facts (Redis, file times), asks beat.timing, and acts in a
way that is harmless to repeat: deleting what is gone already is ignored, a
session's keys are deleted under a ``SET NX EX`` guard, an archive move is a
rename that only one caller can win, and the manifest is rewritten under its
file lock with at most one entry per session.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from filelock import FileLock, Timeout

from beat.names import GUARD_PREFIX
from beat.snapshot import guard, iso_to_ts, iter_metas, last_activity
from beat.timing import (
    is_finished,
    is_stale_lock,
    remaining_ttl,
    should_archive,
    should_purge_file,
    should_purge_session,
)
from wfqueue.coordinator_lease import live_holder
from wfqueue.fsio import locked_update
from wfqueue.redis_owner import owned_now
from wfqueue.sessions import WORKFLOW_DIR, queue_dir
from wfqueue.settings import Settings
from wfqueue.workflow_session.session import SESSION_FILE, active_root, load_session, save_session

log = logging.getLogger("wfqueue.beat")

ARCHIVES_DIR = "archives"
MANIFEST_FILE = "manifest.json"
GUARD_TTL_S = 300  # long enough to cover one pass; short enough that a failed action is retried next time


def _path_key(task: str, path: Path, action: str) -> str:
    return f"{GUARD_PREFIX}{task}:{hashlib.sha1(str(path).encode('utf-8')).hexdigest()}:{action}"


def _now_iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds")


# -- purge -------------------------------------------------------------------------------------


def purge_redis(client: redis.Redis, settings: Settings, now: float) -> dict[str, Any]:
    """Delete the keys of finished sessions idle past ``state_ttl_s``; give TTL-less keys of the others a TTL.

    Keys normally expire on their own; this catches keys that lost their TTL
    (written by hand, by an older version, or persisted without expiry)."""
    deleted: list[str] = []
    expired = 0
    for state, meta in iter_metas(client, settings.state_ttl_s):
        status = meta.get("status")
        if not is_finished(status) or live_holder(state) is not None:
            # Running or stalled sessions are the watchdog's business; a finished one a command drives again (a
            # resume, `execute --continue`) is in use, however long ago its agents last started.
            continue
        last = last_activity(state)
        if should_purge_session(status, last, now, settings.state_ttl_s):
            if guard(client, f"{GUARD_PREFIX}purge:{state.session_id}:delete", GUARD_TTL_S):
                state.reset()
                deleted.append(state.session_id)
            continue
        ttl = remaining_ttl(last, now, settings.state_ttl_s)
        for key in client.scan_iter(match=state.prefix + "*", count=500):
            if client.ttl(key) == -1:  # -1: no expiry (-2: gone meanwhile)
                client.expire(key, ttl)
                expired += 1
    if deleted:
        log.info("purge: deleted the Redis keys of %d finished session(s): %s", len(deleted), ", ".join(deleted))
    return {"deleted_sessions": deleted, "keys_given_ttl": expired}


def embedded_logs(repo: Path) -> list[Path]:
    """Logs of embedded mode (``.workflow/.queue/*.log``, and Redis's own under ``redis/``)."""
    root = queue_dir(repo)
    return [p for p in [*root.glob("*.log"), *(root / "redis").glob("*.log")] if p.is_file() and not p.is_symlink()]


def purge_files(repos: list[Path], settings: Settings, now: float) -> list[str]:
    removed = []
    for repo in repos:
        if owned_now(queue_dir(repo) / "redis"):
            continue  # a plan or `wfqueue up` runs there: its processes write to these logs now
        for path in embedded_logs(repo):
            try:
                if should_purge_file(path.stat().st_mtime, now, settings.embedded_data_max_age_days):
                    path.unlink()
                    removed.append(str(path))
            except FileNotFoundError:
                continue  # removed by another pass meanwhile
    if removed:
        log.info("purge: removed %d embedded log(s) older than %d days", len(removed),
                 settings.embedded_data_max_age_days)
    return removed


# -- stale locks ---------------------------------------------------------------------------------


def lock_files(repo: Path) -> list[Path]:
    """The session folders' lock files (filelock's). Not those under ``.workflow/.queue/``: the embedded Redis's
    owner lock there is a plain flock, held for as long as its command runs and never touched meanwhile, so it
    always looks stale; unlinked while held, the next command would lock a new file and a second owner would
    stop the first one's Redis."""
    root, runtime = repo / WORKFLOW_DIR, queue_dir(repo)
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*.lock")
                  if p.is_file() and not p.is_symlink() and not p.is_relative_to(runtime))


def remove_stale_locks(client: redis.Redis, repos: list[Path], settings: Settings, now: float) -> dict[str, Any]:
    """Remove ``*.lock`` files under ``.workflow/`` older than ``stale_lock_age_s`` that nobody holds.

    Held is tested with a non-blocking flock. The file is unlinked while we hold
    it: filelock notices an unlinked inode (st_nlink 0) after winning its flock
    and starts over on a fresh file, so a writer arriving meanwhile is not split
    from the next one."""
    removed, held = [], []
    for repo in repos:
        for path in lock_files(repo):
            try:
                before = path.stat()
            except FileNotFoundError:
                continue
            if not is_stale_lock(before.st_mtime, now, settings.stale_lock_age_s):
                continue
            if not guard(client, _path_key("locks", path, "remove"), GUARD_TTL_S):
                continue
            lock = FileLock(str(path), timeout=0)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                held.append(str(path))
                continue
            try:
                after = path.stat()
                # Only the file we judged stale: not one recreated between the check and the acquire.
                if (after.st_ino, after.st_mtime) == (before.st_ino, before.st_mtime):
                    path.unlink()
                    removed.append(str(path))
            except FileNotFoundError:
                pass
            finally:
                lock.release()
    if removed:
        log.info("locks: removed %d stale lock file(s)", len(removed))
    return {"removed": removed, "held": held}


# -- archive -------------------------------------------------------------------------------------


def read_manifest(text: str | None) -> dict[str, Any]:
    """``{"archives": [entries]}``; a bare list (hand-made) is accepted and rewritten in that form."""
    if not text or not text.strip():
        return {"archives": []}
    data = json.loads(text)
    if isinstance(data, list):
        return {"archives": data}
    if isinstance(data, dict) and isinstance(data.get("archives", []), list):
        return {**data, "archives": list(data.get("archives", []))}
    raise ValueError("manifest.json is neither a list nor an object with an 'archives' list")


def upsert_manifest(archives: Path, entry: dict[str, Any], timeout_s: float) -> None:
    """Add ``entry`` unless its session is listed already (a repeated pass changes nothing)."""

    def update(current: str | None) -> str:
        manifest = read_manifest(current)
        if any(isinstance(e, dict) and e.get("session_id") == entry["session_id"] for e in manifest["archives"]):
            return current or ""
        manifest["archives"].append(entry)
        return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"

    locked_update(archives / MANIFEST_FILE, update, timeout_s)


def _manifest_ids(archives: Path) -> set[str]:
    try:
        manifest = read_manifest((archives / MANIFEST_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return set()
    return {str(e.get("session_id")) for e in manifest["archives"] if isinstance(e, dict)}


def _settle(repo: Path, folder: Path, status: str, now: float, timeout_s: float) -> None:
    """After the move: the manifest entry, then the session's own status (both repeatable)."""
    archives = folder.parent
    relative = folder.relative_to(repo).as_posix()
    upsert_manifest(archives, {"session_id": folder.name, "archived_at": _now_iso(now), "status": status,
                               "path": relative}, timeout_s)
    session = load_session(folder)
    if session.status != "archived":
        save_session(folder, session.model_copy(update={"status": "archived"}))


def archive_sessions(client: redis.Redis, repos: list[Path], settings: Settings, now: float) -> dict[str, Any]:
    """Move completed workflow sessions idle ``archive_after_days`` to ``.workflow/archives/``."""
    archived, problems = [], []
    for repo in repos:
        archives = repo / WORKFLOW_DIR / ARCHIVES_DIR
        root = active_root(repo)
        for folder in sorted(root.glob("WFS-*")) if root.is_dir() else []:
            if not (folder / SESSION_FILE).is_file() or folder.is_symlink():
                continue
            try:
                session = load_session(folder)
            except (OSError, ValueError) as exc:
                problems.append(f"{folder}: unreadable session ({exc})")
                continue
            finished = iso_to_ts(session.updated_at) or iso_to_ts(session.created_at)
            if not should_archive(session.status, finished, now, settings.archive_after_days):
                continue
            if not guard(client, _path_key("archive", folder, "move"), GUARD_TTL_S):
                continue
            target = archives / folder.name
            if target.exists():
                problems.append(f"{folder}: {target} exists already, left in place")
                continue
            archives.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(folder, target)  # atomic: a second mover gets FileNotFoundError
            except FileNotFoundError:
                continue
            archived.append(folder.name)
        problems += _reconcile(repo, archives, now, settings.lock_timeout_s)
    if archived:
        log.info("archive: archived %d workflow session(s): %s", len(archived), ", ".join(archived))
    for problem in problems:
        log.warning("archive: %s", problem)
    return {"archived": archived, "problems": problems}


def _reconcile(repo: Path, archives: Path, now: float, timeout_s: float) -> list[str]:
    """Finish every archived session: a manifest entry and status ``archived``. Also completes a
    pass that was interrupted between the move and the manifest."""
    if not archives.is_dir():
        return []
    problems = []
    try:
        listed = _manifest_ids(archives)
    except (OSError, ValueError) as exc:
        return [f"{archives / MANIFEST_FILE}: {exc}; not updated"]
    for folder in sorted(archives.glob("WFS-*")):
        if not (folder / SESSION_FILE).is_file() or folder.is_symlink():
            continue
        try:
            session = load_session(folder)
            if folder.name not in listed or session.status != "archived":
                _settle(repo, folder, session.status, now, timeout_s)
        except (OSError, ValueError) as exc:
            problems.append(f"{folder}: {exc}")
    return problems
