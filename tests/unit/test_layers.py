"""Which top-level packages may import which: beat's maintenance code does not depend on the worker tasks."""

from __future__ import annotations

import subprocess
import sys


def test_beat_imports_nothing_from_workers() -> None:
    probe = ("import sys, beat.tasks, beat.schedule, beat.lock, beat.watchdog, beat.housekeeping; "
             "print(sorted(m for m in sys.modules if m == 'workers' or m.startswith('workers.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"
