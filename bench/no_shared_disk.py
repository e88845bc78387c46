"""A large repository planned by workers that cannot see it: the repository travels as a git bundle in Redis.

    .venv/bin/python bench/no_shared_disk.py [--mb 60] [--write] [--note TEXT]

Builds a git repository of about ``--mb`` MB (the sample API's code, generated modules, and incompressible
binary assets, all committed), starts a password-protected Redis and two `wfqueue worker` processes, each in
a mount namespace of its own where the repository's path is an empty tmpfs (as root; otherwise the run is
refused: without it the workers could read the repository in place). Then three collab-plans with the
offline planner: cold (the coordinator publishes the bundle, each worker fetches and checks it out), warm (the
same commit: nothing is published or fetched again), and the same plan with WFQUEUE_SHARED_DISK=true for
comparison (the workers then read the repository in place: here they cannot, so that run is done by a
worker without the tmpfs). ``--write`` replaces this section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchdoc import write_section

from wfqueue.embedded import EmbeddedRedis
from wfqueue.state import redis_client

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "sample-api"
REQUIREMENT = "Add per-user rate limiting to the API"
MARK_BEGIN = "<!-- no_shared_disk:begin -->"
MARK_END = "<!-- no_shared_disk:end -->"
INTRO = """
## A large repository, workers that cannot see it

`bench/no_shared_disk.py`: a git repository of about 60 MB, two workers whose mount namespace hides the
repository's path (an empty tmpfs), the coordinator on the host with the repository. The repository travels
as a git bundle through Redis; the plan files come back through Redis.

Cold: the coordinator pins the commit and stores its bundle in Redis; each worker downloads it, fetches it
into its cache's repository and writes a checkout, then builds its index there. Warm: the same commit again,
so nothing is published or fetched, and the checkouts' index caches are reused. Shared disk: the workers read
the repository in place (`WFQUEUE_SHARED_DISK=true`); that run starts with no index cache, so it is not
faster than the warm one. Redis memory is what the bundle (kept `WFQUEUE_BUNDLE_TTL_S`) and the sessions'
state and files use.
"""


def build_repository(folder: Path, megabytes: int, rng: random.Random) -> Path:
    repo = folder / "big-repo"
    shutil.copytree(SAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__", ".workflow", ".pytest_cache"))
    (repo / ".gitignore").write_text(".workflow/\n__pycache__/\n", encoding="utf-8")
    generated = repo / "notes_api" / "generated"
    generated.mkdir()
    (generated / "__init__.py").write_text("", encoding="utf-8")
    for n in range(300):  # source the planner indexes: ~3 MB of modules
        body = "\n\n".join(f"def handler_{n}_{k}(request):\n    return {{'id': {k}, 'status': 'ok{n}'}}"
                           for k in range(250))
        (generated / f"module_{n:03d}.py").write_text(f'"""Generated handlers {n}."""\n\n{body}\n', encoding="utf-8")
    assets = repo / "assets"
    assets.mkdir()
    while sum(p.stat().st_size for p in repo.rglob("*") if p.is_file()) < megabytes * 1024 * 1024:
        index = len(list(assets.iterdir()))
        (assets / f"blob-{index:03d}.bin").write_bytes(rng.randbytes(1024 * 1024))  # incompressible
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "Bench"],
                 ["config", "user.email", "bench@example.invalid"], ["add", "-A"], ["commit", "-qm", "initial"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo


def tree_mb(repo: Path) -> float:
    return sum(p.stat().st_size for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts) / 2**20


def start_worker(name: str, url: str, work: Path, hidden: Path | None) -> subprocess.Popen[bytes]:
    (work / name).mkdir(parents=True, exist_ok=True)
    worker = [sys.executable, "-m", "wfqueue.cli.main", "worker", "--hostname", f"{name}@%h", "--concurrency", "2",
              "--loglevel", "INFO"]
    command = worker if hidden is None else [
        "unshare", "--mount", "--propagation", "private", "sh", "-c",
        f"mount -t tmpfs wfq-hidden {shlex.quote(str(hidden))} && exec {shlex.join(worker)}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    env.update(WFQUEUE_BROKER_URL=url, WFQUEUE_WORKER_CACHE_DIR=str(work / name / "cache"))
    with (work / name / "worker.log").open("ab") as log:
        return subprocess.Popen(command, env=env, cwd=work / name, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def wait_ready(work: Path, names: list[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(" ready." in (work / n / "worker.log").read_text(errors="replace") for n in names):
            return
        time.sleep(0.1)
    raise SystemExit(f"workers not ready within {timeout_s}s")


def plan(repo: Path, url: str, **env_extra: str) -> tuple[float, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    env.update(WFQUEUE_BROKER_URL=url, **env_extra)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo", str(repo),
                           "--max-agents", "4", "-y", "--provider", "offline", "--json"],
                          env=env, capture_output=True, text=True, timeout=1200)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"collab-plan failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, json.loads(done.stdout)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=60)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise SystemExit("needs root and `unshare`: the workers' mount namespaces hide the repository from them")
    work = Path(tempfile.mkdtemp(prefix="wfq-bench-remote-"))
    procs: list[subprocess.Popen[bytes]] = []
    redis = EmbeddedRedis(work / "redis", password=secrets.token_hex(8))
    try:
        repo = build_repository(work, args.mb, random.Random(20261123))
        size = tree_mb(repo)
        redis.start()
        procs = [start_worker(name, redis.url, work, hidden=repo) for name in ("remote-a", "remote-b")]
        wait_ready(work, ["remote-a", "remote-b"])
        cold, first = plan(repo, redis.url)
        warm, _ = plan(repo, redis.url)
        client = redis_client(redis.url, 5)
        bundle = sum(int(client.strlen(k)) for k in client.scan_iter(match="wfq:bundle:*:chunk:*"))
        used = int(client.info("memory")["used_memory"])
        stop(procs)
        procs = [start_worker(name, redis.url, work, hidden=None) for name in ("shared-a", "shared-b")]
        wait_ready(work, ["shared-a", "shared-b"])
        shared, _ = plan(repo, redis.url, WFQUEUE_SHARED_DISK="true")
    finally:
        stop(procs)
        redis.stop()
    row = (f"| {size:.0f} MB ({bundle / 2**20:.0f} MB bundle) | {cold:.1f} s | {warm:.1f} s | {shared:.1f} s | "
           f"{used / 2**20:.0f} MB | {first['status']}, {first['tasks']} tasks |")
    table = "\n".join([
        MARK_BEGIN,
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores ({platform.python_version()})"
        + (f"; {args.note}" if args.note else "") + f": `{' '.join(['python', *sys.argv])}`",
        "",
        "| repository | cold plan (publish + fetch) | warm plan (same commit) | shared disk | Redis memory after |"
        " outcome |",
        "|---|---|---|---|---|---|",
        row,
        MARK_END,
    ])
    print(table)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, table, INTRO)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
