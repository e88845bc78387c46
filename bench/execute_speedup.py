"""Executing a plan on workers: wall time against the critical path, and 1 worker slot against 4.

    .venv/bin/python bench/execute_speedup.py [--task-seconds 2.0] [--slots 1,4] [--ungated 4] [--note TEXT] [--write]

A generated plan of 8 tasks in 3 dependency waves (one task waits for a file another writes) is executed in a
fresh git repository by ``wfqueue execute``'s coordinator in embedded mode (its own Redis and worker processes),
with the command executor running tests/executor_program.py: it sleeps ``--task-seconds``, then edits the
task's files. Every task's verification is ``python -m pytest -q tests`` (a one-test suite), which is also the
gate after each wave; ``--ungated`` runs (for those --parallel values) have a manual check instead: no
verification and no gate, orchestration alone. ``--parallel N`` caps the tasks in flight, so with N = 1 every
wave holds one task; the embedded worker processes are min(largest wave, N).

Measured from the run's own records: each task's run time is ``finished_at - started_at`` in execution.json
(timed by the worker: worktree, executor, verification, commit); the critical path is the longest dependency
chain by those measured times; the wave span sums each wave's slowest task (what waves cost beyond the
chain). The gate's run time and the execution's start come from the coordinator's own messages, the end is
the record's ``finished_at``: the execution wall leaves out the embedded start-up (measured beside it) and
the workers' shutdown. ``--write`` replaces the figures in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the test executor program's command is tests.execute_support's

from benchdoc import write_section  # noqa: E402

from tests.execute_support import EXECUTOR_COMMAND  # noqa: E402
from wfqueue.execute import records  # noqa: E402
from wfqueue.execute.coordinator import ExecuteCoordinator  # noqa: E402
from wfqueue.execute.load import load_plan  # noqa: E402
from wfqueue.execute.schedule import build_schedule, critical_path  # noqa: E402
from wfqueue.settings import load_settings  # noqa: E402

MARK_BEGIN, MARK_END = "<!-- execute_speedup:begin -->", "<!-- execute_speedup:end -->"
VERIFICATION = "python -m pytest -q tests"
MANUAL = "manual: read the diff"
# id -> (files it modifies, tasks it depends on). Wave 1: T2 T3 T4 T5 (T1 writes pkg/a.py as T4 does, so it
# waits); wave 2: T1 T6 T7; wave 3: T8. The longest chain is T2 -> T6 -> T8.
PLAN: dict[str, tuple[list[str], list[str]]] = {
    "T1": (["pkg/a.py"], []),
    "T2": (["pkg/b.py"], []),
    "T3": (["pkg/c.py"], []),
    "T4": (["pkg/a.py"], []),
    "T5": (["pkg/d.py"], []),
    "T6": (["pkg/b.py"], ["T2"]),
    "T7": (["pkg/e.py"], ["T3", "T4"]),
    "T8": (["pkg/a.py", "pkg/b.py"], ["T6"]),
}


class RecordingUI:
    """The coordinator's messages, each with the time it was said."""

    def __init__(self) -> None:
        self.said: list[tuple[float, str]] = []

    def info(self, message: str) -> None:
        self.said.append((time.time(), message))

    def progress(self, agents: dict[str, dict[str, Any]]) -> None: ...

    def note(self, what: str, text: str) -> None: ...

    def done(self) -> None: ...

    def first(self, pattern: str) -> tuple[float, re.Match[str]]:
        for at, text in self.said:
            found = re.search(pattern, text)
            if found:
                return at, found
        raise SystemExit(f"the coordinator never said /{pattern}/")

    def spans(self, begin: str, end: str) -> list[float]:
        """Seconds from each message matching ``begin`` to the next matching ``end``."""
        out, opened = [], None
        for at, text in self.said:
            if opened is None and re.search(begin, text):
                opened = at
            elif opened is not None and re.search(end, text):
                out.append(at - opened)
                opened = None
        return out


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_project(repo: Path, task_seconds: float, verification: str) -> tuple[Path, Path]:
    """A committed repository whose files hold one ``T<n> = 0`` line per task writing them, the lite plan
    (tasks.jsonl), and the edits file the executor program reads (each task sets its lines)."""
    files: dict[str, list[str]] = {}
    for task_id, (modify, _) in PLAN.items():
        for path in modify:
            files.setdefault(path, []).append(task_id)
    for path, writers in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("".join(f"{w} = 0\n" for w in writers), encoding="utf-8")
    (repo / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_pkg.py").write_text(
        "import pkg.a\n\n\ndef test_a_loads():\n    assert pkg.a.T1 >= 0\n", encoding="utf-8")
    (repo / ".gitignore").write_text(".workflow/\n__pycache__/\n.pytest_cache/\n", encoding="utf-8")
    _git(repo.parent, "init", "-q", "-b", "main", str(repo))
    _git(repo, "config", "user.name", "Bench")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial")
    tasks = [{"id": task_id, "title": f"Set {task_id}", "description": f"Set {task_id} in {', '.join(modify)}.",
              "type": "feature", "depends_on": deps, "files": [{"path": p, "action": "modify"} for p in modify],
              "convergence": {"criteria": [f"{task_id} is set"], "verification": verification,
                              "definition_of_done": f"{task_id} is set"}}
             for task_id, (modify, deps) in PLAN.items()]
    tasks_file = repo / ".workflow" / ".lite-plan" / "bench-plan-2026-01-01" / "tasks.jsonl"
    tasks_file.parent.mkdir(parents=True)
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    edits = {task_id: {"sleep": task_seconds,
                       "edits": {p: {"replace": [f"{task_id} = 0", f"{task_id} = 1"]} for p in modify}}
             for task_id, (modify, _) in PLAN.items()}
    edits_file = repo.parent / "edits.json"
    edits_file.write_text(json.dumps(edits), encoding="utf-8")
    return tasks_file, edits_file


