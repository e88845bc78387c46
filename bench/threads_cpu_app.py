"""The worker app of bench/threads_cpu.py (``celery -A threads_cpu_app worker``, run from bench/)."""

from __future__ import annotations

import os
import time

from celery import Celery

app = Celery("threads_cpu", broker=os.environ["THREADS_CPU_URL"], backend=os.environ["THREADS_CPU_URL"])
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1)


@app.task(name="threads_cpu.spin_then_wait")
def spin_then_wait(cpu_s: float) -> float:
    """When it started; then ``cpu_s`` of CPU (building a prompt) and 2 s of waiting (the model)."""
    started = time.time()
    until = time.thread_time() + cpu_s
    while time.thread_time() < until:
        pass
    time.sleep(2)
    return started
