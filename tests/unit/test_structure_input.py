"""Turning the requirement into GOAL / SCOPE / CONTEXT: a requirement with no words is refused before any session."""

from __future__ import annotations

from pathlib import Path

import pytest

from wfqueue.errors import BadInputError
from wfqueue.sessions import has_words
from wfqueue.workflow_session.coordinator import create_session
from wfqueue.workflow_session.session import active_root
from wfqueue.workflow_session.structure import structure_input


@pytest.mark.parametrize("text", ["🚀🚀🚀 !!!", "   ", "... ?!", "-- * --"])
def test_a_requirement_without_words_is_bad_input_saying_what_to_write(text: str) -> None:
    with pytest.raises(BadInputError) as caught:
        structure_input(text)
    assert caught.value.exit_code == 2
    assert "the requirement" in caught.value.message and "in words" in caught.value.hint


def test_no_session_is_created_for_a_requirement_without_words(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no words"):
        create_session(tmp_path, "🚀🚀🚀 !!!")
    assert not active_root(tmp_path).exists() or not any(active_root(tmp_path).iterdir())


@pytest.mark.parametrize("text", ["Add OAuth login", "为登录接口添加限流", "🚀 Add rate limiting", "v2"])
def test_words_in_any_script_are_planned(text: str) -> None:
    assert has_words(text)
    assert structure_input(text).goal
