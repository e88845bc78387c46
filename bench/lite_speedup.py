"""Parallel exploration angles: wall time of a 4-angle lite plan on 1 worker slot vs 4.

    .venv/bin/python bench/lite_speedup.py [--latency 1.0] [--write]

Every provider call (assessment, each angle, planning) sleeps a fixed latency
over the offline planner, so with one slot the four angles queue one behind
the other and with four they overlap. Start-up of the embedded broker and
workers is measured separately and left out of the plan's wall time.
``--write`` replaces the figures in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pydantic import SecretStr

from wfqueue.celery_app import create_app, release_result_subscriptions
from wfqueue.embedded import EmbeddedCluster
from wfqueue.lite.coordinator import LiteCoordinator, LiteRequest
from wfqueue.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENT = "Refactor the storage layer and authentication into a modular architecture"
MARK_BEGIN, MARK_END = "<!-- lite_speedup:begin -->", "<!-- lite_speedup:end -->"


class QuietUI:
    def info(self, message: str) -> None: ...
    def show_assessment(self, assessment) -> None: ...  # type: ignore[no-untyped-def]
    def progress(self, agents) -> None: ...  # type: ignore[no-untyped-def]
    def note(self, what: str, text: str) -> None: ...
    def done(self) -> None: ...
    def ask(self, batch, number, total):  # type: ignore[no-untyped-def]
        return ["" for _ in batch]
    def confirm_plan(self, tasks_path, draft):  # type: ignore[no-untyped-def]
        return "allow"
    def edit_tasks(self, tasks_path, problems) -> None: ...  # type: ignore[no-untyped-def]


def run(slots: int, latency: float, work: Path) -> dict[str, float]:
    repo = work / f"repo-{slots}"
    shutil.copytree(ROOT / "examples" / "sample-api", repo)
    script = work / "script.json"
    script.write_text(json.dumps({"latency_s": latency}))
    cluster = EmbeddedCluster(work / f"queue-{slots}", concurrency=slots)
    with cluster:
        started = time.perf_counter()
        settings = load_settings(broker_url=cluster.start_redis(), shared_disk=True)  # local workers
        app = create_app(settings)
        cluster.start_workers(app)
        startup = time.perf_counter() - started
        began = time.perf_counter()
        result = LiteCoordinator(settings.model_copy(update={"broker_url": SecretStr(cluster.redis.url)}),
                                 QuietUI()).run(LiteRequest(requirement=REQUIREMENT, repo=repo, yes=True,
                                                            provider=f"scripted:{script}"))
        wall = time.perf_counter() - began
        release_result_subscriptions(app)
    assert len(result.angles) == 4 and result.status == "completed", result
    return {"slots": slots, "startup_s": startup, "wall_s": wall, "angles": len(result.angles),
            "tasks": result.tasks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wfq-lite-bench-") as tmp:
        rows = [run(slots, args.latency, Path(tmp)) for slots in (1, 4)]
    for row in rows:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))
    one, four = rows
    lines = [
        MARK_BEGIN,
        f"Command: `{' '.join(['python bench/lite_speedup.py', *sys.argv[1:]])}`"
        f" · provider latency {args.latency:.2f}s per call · {os.cpu_count()} cores,"
        f" Python {platform.python_version()}",
        "",
        "| worker slots | angles | plan wall (s) | embedded start-up (s) | tasks |",
        "|---:|---:|---:|---:|---:|",
        *[f"| {r['slots']} | {r['angles']} | {r['wall_s']:.2f} | {r['startup_s']:.2f} | {r['tasks']} |" for r in rows],
        "",
        f"Speed-up of 4 slots over 1: {one['wall_s'] / four['wall_s']:.2f}x. Ideal walls: 1 slot "
        f"{6 * args.latency:.1f}s (assessment + 4 angles in a row + planning), 4 slots {3 * args.latency:.1f}s.",
        MARK_END,
    ]
    table = "\n".join(lines)
    print(table)
    if args.write:
        doc = ROOT / "docs" / "BENCHMARKS.md"
        text = doc.read_text(encoding="utf-8")
        if MARK_BEGIN not in text:
            text += ("\n## Lite plan: exploration angles in parallel\n\n`bench/lite_speedup.py` plans a High-complexity"
                     " change (4 angles) with one worker slot and with four.\n\n" + MARK_BEGIN + "\n" + MARK_END + "\n")
        start, end = text.index(MARK_BEGIN), text.index(MARK_END) + len(MARK_END)
        doc.write_text(text[:start] + table + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
