"""Where beat keeps its schedule file, checked before beat starts.

Celery's schedule file is a ``shelve``: its values are pickles, and opening it runs whatever a pickle says. So
the default folder, in the system temp dir that every user of the machine may write to, is used only when it is
this user's own and nobody else may write to it: a folder another user made first (``mkdir`` with ``exist_ok``
took it as it was) would let them plant a schedule file that runs their code as the next user to start beat.

``wfqueue beat`` and ``wfqueue up`` check it in the command, before anything starts (a bad
``WFQUEUE_BEAT_SCHEDULE_FILE`` ended beat in a traceback, and ``up`` only after its Redis, workers and Flower had
started); beat's own process (``celery -A beat.app beat``) checks it again.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from pathlib import Path

from wfqueue.errors import ConfigError

__all__ = ["default_folder", "schedule_file", "schedule_folder"]

SETTING = "WFQUEUE_BEAT_SCHEDULE_FILE"
_PREFIX = "celerybeat-schedule-"
UNUSED_AFTER_S = 7 * 86_400  # seconds: a default-folder schedule file no beat wrote for a week is forgotten
_DBM_SUFFIXES = (".db", ".dat", ".dir", ".bak", ".pag")


def default_folder() -> Path:
    """The default folder of this user's schedule files, under the system temp dir."""
    return Path(tempfile.gettempdir()) / f"wfqueue-beat-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def schedule_folder(configured: str | None) -> Path:
    """The folder the schedule file goes to, made if missing: the configured file's folder, or the default one,
    which must be private (see the module docstring). Raises ConfigError saying what is wrong and what to do."""
    if configured:
        path = Path(configured).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"{SETTING} is {configured}, whose folder cannot be made: {exc.strerror or exc}",
                              hint=f"set {SETTING} to a file in a folder you can write to") from None
        if path.is_dir():
            raise ConfigError(f"{SETTING} is {configured}, which is a folder",
                              hint=f"set {SETTING} to a file name, such as {path / 'celerybeat-schedule'}")
        fault = _unsafe_place(path)
        if fault is not None:
            raise ConfigError(f"{SETTING} is {configured}: {fault}, so another user could plant a schedule file that "
                              "runs their code when beat opens it",
                              hint=f"set {SETTING} to a file in a folder of your own")
        return path.parent
    folder = default_folder()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
    except OSError as exc:
        raise ConfigError(f"beat's schedule folder {folder} cannot be made: {exc.strerror or exc}",
                          hint=f"set {SETTING} to a file in a folder you can write to") from None
    fault = _not_private(info)
    if fault is not None:
        raise ConfigError(f"beat's schedule folder {folder} {fault}, so another user could plant a schedule file "
                          "that runs their code when beat opens it",
                          hint=f"remove that folder (or have its owner remove it), or set {SETTING} to a file in a "
                               "folder of your own")
    return folder


def schedule_file(configured: str | None, broker_url: str) -> Path:
    """Beat's schedule file for the broker at ``broker_url``: the configured one, or one per broker in the default
    folder, so two brokers never share one."""
    folder = schedule_folder(configured)
    if configured:
        return Path(configured).expanduser()
    forget_unused(folder, time.time())
    return folder / f"{_PREFIX}{hashlib.sha1(broker_url.encode('utf-8')).hexdigest()[:12]}"


def forget_unused(folder: Path, now: float) -> list[Path]:
    """Remove the default folder's schedule files that no beat wrote for UNUSED_AFTER_S: each `wfqueue up` on a TCP
    port has a broker URL of its own (its password is new each time), so they piled up. A running beat writes its
    file at least every few minutes (Celery syncs the schedule then)."""
    removed = []
    for path in folder.glob(f"{_PREFIX}*"):
        try:
            if now - path.stat().st_mtime >= UNUSED_AFTER_S:
                path.unlink()
                removed.append(path)
        except OSError:  # removed meanwhile, or not ours to remove: left
            continue
    return removed


def _unsafe_place(path: Path) -> str | None:
    """What makes a chosen schedule file's place open to another user, or None. Its folder may be shared (/tmp)
    when others cannot replace a file of this user's there (the sticky bit); the file, if it is there, must be this
    user's own and writable by them alone."""
    try:
        folder = os.lstat(path.parent)
        # The shelve's own files: the name itself, or with the suffixes of the dbm module that made it.
        files = [os.lstat(made) for made in (path, *(path.with_name(path.name + suffix) for suffix in _DBM_SUFFIXES))
                 if os.path.lexists(made)]
    except OSError:
        return None  # made below, or refused there with its own reason
    mine = not hasattr(os, "getuid") or folder.st_uid == os.getuid()
    if not mine and folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not folder.st_mode & stat.S_ISVTX:
        return "its folder may be written by other users, who could replace the file"
    for info in files:
        fault = _not_private(info, folder=False)
        if fault is not None:
            return f"the file {fault}"
    return None


def _not_private(info: os.stat_result, *, folder: bool = True) -> str | None:
    """What makes a folder with this ``lstat`` unfit to hold the schedule, or None."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if folder and not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"may be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None
