"""Agents that wait on a remote model: memory, start-up and wall / critical path, per worker pool.

    .venv/bin/python bench/remote_agents.py [--agents 8,100] [--pools threads,prefork] [--latency 2.0] [--write]

A collab-plan with the anthropic provider (the real SDK in the workers) against the local fake Messages
API of tests/fake_anthropic.py, answered by the scripted model of bench/cache_share.py: the understanding
splits a generated repository into one sub-domain per package, each agent makes one ``read`` call and
then answers. Every answer is held ``--latency`` seconds, as a model takes time to write it; the server
answers requests on threads of its own, so any number wait at once. Embedded mode: a private Redis and one
worker node of N slots in the chosen pool (``threads``: what wfqueue picks for a remote provider).

Figures per row: embedded start-up (Redis and the worker node consuming), the worker node's resident
memory (every process of its process group: with prefork the parent and its N children) once ready and at
its peak during the plan (sampled every 0.1 s), and the plan timed as bench/collab_speedup.py times it:
critical path = the understanding task's run time + the slowest agent + the callback's run time, from the
workers' task events and the agents' own records; overhead = wall - critical path. ``--write`` puts the
table in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/fake_anthropic.py is imported as tests.fake_anthropic

from pydantic import SecretStr  # noqa: E402

from bench.benchdoc import write_section  # noqa: E402
from bench.cache_share import REQUIREMENT, model  # noqa: E402
from bench.collab_speedup import QuietUI, TaskEvents  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, Outcome  # noqa: E402
from tests.fake_anthropic_limits import RateLimits  # noqa: E402
from wfqueue.celery_app import create_app, release_result_subscriptions  # noqa: E402
from wfqueue.collab.coordinator import CollabCoordinator, CollabRequest  # noqa: E402
from wfqueue.collab.models import RequirementAnalysis  # noqa: E402
from wfqueue.embedded import EmbeddedCluster  # noqa: E402
from wfqueue.samples import make_service_repo  # noqa: E402
from wfqueue.settings import load_settings  # noqa: E402
from wfqueue.state import SessionState, redis_client  # noqa: E402
from wfqueue.task_names import COLLAB_FINALIZE, COLLAB_UNDERSTAND  # noqa: E402

MARK_BEGIN, MARK_END = "<!-- remote_agents:begin -->", "<!-- remote_agents:end -->"
CALLS_ON_PATH = 3  # the understanding, then the slowest agent's read turn and its answer
# Rate limits the fake announces, far above what 100 agents send: the workers pace to announced limits (as they
# must), and this benchmark measures orchestration, not an organisation's token budget.
UNBINDING = RateLimits(requests_per_min=1_000_000, input_tokens_per_min=1_000_000_000,
                       output_tokens_per_min=100_000_000)
SECTION = """
## Agents waiting on a remote model: memory and start-up per worker pool

