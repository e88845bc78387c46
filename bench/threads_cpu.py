"""Why 100 agents in one threads worker start seconds apart: each task's own CPU delays the next receive.

    .venv/bin/python bench/threads_cpu.py [--tasks 100] [--cpu 0,0.02,0.05]

A bare Celery app (not wfqueue's) on an embedded Redis, one worker with a threads pool of ``--tasks`` slots.
Each task spins ``cpu`` seconds of CPU, then sleeps 2 s (waiting on a model); the group of ``--tasks`` is
sent at once. Printed per CPU figure: how far apart the tasks started (first to last). With no CPU the pool
starts them all at once; the worker's main thread, which receives the messages, shares the interpreter lock
with the tasks it started, so the spread grows with the tasks' CPU.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from celery import Celery, group

from wfqueue.celery_app import release_result_subscriptions
from wfqueue.child_process import stop_process_group
from wfqueue.embedded import EmbeddedRedis

APP = Path(__file__).resolve().with_name("threads_cpu_app.py")


def app_for(url: str) -> Celery:
    app = Celery("threads_cpu", broker=url, backend=url)
    app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1)
    return app


def measure(app: Celery, tasks: int, cpu: float) -> float:
    result = group(app.signature("threads_cpu.spin_then_wait", (cpu,)) for _ in range(tasks)).apply_async()
    started: list[float] = result.get(timeout=300)
    return max(started) - min(started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--cpu", default="0,0.02,0.05", help="comma-separated CPU seconds per task")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wfq-threads-cpu-") as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis")
        redis.start()
        log = Path(tmp) / "worker.log"
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", APP.stem, "worker", "--pool", "threads", "--concurrency",
             str(args.tasks), "--without-gossip", "--without-mingle", "--loglevel", "INFO", "--logfile", str(log)],
            cwd=APP.parent, env={**os.environ, "THREADS_CPU_URL": redis.url}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (log.is_file() and " ready." in log.read_text()):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the worker did not start:\n{log.read_text() if log.is_file() else ''}")
                time.sleep(0.05)
            app = app_for(redis.url)
            for cpu in (float(c) for c in args.cpu.split(",")):
                spread = measure(app, args.tasks, cpu)
                print(f"{args.tasks} tasks, {cpu * 1000:.0f} ms CPU each: first to last start {spread:.2f} s "
                      f"({args.tasks * cpu:.1f} s of CPU in all)", flush=True)
            release_result_subscriptions(app)  # before Redis goes: results it waited on stop listening
        finally:
            stop_process_group(worker, signal.SIGTERM, 10)
            redis.stop()


if __name__ == "__main__":
    main()
