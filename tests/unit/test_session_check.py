"""A session's files are read back before a command goes on with it (wfqueue.session_check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write
from wfqueue.errors import BadInputError
from wfqueue.session_check import check_session_files, unreadable_files


def test_every_json_file_the_next_step_reads_must_parse(tmp_path: Path) -> None:
    folder = tmp_path / "CPLAN-x"
    write(folder, {
        "requirement-analysis.json": '{"session_id": "CPLAN-x", "sub_',  # cut short
        "agents/api/plan.json": '{"tasks": []}',
        "tasks.jsonl": '{"id": "TASK-001"}\n\n{"id": "TASK-002"}\n',  # a blank line is no task
        "notes.jsonl": '{"id": 1}\n{"id": 2,\n',
        ".process/backup/replan-1/plan.json": "{",  # a replan's backup: nothing goes on from it
        ".plan.json.tmp": "{",  # a write's hidden temporary file
        "plan.md": "# not JSON, not read",
    })
    found = {str(path.relative_to(folder)): why for path, why in unreadable_files(folder)}
    assert set(found) == {"requirement-analysis.json", "notes.jsonl"}
    assert found["notes.jsonl"].startswith("line 2: ")

    with pytest.raises(BadInputError) as caught:
        check_session_files(folder)
    assert caught.value.message.startswith("CPLAN-x: notes.jsonl is not valid JSON: line 2: ")
    assert "(and 1 more file(s))" in caught.value.message and "nothing was changed" in caught.value.hint


def test_a_session_whose_files_all_read_passes(tmp_path: Path) -> None:
    folder = tmp_path / "WFS-x"
    write(folder, {"workflow-session.json": "{}", ".task/IMPL-1.json": '{"id": "IMPL-1"}',
                   # Written unescaped (ensure_ascii=False): a line separator inside a string is no line's end.
                   "tasks.jsonl": '{"title": "a\u2028b"}\n{"title": "c\u0085d"}\n'})
    (folder / ".task" / "IMPL-2.json").write_bytes(b'\xef\xbb\xbf{"id": "IMPL-2"}')  # saved with a BOM
    check_session_files(folder)


def test_the_hint_names_replan_backups_only_where_a_session_keeps_them(tmp_path: Path) -> None:
    """A collaborative plan has no .process/backup/: the hint sent its user there."""
    collab = tmp_path / "CPLAN-x"
    collab.mkdir()
    (collab / "requirement-analysis.json").write_text("{", encoding="utf-8")
    with pytest.raises(BadInputError) as caught:
        check_session_files(collab)
    assert "backup" not in caught.value.hint and "restore it from a copy; nothing was changed" in caught.value.hint
    workflow = tmp_path / "WFS-x"
    (workflow / ".process" / "backup" / "replan-1").mkdir(parents=True)
    (workflow / "workflow-session.json").write_text("{", encoding="utf-8")
    with pytest.raises(BadInputError) as caught:
        check_session_files(workflow)
    assert "a replan's backups are under .process/backup/" in caught.value.hint
