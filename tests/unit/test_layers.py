"""Which top-level packages may import which: beat's maintenance code does not depend on the worker tasks."""

from __future__ import annotations

import subprocess
import sys


def test_beat_imports_nothing_from_workers() -> None:
    probe = ("import sys, beat.tasks, beat.schedule, beat.lock, beat.watchdog, beat.housekeeping; "
             "print(sorted(m for m in sys.modules if m == 'workers' or m.startswith('workers.')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_a_worker_node_loads_no_plan_coordinator() -> None:
    """The coordinators are the commands' (and beat's watchdog's, loaded when it first runs): a node loading them
    on its way to its first planning task would only delay that task."""
    probe = ("import sys\nfrom workers import preload\nassert preload.load(sdk=False) == []\nimport workers.app\n"
             "print(sorted(m for m in sys.modules if m.endswith('.coordinator') or m in "
             "('beat.watchdog', 'beat.housekeeping')))")
    env = {"PATH": "/usr/bin:/bin", "WFQUEUE_BROKER_URL": "redis://127.0.0.1:1/0"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "[]"
