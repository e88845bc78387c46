"""What a plan costs beyond its model calls: `wfqueue collab-plan` as a user runs it, embedded mode.

    .venv/bin/python bench/plan_overhead.py [--agents 3] [--runs 3] [--latency 1.0] [--write] [--note TEXT]

The ``wfqueue`` command in a subprocess (``python -m wfqueue``: the same entry point, its standby worker
included), with the anthropic provider (the real SDK in the workers) against the local fake Messages API of
tests/fake_anthropic.py answered by bench/cache_share.py's scripted model, every answer held ``--latency``
seconds (bench/remote_agents.py's SlowModel). On the critical path the model answers three times: the
understanding, then one agent's ``read`` turn and its answer. Per run, on the wall clock from the command's
start: the result line on stdout, the exit (after the embedded workers and Redis are stopped), the embedded
start-up the command reports (and how long its plan blocked on it), and its worker's ``ready.`` log line.
**Overhead = result line - 3 x latency**: everything but the model on the path (Python and wfqueue starting,
the embedded cluster, dispatch, the tasks' own work, the callback). Before each run a fresh
``import anthropic`` is timed (a new interpreter, collector off, as a node loads it): the SDK's import is
most of the node's start-up and the figure that moves most with the machine's speed, so the table also gives
the overhead less that import.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchdoc import ready_logged_at, write_section  # noqa: E402
from bench.cache_share import REQUIREMENT  # noqa: E402
from bench.remote_agents import CALLS_ON_PATH, SlowModel  # noqa: E402
from wfqueue.samples import make_service_repo  # noqa: E402

MARK_BEGIN, MARK_END = "<!-- plan_overhead:begin -->", "<!-- plan_overhead:end -->"
UP_BEGIN, UP_END = "<!-- plan_overhead_up:begin -->", "<!-- plan_overhead_up:end -->"  # the --up table
UP_SLOTS = 8  # worker slots of `wfqueue up` with --up
STARTUP = re.compile(r"embedded Redis and workers ready in ([0-9.]+)s \(the plan waited ([0-9.]+)s for them\)")
SECTION = """
## A plan's overhead outside its model calls

`bench/plan_overhead.py` runs `wfqueue collab-plan --provider anthropic --json` as a user runs it (a
subprocess, embedded mode, the real SDK in the workers) against the fake Messages API, each answer held a
fixed latency. Overhead = time from the command's start to its result line on stdout, less the model's time
on the critical path (three answers: the understanding, one agent's tool turn and its answer).
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def wfqueue_up(repo: Path, env: dict[str, str], work: Path) -> Iterator[None]:
    """`wfqueue up` for ``repo`` until the block ends: the plan commands there use its Redis and workers."""
    env = {**env, "WFQUEUE_FLOWER_BASIC_AUTH": "bench:bench", "WFQUEUE_FLOWER_PORT": str(free_port()),
           "WFQUEUE_BEAT_SCHEDULE_FILE": str(work / "beat-schedule")}
    with (work / "up.log").open("ab") as log:
        up = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "up", "--repo", str(repo), "--workers",
                               str(UP_SLOTS)], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=ROOT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (repo / ".workflow" / ".queue" / "up.json").is_file():
            if up.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"wfqueue up did not start:\n{(work / 'up.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGINT)  # what Ctrl-C does: stops Redis, workers, beat and Flower
            up.wait(60)


def sdk_import_s() -> float:
    """How long a fresh interpreter takes to import the Anthropic SDK, with the garbage collector off as a
    node loads it: most of a node's start-up, and the figure that moves most with this machine's speed."""
    # Timed inside the interpreter: its start and its exit (a quarter of a second to tear down what the SDK
    # built) are not part of a node's start-up.
    done = subprocess.run([sys.executable, "-c", "import gc, time; gc.disable(); began = time.perf_counter(); "
                           "import anthropic; print(time.perf_counter() - began)"],
                          check=True, cwd=ROOT, capture_output=True, text=True)
    return float(done.stdout)