`bench/remote_agents.py` runs a collab-plan with `--provider anthropic` (real SDK, embedded Redis, one worker
node) against the fake Messages API of `tests/fake_anthropic.py`, each answer held a fixed latency, on a
generated repository with one package per agent. Memory is the worker node's whole process group (with
prefork, the parent and one child per slot), once ready and at its peak during the plan. The critical path is
measured as in the collaborative-plan table: understanding + slowest agent + callback, from the workers' task
events and the agents' records; overhead = wall - critical path.
"""


class SlowModel(FakeAnthropic):
    """The fake API whose every complete answer takes ``latency`` seconds, outside the server's lock."""

    def __init__(self, latency: float) -> None:
        super().__init__(model, limits=UNBINDING)
        self.latency = latency

    def deliver(self, handler: BaseHTTPRequestHandler, outcome: Outcome) -> None:
        time.sleep(self.latency)  # the model writing its answer; other requests are served meanwhile
        super().deliver(handler, outcome)


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in process group ``pgid`` (the worker node and its pool)."""
    total_kb = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # after the state and the ppid: pgrp
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total_kb / 1024


class PeakSampler:
    """Samples a process group's resident memory every 0.1 s on a thread; ``peak_mb`` is the largest seen."""

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, group_rss_mb(self.pgid))
            self._stop.wait(0.1)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def plan_once(agents: int, pool: str, latency: float, work: Path) -> dict[str, Any]:
    repo = make_service_repo(work / f"repo-{pool}-{agents}", agents)
    with SlowModel(latency) as fake:
        env = {"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": fake.base_url, "NO_PROXY": "127.0.0.1"}
        cluster = EmbeddedCluster(work / f"queue-{pool}-{agents}", concurrency=agents, worker_env=env,
                                  pool=pool)  # type: ignore[arg-type]
        with cluster:
            started = time.perf_counter()
            settings = load_settings(broker_url=cluster.start_redis(), anthropic_api_key="bench-key", shared_disk=True,
                                     worker_pool=pool)
            app = create_app(settings)
            cluster.start_workers(app)
            startup = time.perf_counter() - started
            assert cluster.workers is not None and cluster.workers.proc is not None
            pgid = cluster.workers.proc.pid  # started in a session of its own: its pid is the group's id
            ready_mb = group_rss_mb(pgid)
            request = CollabRequest(requirement=REQUIREMENT, repo=repo, max_agents=agents, provider="anthropic",
                                    yes=True)
            with TaskEvents(app) as events, PeakSampler(pgid) as sampler:
                began = time.perf_counter()
                result = CollabCoordinator(settings.model_copy(update={"broker_url": SecretStr(cluster.redis.url)}),
                                           QuietUI()).run(request)
                wall = time.perf_counter() - began
                understand, callback = events.runtime_of(COLLAB_UNDERSTAND), events.runtime_of(COLLAB_FINALIZE)
            analysis = RequirementAnalysis.model_validate_json(
                (Path(result.session_dir) / "requirement-analysis.json").read_text())
            client = redis_client(cluster.redis.url, connect_timeout_s=5)
            records = SessionState(client, result.session_id, settings.state_ttl_s).agents(
                [s.focus_area for s in analysis.sub_domains])
            client.close()
            release_result_subscriptions(app)
    if result.status != "completed":
        raise SystemExit(f"{agents} agents ({pool}): plan ended {result.status}")
    durations = [float(r["finished_at"]) - float(r["started_at"]) for r in records.values()]
    starts = [float(r["started_at"]) for r in records.values()]
    slowest = max(durations)
    critical = understand + slowest + callback
    return {"pool": pool, "agents": len(records), "startup_s": startup, "ready_mb": ready_mb,
            "peak_mb": sampler.peak_mb, "wall_s": wall, "critical_s": critical,
            "model_on_path_s": CALLS_ON_PATH * latency, "overhead_s": wall - critical,
            "wall_over_critical": wall / critical, "calls": len(fake.calls),
            "mean_agent_s": sum(durations) / len(durations), "start_spread_s": max(starts) - min(starts)}


def render(rows: list[dict[str, Any]], latency: float, command: str, note: str) -> str:
    lines = [
        MARK_BEGIN,
        f"Command: `{command}` · model latency {latency:.2f}s per answer · {os.cpu_count()} cores, "
        f"Python {platform.python_version()}" + (f" · {note}" if note else ""),
        "",
        "| pool | agents | embedded start-up (s) | worker memory ready (MB) | **worker memory peak (MB)** "
        "| plan wall (s) | **critical path (s)** | of it model latency (s) | **overhead (s)** | **wall / path** "
        "| mean agent (s) | first → last agent start (s) | API calls |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['pool']} | {r['agents']} | {r['startup_s']:.2f} | {r['ready_mb']:.0f} | **{r['peak_mb']:.0f}** "
            f"| {r['wall_s']:.2f} | **{r['critical_s']:.2f}** | {r['model_on_path_s']:.2f} | **{r['overhead_s']:.2f}** "
            f"| **{r['wall_over_critical']:.2f}** | {r['mean_agent_s']:.2f} | {r['start_spread_s']:.2f} "
            f"| {r['calls']} |")
    lines.append(MARK_END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", default="8,100", help="comma-separated agent counts (at most 100)")
    parser.add_argument("--pools", default="threads", help="comma-separated: threads, prefork")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds each answer is held")
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-remote-") as tmp:
        for pool in args.pools.split(","):
            for agents in (int(a) for a in args.agents.split(",")):
                rows.append(plan_once(agents, pool, args.latency, Path(tmp)))
                print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}),
                      flush=True)
    table = render(rows, args.latency, shlex.join(["python", "bench/remote_agents.py", *sys.argv[1:]]), args.note)
    print(table)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, table, SECTION)


if __name__ == "__main__":
    main()
