"""Embedded start-up: a private Redis plus one local worker node with N pool slots, until it consumes.

    .venv/bin/python bench/embedded_startup.py [--configs prefork:4,threads:100+sdk] [--runs 5] [--write]

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
from pathlib import Path

from benchdoc import ready_logged_at, write_section
from remote_agents import group_rss_mb

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.embedded import EmbeddedCluster
from wfqueue.settings import load_settings

MARK_BEGIN = "<!-- embedded_startup:begin -->"
MARK_END = "<!-- embedded_startup:end -->"
INTRO = """
## Embedded start-up

`bench/embedded_startup.py`: Redis and one worker node (`python -m workers.serve`) with N slots of a pool,
from nothing to consuming its queues (what every plan command in embedded mode waits for), then stopped.
A worker for a remote provider (an API key set) loads the Anthropic SDK at start.
"""


def start_once(config: str, work: Path) -> dict[str, float]:
    """One start and stop, in a folder of its own (a new socket path: no pooled connection is reused).
    ``config`` is POOL:SLOTS, with ``+sdk`` for a worker that loads the Anthropic SDK (an API key is set)."""
    pool, _, rest = config.partition(":")
    slots, sdk = int(rest.split("+")[0]), rest.endswith("+sdk")
    began = time.perf_counter()
    folder = Path(tempfile.mkdtemp(dir=work))
    env = {"ANTHROPIC_API_KEY": "bench-key"} if sdk else {}
    with EmbeddedCluster(folder, concurrency=slots, pool=pool, worker_env=env) as cluster:  # type: ignore[arg-type]
        app = create_app(load_settings(broker_url=cluster.start_redis()))
        redis_up = time.perf_counter() - began
        cluster.start_workers(app)
        ready = time.perf_counter() - began
        seen_lag = time.time() - ready_logged_at(folder / "worker.log")
        assert cluster.workers is not None and cluster.workers.proc is not None
        resident = group_rss_mb(cluster.workers.proc.pid)
        release_result_subscriptions(app)
        app.close()
        stopping = time.perf_counter()
    return {"startup_s": ready, "redis_answering_s": redis_up, "ready_seen_after_s": seen_lag,
            "stop_s": time.perf_counter() - stopping, "resident_mb": resident}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="prefork:4,threads:4+sdk,threads:100+sdk",
                        help="comma-separated POOL:SLOTS[+sdk] (+sdk: the worker loads the Anthropic SDK)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    table = [
        MARK_BEGIN,
        f"Command: `{shlex.join(['python', 'bench/embedded_startup.py', *sys.argv[1:]])}` · {args.runs} runs each · "
        f"{os.cpu_count()} cores, Python {platform.python_version()}" + (f" · {args.note}" if args.note else ""),
        "",
        "| pool: slots | **start-up to consuming, median (s)** | best / worst (s) | until Redis answers (s) "
        "| `ready.` logged → seen (s) | resident once ready (MB) | stop (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="wfq-start-") as tmp:
        for config in args.configs.split(","):
            rows = []
            for _ in range(args.runs):
                rows.append(start_once(config, Path(tmp)))
                print(config, json.dumps({k: round(v, 3) for k, v in rows[-1].items()}), flush=True)
            startups = [r["startup_s"] for r in rows]

            def median(key: str, rows: list[dict[str, float]] = rows) -> float:
                return statistics.median(r[key] for r in rows)

            label = config.replace("+sdk", " (Anthropic SDK loaded)")
            table.append(f"| {label} | **{statistics.median(startups):.2f}** | {min(startups):.2f} / "
                         f"{max(startups):.2f} | {median('redis_answering_s'):.2f} "
                         f"| {median('ready_seen_after_s'):.2f} | {median('resident_mb'):.0f} "
                         f"| {median('stop_s'):.2f} |")
    table.append(MARK_END)
    text = "\n".join(table)
    print(text)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, text, INTRO)


if __name__ == "__main__":
    main()
