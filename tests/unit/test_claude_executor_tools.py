"""The coding executor's tools on their own: edits keep what they do not replace, writes stay in the worktree,
and bad input from the model is an error result, never an exception."""

from __future__ import annotations

from pathlib import Path

import pytest

from wfqueue.execute.coding_tools import CodingTools


@pytest.fixture
def tools(tmp_path: Path) -> CodingTools:
    root = tmp_path / "wt"
    root.mkdir()
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    return CodingTools(root)


def test_an_edit_changes_only_the_replaced_text_and_keeps_line_endings(tools: CodingTools) -> None:
    text, is_error = tools.run("edit_file", {"path": "crlf.txt", "old_string": "two", "new_string": "2"})
    assert not is_error, text
    assert (tools.root / "crlf.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


def test_an_edit_applied_twice_is_recognised_as_already_applied(tools: CodingTools) -> None:
    edit = {"path": "crlf.txt", "old_string": "two", "new_string": "2"}
    tools.run("edit_file", edit)
    text, is_error = tools.run("edit_file", edit)
    assert not is_error and "already applied" in text
    assert (tools.root / "crlf.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


def test_write_file_creates_directories_and_reports_what_it_did(tools: CodingTools) -> None:
    assert tools.run("write_file", {"path": "pkg/new.py", "content": "x = 1\n"}) == ("created pkg/new.py (6 bytes)",
                                                                                     False)
    assert tools.run("write_file", {"path": "pkg/new.py", "content": "x = 2\n"})[0].startswith("replaced")
    assert (tools.root / "pkg" / "new.py").read_text() == "x = 2\n"


@pytest.mark.parametrize(("name", "arguments", "says"), [
    ("edit_file", {"path": "crlf.txt", "old_string": "", "new_string": "x"}, "old_string is empty"),
    ("edit_file", {"path": "missing.txt", "old_string": "a", "new_string": "b"}, "create it with write_file"),
    ("edit_file", {"path": "crlf.txt", "old_string": 3, "new_string": "b"}, "must be a string"),
    ("write_file", {"path": ".", "content": "x"}, "worktree root"),
    ("write_file", {"path": ".GIT/hooks/pre-commit", "content": "x"}, ".git"),
    ("write_file", {"path": "~/x", "content": "x"}, "relative"),
    ("delete_everything", {}, "unknown tool"),
    ("read_file", "crlf.txt", "JSON object"),
])
def test_bad_calls_are_error_results(tools: CodingTools, name: str, arguments: object, says: str) -> None:
    text, is_error = tools.run(name, arguments)
    assert is_error and says in text
    assert sorted(p.name for p in tools.root.iterdir()) == ["crlf.txt"]


def test_a_file_too_big_to_read_back_is_not_written(tmp_path: Path) -> None:
    """write_file took 999 kB while read_file refused anything above its 512 kB: the model lost sight of its own
    file for the rest of the task."""
    tools = CodingTools(tmp_path, max_file_bytes=512 * 1024)
    text, is_error = tools.run("write_file", {"path": "big.txt", "content": "x" * (600 * 1024)})
    assert is_error and not (tmp_path / "big.txt").exists(), text
    assert not tools.run("write_file", {"path": "ok.txt", "content": "x" * (500 * 1024)})[1]
    assert not tools.run("read_file", {"path": "ok.txt"})[1]
