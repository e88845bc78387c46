"""A file where wfqueue makes a folder (`.workflow`, or one of its session roots): every plan command and `up` ended
in a NotADirectoryError traceback (exit 1); read-only folders were already said. Now exit 3, naming the file and
saying to move it, and the file is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import processes_mentioning, run_cli, run_cli_in_process

pytestmark = pytest.mark.integration


def test_a_workflow_file_is_named_before_anything_starts(sample_repo: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (sample_repo / ".workflow").write_text("notes\n", encoding="utf-8")
    for command in ("lite-plan", "collab-plan", "plan"):
        done = run_cli_in_process(capsys, monkeypatch, command, "Add tags to notes", "--repo", str(sample_repo), "-y")
        assert done.code == 3, done.stderr
        assert f"error: cannot write {sample_repo / '.workflow'}: {sample_repo / '.workflow'} is a file, not a " \
               "folder" in done.stderr and "move that file away" in done.stderr and "Traceback" not in done.stderr
    assert (sample_repo / ".workflow").read_text(encoding="utf-8") == "notes\n"


def test_a_session_root_that_is_a_file_is_named_and_nothing_is_left_running(sample_repo: Path) -> None:
    planning = sample_repo / ".workflow" / ".planning"
    planning.parent.mkdir()
    planning.write_text("", encoding="utf-8")
    done = run_cli("collab-plan", "Add tags to notes", "--repo", str(sample_repo), "-y")
    assert done.code == 3, done.stderr
    assert f"{planning} is a file, not a folder" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "move that file away, then run the command again" in done.stderr
    assert planning.is_file() and processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []
