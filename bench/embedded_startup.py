"""Embedded start-up: a private Redis plus one local worker node with N pool slots, until it consumes.

    .venv/bin/python bench/embedded_startup.py [--slots 4] [--runs 5] [--write] [--note TEXT]

Timed as a plan command times it (``start_redis`` then ``start_workers``), and the stop after it; also
how long after the worker logged ``ready.`` the start-up noticed (the readiness check's own delay).
``--write`` replaces this section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchdoc import write_section

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.embedded import EmbeddedCluster
from wfqueue.settings import load_settings

MARK_BEGIN = "<!-- embedded_startup:begin -->"
MARK_END = "<!-- embedded_startup:end -->"
INTRO = """
## Embedded start-up

`bench/embedded_startup.py`: Redis and one prefork worker node with N slots, from nothing to consuming its
queues (what every plan command in embedded mode waits for), then stopped.
"""


def ready_logged_at(log: Path) -> float:
    """The wall-clock time of the worker's ``ready.`` log line (its log stamps milliseconds, local time)."""
    for line in log.read_text(errors="replace").splitlines():
        if line.endswith(" ready."):
            stamp = line[1:24]  # [2026-11-23 20:46:54,159: ...
            return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return float("nan")


def start_once(slots: int, work: Path) -> dict[str, float]:
    """One start and stop, in a folder of its own (a new socket path: no pooled connection is reused)."""
    began = time.perf_counter()
    folder = Path(tempfile.mkdtemp(dir=work))
    with EmbeddedCluster(folder, concurrency=slots) as cluster:
        app = create_app(load_settings(broker_url=cluster.start_redis()))
        redis_up = time.perf_counter() - began
        cluster.start_workers(app)
        ready = time.perf_counter() - began
        seen_lag = time.time() - ready_logged_at(folder / "worker.log")
        release_result_subscriptions(app)
        app.close()
        stopping = time.perf_counter()
    return {"startup_s": ready, "redis_answering_s": redis_up, "ready_seen_after_s": seen_lag,
            "stop_s": time.perf_counter() - stopping}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-start-") as tmp:
        for _ in range(args.runs):
            rows.append(start_once(args.slots, Path(tmp)))
            print(json.dumps({k: round(v, 3) for k, v in rows[-1].items()}), flush=True)
    startups = [r["startup_s"] for r in rows]
    table = "\n".join([
        MARK_BEGIN,
        f"Command: `{shlex.join(['python', 'bench/embedded_startup.py', *sys.argv[1:]])}` · {args.slots} slots, "
        f"{args.runs} runs · {os.cpu_count()} cores, Python {platform.python_version()}"
        + (f" · {args.note}" if args.note else ""),
        "",
        "| figure | seconds |",
        "|---|---:|",
        f"| start-up to consuming, median | **{statistics.median(startups):.2f}** |",
        f"| start-up, best / worst | {min(startups):.2f} / {max(startups):.2f} |",
        f"| of it until Redis answers, median | {statistics.median(r['redis_answering_s'] for r in rows):.2f} |",
        f"| worker logged `ready.` → start-up saw it, median "
        f"| {statistics.median(r['ready_seen_after_s'] for r in rows):.2f} |",
        f"| stop, median | {statistics.median(r['stop_s'] for r in rows):.2f} |",
        MARK_END,
    ])
    print(table)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, table, INTRO)


if __name__ == "__main__":
    main()
