"""New modules on real history: does an offline plan create the module a real change added, and only then?

    .venv/bin/python bench/new_modules.py MIRROR... [--cases 6] [--window 4000] [--jobs 2] [--write]

Each MIRROR is a git directory of a public project (bench/localize.py's). Per project, among the last ``--window``
first-parent, non-merge commits of HEAD with a real description (bench/localize.py's filter): ``--cases`` commits
that add one to five product source files (not under a test, spec, benchmark or playground folder), delete none
and modify at most four; and ``--cases`` commits that only modify source files, adding none. Each is planned with
the offline lite planner from the commit message at the parent commit (its tree and its history). An adding commit
**hits** when the plan creates a source file in a folder where the commit added one; a modifying one counts a
**false creation** when the plan creates any source file.
"""

from __future__ import annotations

import posixpath
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchdoc import write_section  # noqa: E402
from bench.localize import (  # noqa: E402
    MAX_SOURCE_FILES,
    counted,
    described_commits,
    evenly_spread,
    is_test,
    project_name,
    requirement_of,
)
from bench.replay import arguments, command_line, lite_files_at, table  # noqa: E402
from wfqueue.analysis import CODE_LANGUAGES  # noqa: E402
from wfqueue.analysis.files import is_test_path, language_for  # noqa: E402

MARK_BEGIN, MARK_END = "<!-- new_modules:begin -->", "<!-- new_modules:end -->"
SECTION = """
## New modules on real history

`bench/new_modules.py` replays real commits that added a source file, and commits that only modified some: the
offline lite plan of the commit message, at the parent commit, should create a module where the commit added one,
and none where it added none.
"""
# Added files that are no product module: tests, specs, benchmarks, playgrounds, templates.
_NOT_PRODUCT = re.compile(r"(^|/)(spec|tests?|__tests\w*__|benchmarks?|playground|template-[\w-]+)/"
                          r"|_test\.go$|\.(spec|test)\.")
MAX_ADDED = 5


@dataclass
class Case:
    project: str
    commit: str
    parent: str
    requirement: str
    added: list[str]


@dataclass
class Outcome:
    case: Case
    created: list[str]
    error: str = ""

    @property
    def in_added_folder(self) -> bool:
        return bool({posixpath.dirname(p) for p in self.created} & {posixpath.dirname(p) for p in self.case.added})


def select_cases(mirror: Path, cases: int, window: int) -> tuple[list[Case], list[Case]]:
    adding: list[Case] = []
    modifying: list[Case] = []
    for commit, parent, message, changes in described_commits(mirror, window):
        code = [(status, path) for status, *paths in changes for path in paths[-1:]
                if language_for(path) in CODE_LANGUAGES and not is_test(path)]
        added = sorted(p for s, p in code if s == "A" and counted(p) and not _NOT_PRODUCT.search(p))
        modified = [p for s, p in code if s == "M" and counted(p)]
        any_added = any(row[0].startswith("A") and language_for(row[-1]) in CODE_LANGUAGES for row in changes)
        case = Case(project_name(mirror), commit, parent, requirement_of(message), added)
        if added and len(added) <= MAX_ADDED and not any(s == "D" for s, _ in code) and len(modified) <= 4:
            adding.append(case)
        elif not any_added and modified and len(code) <= MAX_SOURCE_FILES and all(s == "M" for s, _ in code):
            modifying.append(case)
    return evenly_spread(adding, cases), evenly_spread(modifying, cases)


def run_case(case: Case, mirror: Path) -> Outcome:
    try:
        files = lite_files_at(mirror, case.project, case.parent, case.requirement)
    except Exception as error:  # noqa: BLE001 - a case that cannot be planned is reported, not fatal
        return Outcome(case, [], error=f"{type(error).__name__}: {error}")
    return Outcome(case, list(dict.fromkeys(f.path for f in files if f.action == "create"
                                            and not is_test_path(f.path) and language_for(f.path) in CODE_LANGUAGES)))


def markdown(adding: list[Outcome], modifying: list[Outcome], command: str) -> str:
    rows = []
    for project in [*sorted({o.case.project for o in adding + modifying}), "all"]:
        add = [o for o in adding if not o.error and project in ("all", o.case.project)]
        mod = [o for o in modifying if not o.error and project in ("all", o.case.project)]
        label = f"**{project}**" if project == "all" else project
        rows.append(f"| {label} | {len(add)} | **{sum(o.in_added_folder for o in add)}** | "
                    f"{sum(bool(o.created) for o in add)} | {len(mod)} | **{sum(bool(o.created) for o in mod)}** |")
    errors = sum(bool(o.error) for o in adding + modifying)
    return table(MARK_BEGIN, MARK_END, f"Command: `{command}` · planner: offline, lite"
                 + (f" · {errors} cases could not be planned" if errors else ""),
                 ["project", "commits adding a module", "**plan creates one in its folder**", "plan creates any",
                  "commits adding none", "**plan creates one anyway**"], rows)


def main() -> None:
    args = arguments(__doc__, cases=6, window=4000)
    chosen = [(mirror, select_cases(mirror, args.cases, args.window)) for mirror in args.mirrors]
    jobs = [(case, mirror, kind) for mirror, (adding, modifying) in chosen
            for kind, cases in (("add", adding), ("modify", modifying)) for case in cases]
    outcomes: dict[str, list[Outcome]] = {"add": [], "modify": []}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for (case, _, kind), outcome in zip(jobs, pool.map(run_case, [c for c, _, _ in jobs],
                                                           [m for _, m, _ in jobs]), strict=True):
            outcomes[kind].append(outcome)
            print(f"{kind:6s} {case.project} {case.commit[:9]} created={outcome.created} added={case.added}"
                  + (f" ERROR {outcome.error}" if outcome.error else ""), file=sys.stderr)
    text = markdown(outcomes["add"], outcomes["modify"], command_line("new_modules.py", args))
    print(text)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, text, SECTION)


if __name__ == "__main__":
    main()
