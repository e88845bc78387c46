"""Whether a workflow session left partial by failed angles may be planned again by its resume
(wfqueue.workflow_session.failed_angles): only while nobody changed its tasks."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.wfs_factory import make_session, task
from wfqueue.workflow_session.failed_angles import why_not_planned_again
from wfqueue.workflow_session.session import load_session, now_iso, save_session, task_files


def generated_now(folder: Path) -> None:
    session = load_session(folder)
    session.phases_done_at["tasks"] = now_iso()
    save_session(folder, session)


def test_a_session_nobody_changed_may_be_planned_again(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    generated_now(folder)
    assert why_not_planned_again(folder, load_session(folder)) is None


def test_a_task_file_edited_by_hand_keeps_the_session_as_it_is(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    generated_now(folder)
    edited = task_files(folder)[0]
    later = time.time() + 60
    os.utime(edited, (later, later))
    assert why_not_planned_again(folder, load_session(folder)) == "its task files were edited since they were generated"


def test_a_replanned_or_executed_session_is_kept_as_it_is(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    generated_now(folder)
    session = load_session(folder)
    session.status = "completed"
    assert why_not_planned_again(folder, session) == "it is completed"
    (folder / ".process" / "backup" / "replan-1").mkdir(parents=True)
    assert why_not_planned_again(folder, load_session(folder)) == "it was replanned since"