def execute_once(slots: int, task_seconds: float, work: Path, gated: bool = True) -> dict[str, Any]:
    repo = work / f"repo-{slots}-{'gated' if gated else 'ungated'}"
    repo.mkdir(parents=True)
    tasks_file, edits_file = make_project(repo, task_seconds, VERIFICATION if gated else MANUAL)
    executor_log = repo.parent / f"{repo.name}-executor.log"
    worker_env = {"WFQUEUE_EXECUTOR_COMMAND": EXECUTOR_COMMAND, "WFQUEUE_TEST_EDITS": str(edits_file),
                  "WFQUEUE_TEST_EXECUTOR_LOG": str(executor_log)}
    settings = load_settings(executor_command=EXECUTOR_COMMAND)
    if not settings.embedded:
        raise SystemExit("unset WFQUEUE_BROKER_URL: this figure is for embedded mode")
    plan = load_plan(str(tasks_file))
    schedule = build_schedule(plan.tasks, slots)
    ui = RecordingUI()
    began = time.time()
    coordinator = ExecuteCoordinator(settings, ui, worker_env=worker_env)
    result = coordinator.start(plan, schedule, "command", untested=not gated)
    returned = time.time()
    if result.status != "completed":
        raise SystemExit(f"{slots} slot(s): the execution ended {result.status}: {result.hint}")
    execution = records.load(Path(result.session_dir))
    ready_at, _ = ui.first(r"embedded Redis and workers ready")
    _, workers = ui.first(r"starting a local worker with (\d+) ")
    finished_at = execution.finished_at or returned
    took = {t: (r.finished_at or 0.0) - (r.started_at or 0.0) for t, r in execution.tasks.items()}
    measured = critical_path([t.model_copy(update={"estimate": took[t.id]}) for t in plan.tasks])
    span = sum(max(took[t] for t in wave) for wave in execution.waves)
    gates = ui.spans(r"^gate after wave \d+:", r"^gate after wave \d+ (passed|is red)")
    runs = [json.loads(line) for line in executor_log.read_text(encoding="utf-8").splitlines()]
    wall = finished_at - ready_at
    return {"slots": slots, "gated": gated, "workers": int(workers.group(1)), "waves": len(execution.waves),
            "startup_s": ready_at - began, "wall_s": wall, "critical_s": measured.length,
            "path": " -> ".join(measured.task_ids), "span_s": span, "gates_s": sum(gates), "gate_runs": len(gates),
            "overhead_s": wall - span - sum(gates), "wall_over_critical": wall / measured.length,
            "task_mean_s": sum(took.values()) / len(took),
            "executor_mean_s": sum(r["end"] - r["start"] for r in runs) / len(runs),
            "serial_work_s": sum(took.values()), "shutdown_s": returned - finished_at, "tasks": result.tasks}


