"""Beat's schedule file is a shelve, whose pickles run code when opened: its default folder, in the shared temp
dir, is used only when it is the user's own and private; a folder that cannot hold it is refused before beat (or
`wfqueue up`) starts anything, with exit 2 and what to do."""

from __future__ import annotations

import hashlib
import os
import pickle
import shelve
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, wfqueue_env

from wfqueue.celery_app import broker_url
from wfqueue.settings import load_settings

pytestmark = pytest.mark.integration

BROKER = "redis://127.0.0.1:1/0"  # never reached: everything here is refused before beat connects


class Planted:
    """What another user's schedule file could hold: opening it runs a command."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.mark}",)


def plant(folder: Path, mark: Path) -> None:
    """A schedule file for BROKER, where beat would open it, that runs ``touch mark`` when read."""
    digest = hashlib.sha1(broker_url(load_settings(broker_url=BROKER)).encode("utf-8")).hexdigest()[:12]
    with shelve.open(str(folder / f"celerybeat-schedule-{digest}"), protocol=pickle.HIGHEST_PROTOCOL) as db:
        db["entries"] = Planted(mark)
        db["__version__"] = "planted"


def planted_default_folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A temp dir, beat's default folder in it holding a planted schedule file, and the file that file's code
    would make."""
    temp = tmp_path / "tmp"
    folder = temp / f"wfqueue-beat-{os.getuid()}"
    folder.mkdir(parents=True)
    mark = tmp_path / "planted-code-ran"
    plant(folder, mark)
    return temp, folder, mark


def beat_both_ways(env: dict[str, str]) -> list[tuple[int, str]]:
    """`wfqueue beat`, then beat started as Celery's own command: each one's exit code and stderr."""
    wfqueue = run_cli("beat", env=env, timeout=60)
    celery = subprocess.run([sys.executable, "-m", "celery", "-A", "beat.app", "beat"], env=env, capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    return [(wfqueue.code, wfqueue.stderr), (celery.returncode, celery.stderr)]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="gives a folder to another user")
def test_a_schedule_folder_another_user_made_first_is_refused_and_nothing_in_it_is_opened(tmp_path: Path) -> None:
    temp, folder, mark = planted_default_folder(tmp_path)
    os.chown(folder, 65534, 65534)
    os.chmod(folder, 0o700)

    for code, stderr in beat_both_ways(wfqueue_env(TMPDIR=str(temp), WFQUEUE_BROKER_URL=BROKER)):
        assert code == 2, stderr
        assert f"beat's schedule folder {folder} belongs to another user (uid 65534)" in stderr, stderr
        assert "Traceback" not in stderr and "WFQUEUE_BEAT_SCHEDULE_FILE" in stderr
    assert not mark.exists(), "the planted schedule file was opened"


def test_a_schedule_folder_other_users_may_write_is_refused(tmp_path: Path) -> None:
    temp, folder, mark = planted_default_folder(tmp_path)
    os.chmod(folder, 0o777)

    for code, stderr in beat_both_ways(wfqueue_env(TMPDIR=str(temp), WFQUEUE_BROKER_URL=BROKER)):
        assert code == 2, stderr
        assert "may be written by other users (mode 777)" in stderr, stderr
    assert not mark.exists(), "the planted schedule file was opened"


def test_a_schedule_file_setting_beat_cannot_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("", encoding="utf-8")
    unusable = str(a_file / "schedule")  # its folder would be inside a file
    for code, stderr in beat_both_ways(wfqueue_env(WFQUEUE_BROKER_URL=BROKER, WFQUEUE_BEAT_SCHEDULE_FILE=unusable)):
        assert code == 2, stderr
        assert f"WFQUEUE_BEAT_SCHEDULE_FILE is {unusable}, whose folder cannot be made" in stderr, stderr
        assert "Traceback" not in stderr

    repo = tmp_path / "repo"
    repo.mkdir()
    up = run_cli("up", "--repo", str(repo), env=wfqueue_env(WFQUEUE_BEAT_SCHEDULE_FILE=unusable,
                                                            WFQUEUE_FLOWER_BASIC_AUTH="admin:secret"), timeout=60)
    assert up.code == 2, up.stderr
    assert "whose folder cannot be made" in up.stderr
    assert not (repo / ".workflow").exists(), "up started something before refusing"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="gives a file to another user")
def test_a_chosen_schedule_file_another_user_planted_in_a_shared_folder_is_refused(tmp_path: Path) -> None:
    """WFQUEUE_BEAT_SCHEDULE_FILE=/tmp/celerybeat-schedule: the check covered the default folder only."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    os.chmod(shared, 0o1777)  # as /tmp: sticky, everyone writes
    mark = tmp_path / "planted-code-ran"
    with shelve.open(str(shared / "celerybeat-schedule"), protocol=pickle.HIGHEST_PROTOCOL) as db:
        db["entries"] = Planted(mark)
    for made in shared.iterdir():
        os.chown(made, 65534, 65534)
    env = wfqueue_env(WFQUEUE_BROKER_URL=BROKER, WFQUEUE_BEAT_SCHEDULE_FILE=str(shared / "celerybeat-schedule"))
    for code, stderr in beat_both_ways(env):
        assert code == 2, stderr
        assert "the file belongs to another user (uid 65534)" in stderr, stderr
    assert not mark.exists(), "the planted schedule file was opened"

    os.chmod(shared, 0o777)  # no sticky bit: another user could replace a file of this user's there
    code, stderr = beat_both_ways(wfqueue_env(WFQUEUE_BROKER_URL=BROKER,
                                              WFQUEUE_BEAT_SCHEDULE_FILE=str(shared / "mine")))[0]
    assert code == 2 and "its folder may be written by other users" in stderr, stderr
