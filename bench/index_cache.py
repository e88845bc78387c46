"""What the on-disk index cache saves each task after the first: building the index vs reading it back.

    .venv/bin/python bench/index_cache.py REPO [REPO ...] [--write]

For each repository (a working tree; it gets a ``.workflow/.cache/`` folder): the time to build the
index with no cache (what every task of a plan paid before), the first ``cached_index`` (build + store),
and later ones (manifest check + JSON load), median of 5 reads, then the one after a line is added to the first
indexed file (put back after): only that file is parsed again. ``--write`` replaces the figures in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchdoc import write_section  # noqa: E402
from wfqueue.analysis.index import build_index  # noqa: E402
from wfqueue.analysis.index_cache import cache_file, cached_index  # noqa: E402

BEGIN, END = "<!-- index_cache:begin -->", "<!-- index_cache:end -->"
INTRO = """
## Repository index: built once, read by every later task

`bench/index_cache.py` times, per repository, building the index with no cache (what every task of a
plan paid before the cache), the first `cached_index` (build and store), and a later one (check the
manifest of file sizes and times, load the JSON), which is what the agents and exploration angles that
follow the first step of a plan now pay, and the one after a line is added to one file (the first indexed
one, put back after). The repositories: a copy of `examples/sample-api` (no git), flask and pip as clones of
their git mirrors (`git clone --shared MIRROR /tmp/perf_repos/NAME`), so the build also reads their last 1500
commits for the history signal, and synth20k, a generated git repository of 20 006 small Python files.
"""


def measure(repo: Path) -> dict[str, float | int | str]:
    shutil.rmtree(repo / ".workflow" / ".cache", ignore_errors=True)
    began = time.perf_counter()
    index = build_index(repo)
    build = time.perf_counter() - began
    began = time.perf_counter()
    cached_index(repo)
    first = time.perf_counter() - began
    reads = []
    for _ in range(5):
        began = time.perf_counter()
        cached_index(repo)
        reads.append(time.perf_counter() - began)
    return {"repo": repo.name, "files": len(index.files), "build_s": build, "first_s": first,
            "read_s": statistics.median(reads), "edited_s": after_one_edit(repo, index.files[0].path),
            "cache_mb": cache_file(repo.resolve(), 512 * 1024).stat().st_size / 1e6}


def after_one_edit(repo: Path, rel: str) -> float:
    """The next ``cached_index`` after a line is added to ``rel``; the file is put back as it was after."""
    path = repo / rel
    text, stat = path.read_bytes(), path.stat()
    try:
        path.write_bytes(text + b"\n")
        began = time.perf_counter()
        cached_index(repo)
        return time.perf_counter() - began
    finally:
        path.write_bytes(text)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repos", nargs="+", type=Path)
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    parser.add_argument("--note", default="", help="said beside the command, e.g. that the machine was shared")
    args = parser.parse_args()
    rows = [measure(repo) for repo in args.repos]
    lines = [BEGIN, f"Command: `{shlex.join(['python', 'bench/index_cache.py', *sys.argv[1:]])}` · "
             f"{os.cpu_count()} cores, Python {platform.python_version()}" + (f" · {args.note}" if args.note else ""),
             "", "| repository | indexed files | build, no cache (s) | first task: build + store (s) "
             "| every later task: read (s) | after one file is edited: rebuild (s) | cache file (MB) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['repo']} | {r['files']} | {r['build_s']:.2f} | {r['first_s']:.2f} | {r['read_s']:.3f} "
              f"| {r['edited_s']:.2f} | {r['cache_mb']:.1f} |" for r in rows]
    lines.append(END)
    table = "\n".join(lines)
    print(table)
    if args.write:
        write_section(BEGIN, END, table, INTRO)


if __name__ == "__main__":
    main()
