"""replan's questions on a terminal: the options by number or value, comma-separated where several may go."""

from __future__ import annotations

import pytest

from wfqueue.cli.replan_cmd import TerminalReplanUI
from wfqueue.workflow_session.replan.select import Option, Question

SCOPE = Question(key="updates", text="What changes?", multi=True, default=["tasks"],
                 options=[Option(value="tasks", label="tasks"), Option(value="deps", label="dependencies"),
                          Option(value="files", label="files")])


def answering(monkeypatch: pytest.MonkeyPatch, *answers: str) -> list[str]:
    asked: list[str] = []
    queue = list(answers)

    def ask(text: str, **_: object) -> str:
        asked.append(text)
        return queue.pop(0)

    monkeypatch.setattr("wfqueue.cli.replan_cmd.Prompt.ask", ask)
    return asked


def test_an_answer_that_is_not_an_option_is_asked_again_not_taken_for_the_default(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`zzz,99,-1` was read as no choice at all, and the default applied without a word."""
    asked = answering(monkeypatch, "zzz,99,-1", "2, files")
    assert TerminalReplanUI().ask(SCOPE) == ["deps", "files"]
    assert len(asked) == 2
    assert "not an option: zzz, 99, -1 (choose from 1 to 3)" in " ".join(capsys.readouterr().err.split())
    one = SCOPE.model_copy(update={"multi": False})
    asked = answering(monkeypatch, "1,2", "3")
    assert TerminalReplanUI().ask(one) == ["files"] and len(asked) == 2
