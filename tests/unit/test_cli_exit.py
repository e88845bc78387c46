"""The command's exit code survives a Ctrl-C it caught.

A Ctrl-C that landed while a module built a dataclass (most imports do) was caught and reported as
"interrupted", yet the process died by SIGINT (a return code of -2 to a caller) instead of exiting 130."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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

