"""How long the user waits for a plan's result once it exists: `wfqueue collab-plan --json` in embedded mode.

    .venv/bin/python bench/result_gap.py [--agents 3] [--runs 3] [--latency 0.2] [--write] [--note TEXT]

The command runs as a user runs it (a subprocess; a scripted provider over the offline planner sleeps
``--latency`` per call). Measured per run, on the wall clock:

- result gap: from the callback's finish (the newest modification time of a file in the session
  folder: plan.md and the files the callback writes) to the JSON line appearing on stdout;
- exit after the line: from that line to the process having exited (stopping the embedded workers
  and Redis);
- embedded start-up, as the command reports it on stderr.

``--write`` replaces this section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchdoc import write_section

from wfqueue.samples import make_service_repo

MARK_BEGIN = "<!-- result_gap:begin -->"
MARK_END = "<!-- result_gap:end -->"
INTRO = """
## Result on stdout after the callback

`bench/result_gap.py`: the time from the callback's last file write to the `--json` line on stdout, and
from that line to the command's exit (the embedded workers and Redis are stopped after the result is printed).
"""
STARTUP = re.compile(r"embedded Redis and workers ready in ([0-9.]+)s")


def run_once(agents: int, latency: float, work: Path, index: int) -> dict[str, float]:
    repo = make_service_repo(work / f"repo-{index}", agents)
    script = work / f"script-{index}.json"
    script.write_text(json.dumps({"latency_s": latency}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    began = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", "Add per-user rate limiting to every service API",
         "--repo", str(repo), "--max-agents", str(agents), "-y", "--json", "--provider", f"scripted:{script}"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    printed = time.time()
    _, stderr = proc.communicate(timeout=300)
    exited = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"collab-plan exited {proc.returncode}:\n{stderr.decode(errors='replace')}")
    session_dir = Path(json.loads(line)["session_dir"])
    callback_done = max(p.stat().st_mtime for p in session_dir.rglob("*") if p.is_file())
    startup = STARTUP.search(stderr.decode(errors="replace"))
    return {"result_gap_s": printed - callback_done, "exit_after_line_s": exited - printed,
            "command_s": exited - began, "startup_s": float(startup.group(1)) if startup else float("nan")}


def render(rows: list[dict[str, float]], agents: int, latency: float, command: str, note: str) -> str:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    return "\n".join([
        MARK_BEGIN,
        f"Command: `{command}` · {agents} agents, provider latency {latency:.2f}s per call, {len(rows)} runs · "
        f"{os.cpu_count()} cores, Python {platform.python_version()}" + (f" · {note}" if note else ""),
        "",
        "| figure (median of the runs) | seconds |",
        "|---|---:|",
        f"| callback finished → result line on stdout | **{med('result_gap_s'):.2f}** |",
        f"| result line → command exited (workers and Redis stopped) | {med('exit_after_line_s'):.2f} |",
        f"| embedded start-up (as the command reports it) | {med('startup_s'):.2f} |",
        f"| whole command | {med('command_s'):.2f} |",
        MARK_END,
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per provider call")
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wfq-gap-") as tmp:
        for index in range(args.runs):
            row = run_once(args.agents, args.latency, Path(tmp), index)
            rows.append(row)
            print(json.dumps({k: round(v, 3) for k, v in row.items()}), flush=True)
    table = render(rows, args.agents, args.latency, shlex.join(["python", "bench/result_gap.py", *sys.argv[1:]]),
                   args.note)
    print(table)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, table, INTRO)


if __name__ == "__main__":
    main()
