"""A command run under the guard that leads its process group (wfqueue.group_runner): it ends as the command ends,
the signals a command sends its own group are the command's business, and the command finds its program as it
would without the guard."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from wfqueue.group_runner import output_tail, run_to_end

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard runs on Linux only")


def run(script: str, cwd: Path, **options: object) -> tuple[int | None, str]:
    with tempfile.TemporaryFile() as output:
        code = run_to_end(["sh", "-c", script], cwd, timeout_s=30, output=output, grace_s=5, **options)  # type: ignore[arg-type]
        output.seek(0)
        return code, output.read().decode()


@pytest.mark.parametrize(("signal_name", "code"), [("KILL", -9), ("TERM", -15), ("SEGV", -11)])
def test_a_command_ended_by_a_signal_reads_as_ended_by_it(tmp_path: Path, signal_name: str, code: int) -> None:
    """A SIGKILL (the out-of-memory killer) read as exit 1 with the guard's own traceback in the output."""
    got, said = run(f"ulimit -c 0; kill -{signal_name} $$", tmp_path)  # the command's own core file: none
    assert (got, said) == (code, "")


@pytest.mark.parametrize("signal_name", ["HUP", "INT", "USR1", "USR2", "QUIT", "ALRM"])
def test_a_signal_the_command_sends_its_own_group_is_its_own_business(tmp_path: Path, signal_name: str) -> None:
    """A test suite that signals its process group (`kill -HUP 0`) was killed with its guard (the guard led the
    group and died of it, or killed the whole group on SIGUSR1)."""
    got, said = run(f"trap 'echo got' {signal_name}; kill -{signal_name} 0; sleep 0.2; echo survived", tmp_path)
    assert (got, said.split()) == (0, ["got", "survived"])


def test_a_relative_path_entry_is_looked_up_from_the_commands_folder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`PATH=node_modules/.bin:$PATH` and a `jest` verification: "not found on PATH", where the command itself
    (run from the worktree) finds it."""
    tool = tmp_path / "node_modules" / ".bin" / "myjest"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho ran from $PWD\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"node_modules/.bin{os.pathsep}{os.environ['PATH']}")
    with tempfile.TemporaryFile() as output:
        assert run_to_end(["myjest"], tmp_path, timeout_s=30, output=output, grace_s=5) == 0
        output.seek(0)
        assert output.read().decode().strip() == f"ran from {tmp_path}"
    with tempfile.TemporaryFile() as output, pytest.raises(FileNotFoundError):
        run_to_end(["myjest"], tmp_path.parent, timeout_s=30, output=output, grace_s=5)


def test_the_command_gets_the_workers_locale_not_the_guards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's start-up in the guard sets LC_CTYPE under the C locale (locale coercion): the command saw
    C.UTF-8 where its worker had none."""
    monkeypatch.delenv("LC_CTYPE", raising=False)
    monkeypatch.setenv("LC_ALL", "")
    monkeypatch.setenv("LANG", "C")
    assert run('echo "[${LC_CTYPE-unset}]"', tmp_path) == (0, "[unset]\n")
    monkeypatch.setenv("LC_CTYPE", "POSIX")
    assert run('echo "[${LC_CTYPE-unset}]"', tmp_path) == (0, "[POSIX]\n")


def test_what_a_command_printed_is_read_back_without_what_a_terminal_would_act_on(tmp_path: Path) -> None:
    """An agent CLI's colours and window-title changes went as they were into logs, execution.md and the
    terminal."""
    with tempfile.TemporaryFile() as output:
        code = run_to_end(["printf", "\\033[31mred\\033]0;title\\007 10%%\\r100%%\\n"], tmp_path, timeout_s=30,
                          output=output, grace_s=5)
        assert code == 0
        assert output_tail(output, 100) == "\ufffd[31mred\ufffd]0;title\ufffd 10%\n100%\n"