def render(rows: list[dict[str, Any]], task_seconds: float, command: str, note: str) -> str:
    lines = [
        MARK_BEGIN,
        f"Command: `{command}` · executor {task_seconds:.2f}s per task · {os.cpu_count()} cores, "
        f"Python {platform.python_version()}" + (f" · {note}" if note else ""),
        "",
        "| --parallel | verification + gate | workers | waves | embedded start-up (s) | execution wall (s) "
        "| **critical path (s)** "
        "| wave span (s) | gates (s) | **overhead = wall - span - gates (s)** | **wall / path** "
        "| wall / (path + gates) | mean task (s) | of it executor (s) | all tasks' work (s) | tasks |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['slots']} | {'pytest' if r['gated'] else 'none'} | {r['workers']} | {r['waves']} "
            f"| {r['startup_s']:.2f} | {r['wall_s']:.2f} "
            f"| **{r['critical_s']:.2f}** | {r['span_s']:.2f} | {r['gates_s']:.2f} ({r['gate_runs']}) "
            f"| **{r['overhead_s']:.2f}** | **{r['wall_over_critical']:.2f}** "
            f"| {r['wall_s'] / (r['critical_s'] + r['gates_s']):.2f} | {r['task_mean_s']:.2f} "
            f"| {r['executor_mean_s']:.2f} | {r['serial_work_s']:.1f} | {r['tasks']} |")
    gated = [r for r in rows if r["gated"]]
    if len(gated) > 1:
        lines += ["", f"Speed-up of --parallel {gated[-1]['slots']} over --parallel {gated[0]['slots']} (with the "
                      f"gate): {gated[0]['wall_s'] / gated[-1]['wall_s']:.2f}x (execution wall). Critical path: "
                      f"{gated[-1]['path']}."]
    lines.append(MARK_END)
    return "\n".join(lines)


INTRO = """
## Execution: dependency waves on workers vs the critical path

`bench/execute_speedup.py` executes a generated plan of 8 tasks in 3 waves
(dependencies, and one task held back a wave because it writes a file another
task of the first wave writes) in a fresh git repository, embedded mode, with
the command executor running `tests/executor_program.py`, which sleeps a fixed
time per task and then makes the task's edit. Each task also runs its
verification (`python -m pytest -q tests`), which is the gate after each wave
too. Task times are the run's own records (`finished_at - started_at` of each
task in `execution.json`, timed by the worker: worktree, executor,
verification, commit); the **critical path** is the longest dependency chain by
those times; the **wave span** sums each wave's slowest task (a wave waits for
its slowest task, on the chain or not). Gates are timed from the coordinator's
messages. **Overhead = wall - span - gates**: dispatch, result polling, the
merges and the coordinator's own work. The execution wall starts when the
embedded Redis and workers are ready (start-up beside it) and ends at the
record's `finished_at`. `--parallel 1` puts one task in each wave: one worker,
eight waves, eight gates; the embedded worker count is min(largest wave,
`--parallel`). The last row's plan has a manual check instead of the pytest
verification: no verification in the tasks and no gate, orchestration alone.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task-seconds", type=float, default=2.0, help="the executor's sleep per task")
    parser.add_argument("--slots", default="1,4", help="comma-separated --parallel values")
    parser.add_argument("--ungated", default="4", help="comma-separated --parallel values run without verification "
                        "or gate ('' for none)")
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    # The verification and the gate run `python -m pytest`: this interpreter's, as for a user's activated venv.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-exec-bench-") as tmp:
        runs = [(int(s), True) for s in args.slots.split(",")] + [(int(s), False) for s in args.ungated.split(",") if s]
        for slots, gated in runs:
            row = execute_once(slots, args.task_seconds, Path(tmp), gated)
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    command = shlex.join(["python", "bench/execute_speedup.py", *sys.argv[1:]])
    table = render(rows, args.task_seconds, command, args.note)
    print(table)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, table, INTRO)


if __name__ == "__main__":
    main()