def run_once(agents: int, latency: float, work: Path, index: int, use_up: bool) -> dict[str, float]:
    sdk_s = sdk_import_s()  # before the run, on the same quiet machine
    repo = make_service_repo(work / f"repo-{index}", agents)
    # Without PYTHONDONTWRITEBYTECODE: the modules compiled once, as on a user's machine, not at every start.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WFQUEUE_", "ANTHROPIC_")) and k != "PYTHONDONTWRITEBYTECODE"}
    with SlowModel(latency) as fake, ExitStack() as stack:
        env.update(ANTHROPIC_API_KEY="bench-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1")
        if use_up:
            stack.enter_context(wfqueue_up(repo, env, work))
        began, began_wall = time.perf_counter(), time.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", "wfqueue", "collab-plan", REQUIREMENT, "--repo", str(repo),
             "--max-agents", str(agents), "--provider", "anthropic", "-y", "--json"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        result_s = time.perf_counter() - began
        stderr = proc.stderr.read().decode(errors="replace")
        proc.wait()
        exit_s = time.perf_counter() - began
    if proc.returncode != 0 or json.loads(line)["status"] != "completed":
        raise SystemExit(f"collab-plan failed ({proc.returncode}):\n{stderr}")
    startup = STARTUP.search(stderr)
    worker_log = repo / ".workflow" / ".queue" / "worker.log"
    # With --up the log is up's workers', ready before the command began: nothing started for this plan.
    ready_s = ready_logged_at(worker_log) - began_wall if worker_log.is_file() and not use_up else 0.0
    return {"result_s": result_s, "exit_s": exit_s, "startup_s": float(startup.group(1)) if startup else 0.0,
            "waited_s": float(startup.group(2)) if startup else 0.0, "ready_s": ready_s,
            "overhead_s": result_s - CALLS_ON_PATH * latency, "sdk_import_s": sdk_s}


def render(rows: list[dict[str, float]], args: Any, command: str) -> str:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    return "\n".join([
        MARK_BEGIN,
        f"Command: `{command}` · {args.agents} agents, model latency {args.latency:.2f}s per answer, {len(rows)} "
        f"runs · {os.cpu_count()} cores, Python {platform.python_version()}" + (f" · {args.note}" if args.note else ""),
        "",
        "| figure (median of the runs) | seconds |",
        "|---|---:|",
        f"| command start → result line on stdout | {median('result_s'):.2f} |",
        f"| of it the model on the critical path ({CALLS_ON_PATH} answers) | {CALLS_ON_PATH * args.latency:.2f} |",
        f"| **overhead outside model calls** | **{median('overhead_s'):.2f}** |",
        f"| embedded start-up, as the command reports it: its Redis start → worker seen ready (0: `wfqueue up` "
        f"served it) | {median('startup_s'):.2f} |",
        f"| of it, the plan blocked waiting for the worker | {median('waited_s'):.2f} |",
        f"| command start → its worker's `ready.` log line (0: `wfqueue up`) | {median('ready_s'):.2f} |",
        f"| command start → exit (workers and Redis stopped) | {median('exit_s'):.2f} |",
        f"| overhead, best / worst run | {min(r['overhead_s'] for r in rows):.2f} / "
        f"{max(r['overhead_s'] for r in rows):.2f} |",
        "| the machine's speed: `import anthropic` in a new interpreter (collector off, as a node; the import "
        f"alone), timed before each run | {median('sdk_import_s'):.2f} |",
        *([] if args.up else [  # beside `wfqueue up` the SDK was loaded before the command began
            f"| overhead less that import (what moves less with the machine's speed) | "
            f"{statistics.median(r['overhead_s'] - r['sdk_import_s'] for r in rows):.2f} |"]),
        MARK_END,
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds each answer is held")
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--up", action="store_true", help="with `wfqueue up` running for the repository")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-overhead-") as tmp:
        for index in range(args.runs):
            rows.append(run_once(args.agents, args.latency, Path(tmp), index, args.up))
            print(json.dumps({k: round(v, 3) for k, v in rows[-1].items()}), flush=True)
    table = render(rows, args, shlex.join(["python", "bench/plan_overhead.py", *sys.argv[1:]]))
    print(table)
    if args.write:
        begin, end = (MARK_BEGIN, MARK_END) if not args.up else (UP_BEGIN, UP_END)
        write_section(begin, end, table.replace(MARK_BEGIN, begin).replace(MARK_END, end), SECTION)


if __name__ == "__main__":
    main()
