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


def test_a_task_file_removed_or_a_plan_file_edited_keeps_the_session_as_it_is(tmp_path: Path) -> None:
    """Planning again brought a task the user had removed back, and replaced their IMPL_PLAN.md."""
    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"]),
                                                          task(2, "Limit", ["src/limit.py"])])
    session = load_session(folder)
    session.progress.current_tasks = ["IMPL-1", "IMPL-2"]
    save_session(folder, session)
    generated_now(folder)
    task_files(folder)[1].unlink()
    assert why_not_planned_again(folder, load_session(folder)) == (
        "a task file was added or removed since the tasks were generated")

    folder = make_session(tmp_path, "Add caching", [task(1, "Cache", ["src/cache.py"])], session_id="WFS-other")
    session = load_session(folder)
    session.progress.current_tasks = ["IMPL-1"]
    save_session(folder, session)
    generated_now(folder)
    later = time.time() + 60
    os.utime(folder / "IMPL_PLAN.md", (later, later))
    assert why_not_planned_again(folder, load_session(folder)) == "its task files were edited since they were generated"
