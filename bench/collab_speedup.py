"""How much parallel agents buy: collab-plan wall time against its critical path.

    .venv/bin/python bench/collab_speedup.py [--latency 1.0] [--agents 2,4,8,32] [--write]

Every provider call sleeps a fixed latency (a scripted provider over the offline
planner), so the ideal wall time of a plan is its critical path: understanding
+ one agent + the callback = 2 x latency. Also measured: embedded start-up
(Redis + workers answering a ping) and parse + conflict detection on a synthetic
100-agent, 10 000-task plan-note. ``--write`` replaces the figures in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pydantic import SecretStr

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.collab.conflicts import detect_conflicts
from wfqueue.collab.coordinator import CollabCoordinator, CollabRequest
from wfqueue.collab.note import parse_note
from wfqueue.collab.note_blocks import note_tasks
from wfqueue.embedded import EmbeddedCluster
from wfqueue.samples import make_service_repo, synthetic_note
from wfqueue.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
MARK_BEGIN = "<!-- collab_speedup:begin -->"
MARK_END = "<!-- collab_speedup:end -->"


class QuietUI:
    def info(self, message: str) -> None: ...
    def confirm_split(self, analysis):  # type: ignore[no-untyped-def]
        return "start"
    def progress(self, agents) -> None: ...  # type: ignore[no-untyped-def]
    def done(self) -> None: ...


def plan_once(agents: int, latency: float, work: Path) -> dict[str, float]:
    repo = make_service_repo(work / f"repo-{agents}", agents)
    script = work / f"script-{agents}.json"
    script.write_text(json.dumps({"latency_s": latency}))
    cluster = EmbeddedCluster(work / f"queue-{agents}", concurrency=agents)
    with cluster:
        started = time.perf_counter()
        settings = load_settings(broker_url=cluster.start_redis())
        app = create_app(settings)
        cluster.start_workers(app)
        startup = time.perf_counter() - started
        request = CollabRequest(requirement="Add per-user rate limiting to every service API request", repo=repo,
                                max_agents=agents, provider=f"scripted:{script}", yes=True)
        began = time.perf_counter()
        result = CollabCoordinator(settings.model_copy(update={"broker_url": SecretStr(cluster.redis.url)}),
                                   QuietUI()).run(request)
        wall = time.perf_counter() - began
        release_result_subscriptions(app)
    if result.status != "completed":
        raise SystemExit(f"{agents} agents: plan ended {result.status}")
    critical = 2 * latency
    serial = (agents + 1) * latency
    return {"agents": agents, "startup_s": startup, "wall_s": wall, "critical_s": critical,
            "overhead_per_agent_ms": 1000 * (wall - critical) / agents, "serial_s": serial,
            "speedup": serial / wall, "tasks": result.tasks}


def parse_benchmark(repeats: int = 3) -> dict[str, float]:
    text = synthetic_note(100, 100)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        tasks, _ = note_tasks(parse_note(text))
        conflicts = detect_conflicts(tasks, {})
        times.append(time.perf_counter() - began)
    return {"tasks": len(tasks), "conflicts": len(conflicts), "bytes": len(text.encode()),
            "median_s": statistics.median(times)}


def render(rows: list[dict[str, float]], parse: dict[str, float], latency: float, command: str) -> str:
    lines = [
        MARK_BEGIN,
        f"Command: `{command}` · provider latency {latency:.2f}s per call · "
        f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "",
        "| agents | embedded start-up (s) | plan wall (s) | critical path (s) | overhead / agent (ms) "
        "| serial provider time (s) | speed-up vs serial | tasks |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agents']} | {r['startup_s']:.2f} | {r['wall_s']:.2f} | {r['critical_s']:.2f} "
            f"| {r['overhead_per_agent_ms']:.0f} | {r['serial_s']:.1f} | {r['speedup']:.1f}x | {r['tasks']} |"
        )
    lines += [
        "",
        f"Parse + conflict detection, synthetic plan-note of 100 agents x 100 tasks "
        f"({parse['tasks']} tasks, {parse['bytes'] / 1e6:.1f} MB, {parse['conflicts']} conflicts): "
        f"median {parse['median_s']:.2f}s of 3 runs.",
        MARK_END,
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per provider call")
    parser.add_argument("--agents", default="2,4,8,32", help="comma-separated agent counts")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-bench-") as tmp:
        for agents in (int(a) for a in args.agents.split(",")):
            row = plan_once(agents, args.latency, Path(tmp))
            rows.append(row)
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    parse = parse_benchmark()
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in parse.items()}))
    command = "python bench/collab_speedup.py " + " ".join(sys.argv[1:])
    table = render(rows, parse, args.latency, command.strip())
    print(table)
    if args.write:
        doc = ROOT / "docs" / "BENCHMARKS.md"
        text = doc.read_text(encoding="utf-8")
        start, end = text.index(MARK_BEGIN), text.index(MARK_END) + len(MARK_END)
        doc.write_text(text[:start] + table + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
