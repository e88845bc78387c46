"""What the benches replaying real history share: the command line, and the offline lite plan of a commit's message
at its parent (bench/test_placement.py, bench/new_modules.py; bench/localize.py selects and checks out commits)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.localize import checkout, project_name
from wfqueue.analysis import build_index
from wfqueue.lite.angle_repair import repair_assessment
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.unified_task import TaskFile


def arguments(doc: str | None, cases: int, window: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mirrors", nargs="+", type=Path, help="git directories of the projects")
    parser.add_argument("--cases", type=int, default=cases, help="cases per project (of each kind)")
    parser.add_argument("--window", type=int, default=window, help="recent commits considered per project")
    parser.add_argument("--jobs", type=int, default=1, help="cases planned at once (processes)")
    parser.add_argument("--write", action="store_true", help="replace the figures in docs/BENCHMARKS.md")
    return parser.parse_args()


def lite_files_at(mirror: Path, project: str, parent: str, requirement: str) -> list[TaskFile]:
    """The files[] of the offline lite plan of ``requirement`` at ``parent``, with its tree and its history, as a
    user planning that change had them (assessed, the assessment repaired, planned; no exploration)."""
    with tempfile.TemporaryDirectory(prefix="wfq-replay-") as tmp:
        repo = Path(tmp) / project
        checkout(mirror, parent, repo)
        index = build_index(repo)
        assessment, _ = repair_assessment(assess(requirement, signals(index, requirement), False), requirement, False)
        draft = plan_tasks(index, requirement, "bench", assessment, [], [])
    return [f for task in draft.tasks for f in task.files]


def command_line(script: str, args: argparse.Namespace) -> str:
    """The bench's command as its figures name it: the projects by name, not their mirrors' paths."""
    return (f"python bench/{script} " + " ".join(f"<{project_name(m)}>" for m in args.mirrors)
            + f" --cases {args.cases} --window {args.window}")


def table(begin: str, end: str, headline: str, columns: list[str], rows: list[str]) -> str:
    """A bench's section of docs/BENCHMARKS.md: its markers around the command line and a table, the first column
    a project's name, the others figures (aligned right)."""
    return "\n".join([begin, headline, "", "| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1),
                      *rows, end])
