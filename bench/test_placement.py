"""Test placement on real history: does an offline plan extend the test file a real change extended?

    .venv/bin/python bench/test_placement.py MIRROR... [--cases 8] [--window 3000] [--jobs 2] [--write]

Each MIRROR is a git directory of a public project (bench/localize.py's). Per project, the commits
considered are the last ``--window`` first-parent, non-merge commits of HEAD with a real description (as
bench/localize.py filters them) that modify one or two existing source files and at least one existing test
module, adding or deleting no code file; ``--cases`` of them, evenly spread. A case plans the commit message
with the offline lite planner against the parent commit (its tree and its history up to there) and **hits**
when a test file the plan writes is one the commit modified. Also counted: plans that create a new test file
(the commit extended an existing one) and plans that name one of the commit's source files.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchdoc import write_section  # noqa: E402
from bench.localize import (  # noqa: E402
    counted,
    described_commits,
    evenly_spread,
    project_name,
    requirement_of,
)
from bench.replay import arguments, command_line, lite_files_at, table  # noqa: E402
from wfqueue.analysis import CODE_LANGUAGES  # noqa: E402
from wfqueue.analysis.files import is_test_path, language_for  # noqa: E402
from wfqueue.analysis.testmap import is_test_module  # noqa: E402

MARK_BEGIN, MARK_END = "<!-- test_placement:begin -->", "<!-- test_placement:end -->"
SECTION = """
## Test placement on real history

`bench/test_placement.py` replays real commits that changed one or two source files and extended an existing
test file: the offline lite plan of the commit message, at the parent commit, hits when it writes its tests in
a test file the commit modified.
"""


@dataclass
class Case:
    project: str
    commit: str
    parent: str
    requirement: str
    sources: list[str]
    tests: list[str]


@dataclass
class Outcome:
    case: Case
    planned_tests: list[str]
    created: bool  # the plan creates a test file
    source_hit: bool
    error: str = ""

    @property
    def hit(self) -> bool:
        return bool(set(self.planned_tests) & set(self.case.tests))


def select_cases(mirror: Path, cases: int, window: int) -> list[Case]:
    found: list[Case] = []
    for commit, parent, message, changes in described_commits(mirror, window):
        code = [(status, path) for status, path in (row for row in changes if len(row) == 2)
                if language_for(path) in CODE_LANGUAGES]
        sources = [path for status, path in code if not is_test_path(path) and counted(path)]
        tests = [path for status, path in code if is_test_path(path) and is_test_module(path)]
        if not 1 <= len(sources) <= 2 or not tests or any(status != "M" for status, _ in code):
            continue
        found.append(Case(project_name(mirror), commit, parent, requirement_of(message), sorted(sources),
                          sorted(tests)))
    return evenly_spread(found, cases)


def run_case(case: Case, mirror: Path) -> Outcome:
    try:
        files = lite_files_at(mirror, case.project, case.parent, case.requirement)
    except Exception as error:  # noqa: BLE001 - a case that cannot be planned is reported, not fatal
        return Outcome(case, [], False, False, error=f"{type(error).__name__}: {error}")
    tests = list(dict.fromkeys(f.path for f in files if is_test_path(f.path)))
    return Outcome(case, tests, any(f.action == "create" and is_test_path(f.path) for f in files),
                   bool({f.path for f in files} & set(case.sources)))


def markdown(outcomes: list[Outcome], command: str) -> str:
    done = [o for o in outcomes if not o.error]
    projects = sorted({o.case.project for o in outcomes})
    rows = []
    for project in [*projects, "all"]:
        group = [o for o in done if project in ("all", o.case.project)]
        if not group:
            continue
        hits = sum(o.hit for o in group)
        label = f"**{project}**" if project == "all" else project
        rows.append(f"| {label} | {len(group)} | **{hits}** ({hits / len(group):.0%}) | "
                    f"{sum(o.created for o in group)} | {sum(o.source_hit for o in group)} |")
    errors = len(outcomes) - len(done)
    return table(MARK_BEGIN, MARK_END, f"Command: `{command}` · planner: offline"
                 + (f" · {errors} cases could not be planned" if errors else ""),
                 ["project", "cases", "**the commit's test file planned**", "plan creates a test file",
                  "a changed source file planned"], rows)


def main() -> None:
    args = arguments(__doc__, cases=8, window=3000)
    cases = [(case, mirror) for mirror in args.mirrors for case in select_cases(mirror, args.cases, args.window)]
    outcomes: list[Outcome] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for outcome in pool.map(run_case, [c for c, _ in cases], [m for _, m in cases]):
            outcomes.append(outcome)
            case = outcome.case
            print(f"{'HIT ' if outcome.hit else 'MISS'} {case.project} {case.commit[:9]} "
                  f"{outcome.planned_tests[:2]} vs {case.tests[:2]}" + (f" ERROR {outcome.error}" if outcome.error
                                                                        else ""), file=sys.stderr)
    text = markdown(outcomes, command_line("test_placement.py", args))
    print(text)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, text, SECTION)


if __name__ == "__main__":
    main()
