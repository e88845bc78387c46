"""The terminal's "modify" answer opens $VISUAL or $EDITOR on the plan's tasks file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wfqueue.cli.progress import TerminalUI


def test_an_editor_that_cannot_run_is_named_and_the_file_left_to_edit_by_hand(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """EDITOR=no-such-editor ended lite-plan's "modify" in a FileNotFoundError traceback (exit 1), the session
    left awaiting an answer."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("{}\n", encoding="utf-8")
    asked: list[str] = []
    monkeypatch.setattr("wfqueue.cli.progress.Prompt.ask", lambda text, **_: asked.append(text) or "")
    for variable, editor in (("EDITOR", "no-such-editor --wait"), ("VISUAL", "'unbalanced")):
        monkeypatch.delenv("VISUAL", raising=False)
        monkeypatch.setenv(variable, editor)
        TerminalUI().edit_tasks(tasks, ["TASK-001: no title"])
        err = " ".join(capsys.readouterr().err.split())
        assert f"could not run ${variable} ({editor})" in err and "edit the file yourself" in err, err
        assert asked[-1] == f"edit {tasks}, then press Enter"
    # One that runs edits the file, and nothing is asked.
    monkeypatch.setenv("VISUAL", f"{sys.executable} -c \"import sys; open(sys.argv[1], 'a').write('x')\"")
    TerminalUI().edit_tasks(tasks, [])
    assert tasks.read_text(encoding="utf-8") == "{}\nx" and len(asked) == 2
