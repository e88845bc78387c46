"""How much parallel agents buy: collab-plan wall time against its measured critical path.

    .venv/bin/python bench/collab_speedup.py [--latency 1.0] [--agents 3,8] [--write]

Every provider call sleeps a fixed latency (a scripted provider over the offline planner). The
critical path is measured, not assumed: the understanding task's run time + the slowest agent
(``finished_at - started_at`` of the agent records the plan keeps in Redis) + the callback's run
time (the understanding and callback times come from the workers' Celery task events). Overhead
is wall - critical path: queueing, dispatch, polling, the coordinator's own work. Work inside the
tasks (the offline planner, building or reading the repository index, Redis and file writes) is
part of the critical path, reported beside the model latency on it. Also measured: embedded
start-up (Redis + workers answering a ping) and parse + conflict detection on a synthetic
100-agent, 10 000-task plan-note. ``--write`` replaces the figures in docs/BENCHMARKS.md.
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
import threading
import time
from pathlib import Path
from typing import Any

from celery import Celery
from pydantic import SecretStr

from wfqueue import keys
from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.collab.conflicts import detect_conflicts
from wfqueue.collab.coordinator import CollabCoordinator, CollabRequest
from wfqueue.collab.models import RequirementAnalysis
from wfqueue.collab.note import parse_note
from wfqueue.collab.note_blocks import note_tasks
from wfqueue.embedded import EmbeddedCluster
from wfqueue.samples import make_service_repo, synthetic_note
from wfqueue.settings import load_settings
from wfqueue.state import SessionState, redis_client
from wfqueue.task_names import COLLAB_FINALIZE, COLLAB_UNDERSTAND

ROOT = Path(__file__).resolve().parent.parent
MARK_BEGIN = "<!-- collab_speedup:begin -->"
MARK_END = "<!-- collab_speedup:end -->"


class QuietUI:
    def info(self, message: str) -> None: ...
    def confirm_split(self, analysis):  # type: ignore[no-untyped-def]
        return "start"
    def progress(self, agents) -> None: ...  # type: ignore[no-untyped-def]
    def note(self, what: str, text: str) -> None: ...
    def done(self) -> None: ...


class TaskEvents:
    """The workers' Celery task events (they run with ``--events``), captured on a thread: what each
    task was called, and how long it ran (the ``runtime`` of task-succeeded, timed by the worker)."""

    def __init__(self, app: Celery) -> None:
        self.names: dict[str, str] = {}
        self.runtimes: dict[str, float] = {}
        self.finished: list[str] = []  # task ids in the order they succeeded
        self._seen_any = threading.Event()
        self._connection = app.connection_for_read()
        self._receiver = app.events.Receiver(self._connection, handlers={"*": self._on_event})
        self._thread = threading.Thread(target=self._receiver.capture, kwargs={"limit": None, "wakeup": True},
                                        daemon=True)

    def _on_event(self, event: dict[str, Any]) -> None:
        self._seen_any.set()
        if event.get("name"):
            self.names[event["uuid"]] = event["name"]
        if event["type"] == "task-succeeded":
            self.runtimes[event["uuid"]] = float(event["runtime"])
            self.finished.append(event["uuid"])

    def __enter__(self) -> TaskEvents:
        self._thread.start()
        # wakeup=True asks every worker for a heartbeat once the receiver listens: the first event
        # says that nothing the plan does will be missed.
        if not self._seen_any.wait(30):
            raise SystemExit("no Celery events from the workers within 30s")
        return self

    def __exit__(self, *exc: object) -> None:
        self._receiver.should_stop = True
        self._thread.join(10)
        self._connection.release()

    def runtime_of(self, name: str, wait_s: float = 30.0) -> float:
        """Run time of the first task called ``name`` to succeed (the chord's callback, not a re-run);
        its event may trail the result the coordinator saw, so it is waited for."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            for task_id in list(self.finished):
                if self.names.get(task_id) == name:
                    return self.runtimes[task_id]
            time.sleep(0.05)
        raise SystemExit(f"no task-succeeded event for {name} within {wait_s:.0f}s")


def plan_once(agents: int, latency: float, work: Path) -> dict[str, Any]:
    repo = make_service_repo(work / f"repo-{agents}", agents)
    script = work / f"script-{agents}.json"
    script.write_text(json.dumps({"latency_s": latency}))
    cluster = EmbeddedCluster(work / f"queue-{agents}", concurrency=agents)
    with cluster:
        started = time.perf_counter()
        settings = load_settings(broker_url=cluster.start_redis(), shared_disk=True)  # local workers
        app = create_app(settings)
        cluster.start_workers(app)
        startup = time.perf_counter() - started
        request = CollabRequest(requirement="Add per-user rate limiting to every service API request", repo=repo,
                                max_agents=agents, provider=f"scripted:{script}", yes=True)
        with TaskEvents(app) as events:
            began = time.perf_counter()
            result = CollabCoordinator(settings.model_copy(update={"broker_url": SecretStr(cluster.redis.url)}),
                                       QuietUI()).run(request)
            wall = time.perf_counter() - began
            understand, callback = events.runtime_of(COLLAB_UNDERSTAND), events.runtime_of(COLLAB_FINALIZE)
        session_dir = Path(result.session_dir)
        analysis = RequirementAnalysis.model_validate_json((session_dir / "requirement-analysis.json").read_text())
        areas = [s.focus_area for s in analysis.sub_domains]
        client = redis_client(cluster.redis.url, connect_timeout_s=5)
        state = SessionState(client, result.session_id, settings.state_ttl_s)
        records = state.agents(areas)
        # The scripted provider sleeps once per step: the understanding (twice with a repair round), one agent.
        model_on_path = latency * (2 + (state.recall(keys.understanding_key(2)) is not None))
        client.close()
        release_result_subscriptions(app)
    if result.status != "completed":
        raise SystemExit(f"{agents} agents: plan ended {result.status}")
    agent_times = [float(r["finished_at"]) - float(r["started_at"]) for r in records.values()]
    critical = understand + max(agent_times) + callback
    serial_work = understand + sum(agent_times) + callback
    return {"agents": len(areas), "asked": agents, "startup_s": startup, "wall_s": wall, "understand_s": understand,
            "slowest_agent_s": max(agent_times), "callback_s": callback, "critical_s": critical,
            "model_on_path_s": model_on_path, "in_task_work_s": critical - model_on_path,
            "overhead_s": wall - critical, "wall_over_critical": wall / critical, "serial_work_s": serial_work,
            "speedup": serial_work / wall, "tasks": result.tasks}


def parse_benchmark(repeats: int = 7) -> dict[str, float]:
    """Wall and CPU time (the process's own: less disturbed when the machine is shared) of parsing the
    note and detecting its conflicts."""
    text = synthetic_note(100, 100)
    walls, cpus = [], []
    for _ in range(repeats):
        began, cpu = time.perf_counter(), time.process_time()
        tasks, _ = note_tasks(parse_note(text))
        conflicts = detect_conflicts(tasks, {})
        walls.append(time.perf_counter() - began)
        cpus.append(time.process_time() - cpu)
    return {"tasks": len(tasks), "conflicts": len(conflicts), "bytes": len(text.encode()),
            "median_s": statistics.median(walls), "best_s": min(walls), "cpu_median_s": statistics.median(cpus),
            "runs": repeats}


def render(rows: list[dict[str, Any]], parse: dict[str, float], latency: float, command: str, note: str) -> str:
    lines = [
        MARK_BEGIN,
        f"Command: `{command}` · provider latency {latency:.2f}s per call · "
        f"{os.cpu_count()} cores, Python {platform.python_version()}" + (f" · {note}" if note else ""),
        "",
        "| agents (--max-agents) | embedded start-up (s) | plan wall (s) | understanding (s) | slowest agent (s) "
        "| callback (s) "
        "| **critical path (s)** | of it model latency (s) | of it work in tasks (s) | **overhead = wall - path (s)** "
        "| **wall / path** | all tasks' work (s) | speed-up vs serial | tasks |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agents']} ({r['asked']}) | {r['startup_s']:.2f} | {r['wall_s']:.2f} | {r['understand_s']:.2f} "
            f"| {r['slowest_agent_s']:.2f} | {r['callback_s']:.2f} | **{r['critical_s']:.2f}** "
            f"| {r['model_on_path_s']:.2f} | {r['in_task_work_s']:.2f} | **{r['overhead_s']:.2f}** "
            f"| **{r['wall_over_critical']:.2f}** | {r['serial_work_s']:.1f} | {r['speedup']:.1f}x | {r['tasks']} |"
        )
    lines += [
        "",
        f"Parse + conflict detection, synthetic plan-note of 100 agents x 100 tasks "
        f"({parse['tasks']} tasks, {parse['bytes'] / 1e6:.1f} MB, {parse['conflicts']} conflicts): "
        f"median {parse['median_s']:.3f}s of {parse['runs']} runs (best {parse['best_s']:.3f}s; "
        f"CPU time median {parse['cpu_median_s']:.3f}s).",
        MARK_END,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per provider call")
    parser.add_argument("--agents", default="3,8", help="comma-separated agent counts")
    parser.add_argument("--parse-only", action="store_true", help="only the plan-note parse figure (prints it)")
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    if args.parse_only:
        print(json.dumps(parse_benchmark()))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-bench-") as tmp:
        for agents in (int(a) for a in args.agents.split(",")):
            row = plan_once(agents, args.latency, Path(tmp))
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    parse = parse_benchmark()
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in parse.items()}))
    command = shlex.join(["python", "bench/collab_speedup.py", *sys.argv[1:]])
    table = render(rows, parse, args.latency, command.strip(), args.note)
    print(table)
    if args.write:
        doc = ROOT / "docs" / "BENCHMARKS.md"
        text = doc.read_text(encoding="utf-8")
        start, end = text.index(MARK_BEGIN), text.index(MARK_END) + len(MARK_END)
        doc.write_text(text[:start] + table + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
