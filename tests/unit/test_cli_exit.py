"""The command's exit code survives a Ctrl-C it caught.

A Ctrl-C that landed while a module built a dataclass (most imports do) was caught and reported as
"interrupted", yet the process died by SIGINT (a return code of -2 to a caller) instead of exiting 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# A Ctrl-C raised inside code compiled from a string, as dataclasses' generated methods are, then caught.
CAUGHT_IN_EXEC = """
import sys
from wfqueue.cli.entry import exit_process
try:
    exec("raise KeyboardInterrupt")
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    exit_process(130)
"""


def test_a_caught_ctrl_c_raised_in_generated_code_exits_130_not_by_signal(tmp_path: Path) -> None:
    # Run as the command runs, with -m (``python -c`` happens to clear the mark on its own).
    (tmp_path / "caught_in_exec.py").write_text(CAUGHT_IN_EXEC, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "caught_in_exec"], capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted\n"



# A command whose outcome is printed, then a thread the interpreter's shutdown waits for (as a finalizer or a
# client's thread may be): a Ctrl-C there interrupted the join with a traceback.
DONE_THEN_SHUTDOWN = """
import sys, threading, time
from wfqueue.cli.entry import exit_process


def held_by_the_shutdown():
    while threading.main_thread().is_alive():  # the shutdown marks the main thread stopped, then joins this one
        time.sleep(0.01)
    print("shutting down", file=sys.stderr, flush=True)
    time.sleep(30)


print("the result")
threading.Thread(target=held_by_the_shutdown).start()
exit_process(0)
"""


def test_a_ctrl_c_during_the_interpreters_shutdown_keeps_the_outcome_and_says_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "done_then_shutdown.py").write_text(DONE_THEN_SHUTDOWN, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "done_then_shutdown"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None and proc.stderr.readline() == "shutting down\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "the result\n", "")


def test_a_second_ctrl_c_while_the_embedded_cluster_stops_keeps_the_exit_code(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The first Ctrl-C ended the command (130); the second landed in the deferred stop of its Redis and workers
    (which kills what is left): it escaped main() as a traceback and the process died by SIGINT."""
    from wfqueue.cli import main as cli

    def stopped_again() -> None:
        raise KeyboardInterrupt  # as runtime.stop_deferred does once it has killed what was left

    monkeypatch.setattr(cli, "stop_deferred", stopped_again)
    monkeypatch.setattr(cli, "app", lambda **_: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert cli.main(["status", "--json"]) == 130
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"


def test_a_bug_still_gives_a_json_command_its_one_object_and_its_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A tracked file whose name was not UTF-8 broke `wfqueue plan --json` with a traceback and no object on
    stdout: a script reading it had nothing to parse. Without --json the traceback is Python's own."""
    from wfqueue.cli import main as cli_main
    from wfqueue.execute import load

    def broken(*_args: object, **_kwargs: object) -> None:
        raise UnicodeDecodeError("utf-8", b"\xe9", 0, 1, "invalid continuation byte")

    monkeypatch.setattr(load, "read_plan", broken)
    (tmp_path / "tasks.jsonl").write_text("", encoding="utf-8")
    assert cli_main.main(["validate", str(tmp_path / "tasks.jsonl"), "--json"]) == 1
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert (printed["status"], printed["exit_code"]) == ("error", 1)
    assert printed["error"].startswith("wfqueue failed unexpectedly: UnicodeDecodeError: 'utf-8' codec")
    assert "report it with the traceback" in printed["hint"]
    assert "Traceback (most recent call last)" in err and "in broken" in err
    with pytest.raises(UnicodeDecodeError):
        cli_main.main(["validate", str(tmp_path / "tasks.jsonl")])


@pytest.mark.parametrize(("failure", "said"), [
    # `up`'s first ping, and a plan's Redis write beside up, on a disk that filled: Redis refuses what it cannot save.
    ("misconf", "Redis cannot save what it is sent (MISCONF: writing its data failed; its disk is full"),
    # A full disk's ENOSPC comes when a file is closed, naming no file (embedded Redis's socket-path record).
    ("enospc", "a write was refused: no space left on the device"),
])
def test_a_full_disk_is_said_as_such_exit_3_not_a_traceback(
        failure: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Both ended in a traceback and exit 1 ("wfqueue failed unexpectedly")."""
    import errno

    import kombu.exceptions
    import redis

    from wfqueue.cli import main as cli_main
    from wfqueue.execute import load

    def full(*_args: object, **_kwargs: object) -> None:
        if failure == "enospc":
            raise OSError(errno.ENOSPC, "No space left on device")
        try:
            raise redis.exceptions.ResponseError("MISCONF Errors writing to the AOF file: No space left on device")
        except redis.exceptions.ResponseError as exc:
            raise kombu.exceptions.OperationalError(str(exc)) from exc

    monkeypatch.setattr(load, "read_plan", full)
    (tmp_path / "tasks.jsonl").write_text("", encoding="utf-8")
    assert cli_main.main(["validate", str(tmp_path / "tasks.jsonl"), "--json"]) == 3
    out, err = capsys.readouterr()
    assert json.loads(out)["exit_code"] == 3 and said in json.loads(out)["error"], out
    assert "Traceback" not in err and said in " ".join(err.split())
