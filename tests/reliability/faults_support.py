"""Helpers of the reliability suite: standalone workers, process trees, plan checks, the figures file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock
from support import wfqueue_env

from wfqueue.collab.note import parse_note
from wfqueue.collab.note_blocks import note_tasks

REPORT_ENV = "WFQUEUE_RELIABILITY_REPORT"
# Read at import: the autouse clean_environment fixture removes every WFQUEUE_* variable before a test runs.
REPORT_PATH = os.environ.get(REPORT_ENV)


@dataclass
class Worker:
    """A `wfqueue worker` process (its own process group), with its log and working directory."""

    name: str
    proc: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self) -> bool:
        try:
            return " ready." in self.log.read_text(errors="replace")
        except OSError:
            return False


def start_worker(url: str, name: str, workdir: Path, concurrency: int = 2, pool: str | None = None,
                 **env: str) -> Worker:
    """`wfqueue worker` in a process group of its own; ``pool`` None: the one the settings choose."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wfqueue.cli.main", "worker", "--hostname", f"{name}@%h", "--concurrency",
             str(concurrency), "--loglevel", "INFO", *(["--pool", pool] if pool else [])],
            env=wfqueue_env(WFQUEUE_BROKER_URL=url, **env), cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    return Worker(name, proc, log)


def wait_ready(workers: list[Worker], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(w.ready() for w in workers):
            return
        for w in workers:
            if w.proc.poll() is not None:
                raise AssertionError(f"worker {w.name} exited at start:\n{w.log.read_text()[-2000:]}")
        time.sleep(0.1)
    raise AssertionError(f"workers not ready within {timeout_s}s: {[w.name for w in workers if not w.ready()]}")


def stop_group(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL what is left after the grace period."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # pool children outliving their parent
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (its prefork pool for a worker main process)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(found))


def group_members(pgid: int) -> list[int]:
    """Live processes in process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@dataclass
class NoteCheck:
    areas: list[str]
    tasks: int
    sections_lost: list[str] = field(default_factory=list)
    duplicate_tasks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def check_collab_session(folder: Path) -> NoteCheck:
    """Every sub-domain's two sections hold exactly its plan.json tasks; no task twice; the note parses."""
    analysis = json.loads((folder / "requirement-analysis.json").read_text(encoding="utf-8"))
    note = parse_note((folder / "plan-note.md").read_text(encoding="utf-8"))
    tasks, problems = note_tasks(note)
    ids = [t.id for t in tasks]
    check = NoteCheck(areas=[s["focus_area"] for s in analysis["sub_domains"]], tasks=len(tasks),
                      duplicate_tasks=sorted({i for i in ids if ids.count(i) > 1}), problems=[str(p) for p in problems])
    headings = note.front_matter.get("agent_sections") or {}
    for area in check.areas:
        pool_heading, evidence_heading = headings.get(area, ["?", "?"])
        pool, evidence = note.section(pool_heading), note.section(evidence_heading)
        plan_file = folder / "agents" / area / "plan.json"
        if not plan_file.is_file() or pool is None or evidence is None or evidence.body.strip().startswith("_"):
            check.sections_lost.append(area)  # missing, or still the template's placeholder
            continue
        expected = json.loads(plan_file.read_text(encoding="utf-8"))["task_ids"]
        if not expected or [t.id for t in tasks if t.area == area] != expected:
            check.sections_lost.append(area)
    return check


def write_report(section: str, figures: dict[str, Any]) -> None:
    """Print the figures; also merge them into the JSON file named by WFQUEUE_RELIABILITY_REPORT, if set."""
    print(f"\nreliability figures [{section}]: {json.dumps(figures, ensure_ascii=False)}")
    if not REPORT_PATH:
        return
    path = Path(REPORT_PATH)
    with FileLock(str(path) + ".lock", timeout=30):  # tests run in parallel (pytest -n)
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        data[section] = figures
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def running_agents(client: Any, session_id: str) -> list[dict[str, Any]]:
    """The agents of a session running now, each with its area, pid and worker (from Redis)."""
    found = []
    for key in client.scan_iter(match=f"wfq:{session_id}:agent:*"):
        record = {k: json.loads(v) for k, v in client.hgetall(key).items()}
        if record.get("state") == "running":
            found.append({"area": key.rsplit(":", 1)[-1], **record})
    return found


def attempts(client: Any, session_id: str) -> dict[str, int]:
    """How many times each area's plan_area task started (redeliveries count)."""
    return {key.rsplit(":", 1)[-1]: int(client.get(key) or 0)
            for key in client.scan_iter(match=f"wfq:{session_id}:attempts:*")}


def areas_retried_on_broker_loss(logs: list[Path]) -> set[str]:
    """The areas whose plan_area task the workers retried because Redis was away (Celery logs the retry
    with the task id, and the area with the id once the task succeeds)."""
    text = "\n".join(log.read_text(errors="replace") for log in logs)
    retried = set(re.findall(r"plan_area\[([0-9a-f-]+)\] retry: .*ConnectionError", text))
    return {area for task_id, area in re.findall(r"plan_area\[([0-9a-f-]+)\] succeeded in .*?'focus_area': '([^']+)'",
                                                  text) if task_id in retried}


def start_coordinator(url: str, requirement: str, repo: Path, provider: str, logs: Path) -> subprocess.Popen:
    """`wfqueue collab-plan` with four agents against the broker at ``url``, in a process group of its own, its
    stdout and stderr in ``logs``/stdout and ``logs``/stderr."""
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "stdout").open("wb") as out, (logs / "stderr").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", requirement, "--repo", str(repo),
             "--max-agents", "4", "-y", "--provider", provider, "--json"],
            env=wfqueue_env(WFQUEUE_BROKER_URL=url), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
            start_new_session=True)


def stop_plan(coordinator: subprocess.Popen | None, workers: list[Worker], redis: Any) -> None:
    """End what a reliability test started, whatever state it failed in: the coordinator and the workers (their
    process groups), then the broker."""
    if coordinator is not None:
        stop_group(coordinator)
    for worker in workers:
        stop_group(worker.proc)
    redis.stop()
