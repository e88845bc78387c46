"""Localization on real history: does the planner plan the files a real change touched?

    .venv/bin/python bench/localize.py MIRROR... [--cases 6] [--jobs 2] [--provider offline|anthropic] [--write]

Each MIRROR is a git directory (bare or not) of a public project. Per project,
the commits considered are the last ``--window`` first-parent, non-merge
commits of HEAD whose message is a real description (subject of 20+
characters and 3+ meaningful words, not a release, version bump, revert,
typo, docs/CI/style/test/chore commit) and that modify 1-4 existing non-test source files, adding or deleting
none; ``--cases`` of them are taken evenly spread over that list. A case plans
the commit message (``(#123)`` and trailers removed) against the parent commit
(its tree and its history up to there), and is scored against the non-test source files the commit
modified (type declarations, build/CI configuration, scripts and examples left
out: they follow from the source change; tests by name or by role, such as a
``testsuite/`` package or ``index.test-d.ts``, are not source).

Per workflow (lite: assess, explore, plan; collab: understand, one area plan
per sub-domain) it reports recall, precision, the share of cases where every
answer file was planned and the files planned; beside them plain BM25 (file
text and path, no field weights, no structure) over the same candidate files
cut at the same count per case, and at 1, 3 and 5.

Projects are split once, here, into tuning and held-out (TUNING below); the
figures that count are the held-out ones. ``--provider anthropic`` measures the
Claude planner the same way when an API key is set. ``--write`` replaces the
figures in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from wfqueue.analysis import CODE_LANGUAGES, RepoIndex, bm25_scores, build_index, tokenize
from wfqueue.analysis.files import is_test_path, language_for
from wfqueue.analysis.roles import file_role
from wfqueue.collab.assemble import allocate
from wfqueue.lite.finding_checks import verify_findings
from wfqueue.lite.models import AngleFindings, VerifiedExploration
from wfqueue.providers import AssessStep, ExploreAngleStep, LitePlanStep, PlanAreaStep, UnderstandStep, make_provider
from wfqueue.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent
MARK_BEGIN, MARK_END = "<!-- localize:begin -->", "<!-- localize:end -->"
# Tuning projects: the planner's rules and weights were adjusted while looking at these; every other
# project is held out and reported separately (the figures that count for a change of the rules).
TUNING = frozenset({"rq", "click", "axios", "chalk", "httpx", "requests", "got", "express",
                    "flask", "commander.js", "attrs", "ky", "starlette", "jinja", "koa", "execa",
                    "marshmallow", "uvicorn", "pino", "yargs",
                    "gunicorn", "structlog", "jsonschema", "winston", "luxon", "node-fetch"})
MAX_SOURCE_FILES = 4
T = TypeVar("T")
RECALL_MARGIN = 0.05  # the targets: recall at least BM25's at the same count and BM25@5 + this ...
PRECISION_TARGET = 0.35  # ... and mean precision at least this
MIN_SUBJECT = 20
MIN_WORDS = 3  # distinct meaningful words in the subject: "Fix bug" says nothing to localize
MAX_AGENTS = 5
_SKIP_SUBJECT = re.compile(
    r"^\W*(release|bump|version|v?\d+\.\d+|merge|revert|prepare|docs?|ci|style|test|tests|chore|build|lint|"
    r"typo|format|deps|dependabot|update (changelog|readme|docs|dependencies|deps)|\[pre-commit)",
    re.IGNORECASE,
)
_TRAILER = re.compile(r"^(co-authored-by|signed-off-by|reviewed-by|fixes|closes|refs?):.*$",
                      re.IGNORECASE | re.MULTILINE)


@dataclass
class Case:
    project: str
    commit: str
    parent: str
    requirement: str
    answer: list[str]


@dataclass
class Score:
    planned: list[str]
    found: int
    total: int

    @property
    def recall(self) -> float:
        return self.found / self.total if self.total else 0.0

    @property
    def precision(self) -> float:
        return self.found / len(self.planned) if self.planned else 0.0

    @property
    def all_found(self) -> bool:
        return self.found == self.total


@dataclass
class Result:
    case: Case
    scores: dict[str, Score] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(mirror), *args], check=True, capture_output=True,
                          text=True, errors="replace").stdout


def project_name(mirror: Path) -> str:
    # /work/.mirror/rq+rq/repo -> rq ; ~/src/click.git -> click
    base = mirror.parent.name if mirror.name in ("repo", ".git") else mirror.name
    return base.split("+")[-1].removesuffix(".git")


def is_test(path: str) -> bool:
    """A test by the file scan's naming rules or by its role (``testsuite/``, ``index.test-d.ts``)."""
    return file_role(path, is_test_path(path)) == "test"


def counted(path: str) -> bool:
    """A file the answer (and the score) counts: non-test product source."""
    return language_for(path) in CODE_LANGUAGES and file_role(path, is_test_path(path)) == "source"


def requirement_of(message: str) -> str:
    text = _TRAILER.sub("", message)
    text = re.sub(r"\s*\(#\d+\)", "", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def described_commits(mirror: Path, window: int) -> Iterator[tuple[str, str, str, list[list[str]]]]:
    """The last ``window`` first-parent, non-merge commits of HEAD with one parent and a real description, newest
    first: (commit, parent, message, its ``--name-status`` rows against the parent, renames as A and D)."""
    log = git(mirror, "log", "--first-parent", "--no-merges", f"-{window}", "--format=%H %P%x00%B%x1e", "HEAD")
    for record in log.split("\x1e"):
        if "\x00" not in record:
            continue
        head, message = record.strip().split("\x00", 1)
        commit, *parents = head.split()
        subject = message.strip().splitlines()[0] if message.strip() else ""
        if (len(parents) != 1 or len(subject) < MIN_SUBJECT or _SKIP_SUBJECT.match(subject)
                or "typo" in subject.lower() or len(set(tokenize(subject))) < MIN_WORDS):
            continue
        yield commit, parents[0], message, [line.split("\t") for line in git(
            mirror, "diff-tree", "--no-commit-id", "-r", "--name-status", "--no-renames", parents[0],
            commit).splitlines()]


def evenly_spread(found: list[T], cases: int) -> list[T]:
    """``cases`` of ``found`` (newest first), evenly spread, oldest first: stable as the mirror grows."""
    found = found[::-1]
    if len(found) <= cases:
        return found
    step = len(found) / cases
    return [found[int(k * step + step / 2)] for k in range(cases)]


def select_cases(mirror: Path, cases: int, window: int) -> list[Case]:
    name = project_name(mirror)
    candidates: list[Case] = []
    for commit, parent, message, changes in described_commits(mirror, window):
        code = [(status, path) for status, *paths in changes for path in paths[-1:]
                if language_for(path) in CODE_LANGUAGES and not is_test(path)]
        answer = sorted(path for status, path in code if counted(path))
        if not answer or len(code) > MAX_SOURCE_FILES or any(status != "M" for status, _ in code):
            continue
        candidates.append(Case(name, commit, parent, requirement_of(message), answer))
    return evenly_spread(candidates, cases)


def checkout(mirror: Path, commit: str, into: Path, history: bool = True) -> None:
    """A repository at ``commit`` with its history up to there, as a user planning that change had it:
    the mirror's objects are borrowed (alternates), and no ref names a later commit. Without ``history``,
    the same files with no repository around them: the planner then ranks by the files' text only."""
    subprocess.run(["git", "init", "-q", str(into)], check=True)
    objects = Path(git(mirror, "rev-parse", "--path-format=absolute", "--git-path", "objects").strip())
    (into / ".git" / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    subprocess.run(["git", "-C", str(into), "checkout", "-q", "--detach", commit], check=True)
    if not history:
        shutil.rmtree(into / ".git")


def candidates_of(index: RepoIndex) -> list[str]:
    """The files either ranker may plan: every non-test code file."""
    return [f.path for f in index.files if f.language in CODE_LANGUAGES and not is_test(f.path)]


def plain_bm25(index: RepoIndex, root: Path, requirement: str) -> list[str]:
    docs = {path: tokenize(path.rsplit(".", 1)[0]) + tokenize((root / path).read_text(errors="replace"))
            for path in candidates_of(index)}
    scores = bm25_scores(tokenize(requirement), docs)
    return [p for p, s in sorted(scores.items(), key=lambda item: (-item[1], item[0])) if s > 0]


def score(planned: list[str], answer: list[str]) -> Score:
    # Every planned non-test code file counts, support files included: planning a build script is a miss.
    kept = [p for p in dict.fromkeys(planned) if language_for(p) in CODE_LANGUAGES and not is_test(p)]
    return Score(planned=kept, found=len(set(kept) & set(answer)), total=len(answer))


def plan_lite(provider, repo: str, requirement: str) -> list[str]:  # type: ignore[no-untyped-def]
    sid = "bench"
    assessment = provider.run(AssessStep(session_id=sid, repo=repo, requirement=requirement))
    explorations = []
    for angle in assessment.angles if assessment.needs_exploration else []:
        findings = provider.run(ExploreAngleStep(session_id=sid, repo=repo, requirement=requirement, angle=angle))
        assert isinstance(findings, AngleFindings)
        explorations.append(VerifiedExploration(findings=findings, checks=verify_findings(Path(repo), findings),
                                                provider=provider.name, timestamp=""))
    draft = provider.run(LitePlanStep(session_id=sid, repo=repo, requirement=requirement, assessment=assessment,
                                      explorations=explorations, answers=[]))
    return [f.path for task in draft.tasks for f in task.files]


def plan_collab(provider, repo: str, requirement: str) -> list[str]:  # type: ignore[no-untyped-def]
    sid = "bench"
    draft = provider.run(UnderstandStep(session_id=sid, repo=repo, requirement=requirement, max_agents=MAX_AGENTS))
    analysis = allocate(draft, sid, requirement, MAX_AGENTS)
    planned: list[str] = []
    for sub in analysis.sub_domains:
        area = provider.run(PlanAreaStep(session_id=sid, repo=repo, requirement=requirement, analysis=analysis,
                                         focus_area=sub.focus_area))
        planned += [f.path for task in area.tasks for f in task.files]
    return planned


def run_case(case: Case, mirror: Path, spec: str, history: bool = True) -> Result:
    result = Result(case)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wfq-localize-") as tmp:
        root = Path(tmp)
        checkout(mirror, case.parent, root, history)
        provider = make_provider(spec, load_settings())
        try:
            index = provider.index(str(root)) if hasattr(provider, "index") else build_index(root)
            ranked = plain_bm25(index, root, case.requirement)
            for k in (1, 3, 5):
                result.scores[f"bm25@{k}"] = score(ranked[:k], case.answer)
            for workflow, plan in (("lite", plan_lite), ("collab", plan_collab)):
                planned = score(plan(provider, str(root), case.requirement), case.answer)
                result.scores[workflow] = planned
                result.scores[f"bm25={workflow}"] = score(ranked[: len(planned.planned)], case.answer)
        except Exception as exc:  # noqa: BLE001 - one broken case must not hide the others' figures
            result.error = f"{type(exc).__name__}: {exc}"[:300]
    result.seconds = time.perf_counter() - started
    return result


COLUMNS = ("lite", "bm25=lite", "collab", "bm25=collab", "bm25@1", "bm25@3", "bm25@5")


def summary(results: list[Result]) -> dict[str, dict[str, float]]:
    done = [r for r in results if not r.error]
    table: dict[str, dict[str, float]] = {}
    for column in COLUMNS:
        scores = [r.scores[column] for r in done]
        n = len(scores) or 1
        table[column] = {"recall": sum(s.recall for s in scores) / n, "precision": sum(s.precision for s in scores) / n,
                         "all_found": sum(s.all_found for s in scores) / n,
                         "files": sum(len(s.planned) for s in scores) / n}
    return table


def verdict(table: dict[str, dict[str, float]]) -> str:
    """The issue's targets against this group's figures, to three decimals."""
    lite = table["lite"]
    needed = max(table["bm25=lite"]["recall"], table["bm25@5"]["recall"] + RECALL_MARGIN)
    met = {"recall": lite["recall"] >= needed, "precision": lite["precision"] >= PRECISION_TARGET}
    return (f"Targets: lite recall {lite['recall']:.3f} against {needed:.3f} needed (BM25 at the same count "
            f"{table['bm25=lite']['recall']:.3f}, BM25@5 {table['bm25@5']['recall']:.3f} + {RECALL_MARGIN}): "
            f"{'met' if met['recall'] else 'missed'}; precision {lite['precision']:.3f} against {PRECISION_TARGET}: "
            f"{'met' if met['precision'] else 'missed'}.")


def per_project(results: list[Result]) -> list[str]:
    lines = ["| project | cases | lite recall | lite precision | files planned | BM25@5 recall |",
             "|---|---:|---:|---:|---:|---:|"]
    for project in sorted({r.case.project for r in results}):
        mine = [r for r in results if r.case.project == project]
        table = summary(mine)
        lines.append(f"| {project} | {len(mine)} | {table['lite']['recall']:.2f} | {table['lite']['precision']:.2f} | "
                     f"{table['lite']['files']:.1f} | {table['bm25@5']['recall']:.2f} |")
    return [*lines, ""]


def markdown(groups: dict[str, list[Result]], spec: str, command: str) -> str:
    lines = [f"`{command}` — planner: `{spec}`.", ""]
    for label, results in groups.items():
        done = [r for r in results if not r.error]
        projects = sorted({r.case.project for r in results})
        lines += [f"**{label}** ({len(done)} cases from {', '.join(projects)}"
                  + (f"; {len(results) - len(done)} failed" if len(done) < len(results) else "") + ")", "",
                  "| ranker | recall | precision | all files found | files planned |", "|---|---|---|---|---|"]
        table = summary(results)
        for column, row in table.items():
            lines.append(f"| {column} | {row['recall']:.2f} | {row['precision']:.2f} | {row['all_found']:.2f} | "
                         f"{row['files']:.1f} |")
        lines += ["", verdict(table), ""]
        if label == "held-out":
            lines += per_project(done)
    lines.append("`bm25=lite` is plain BM25 cut at the number of files lite planned in that case (likewise collab).")
    return "\n".join(lines)


def write_docs(text: str) -> None:
    doc = ROOT / "docs" / "BENCHMARKS.md"
    current = doc.read_text(encoding="utf-8")
    block = f"{MARK_BEGIN}\n{text}\n{MARK_END}"
    if MARK_BEGIN in current:
        current = current[: current.index(MARK_BEGIN)] + block + current[current.index(MARK_END) + len(MARK_END):]
    else:
        current = current.rstrip("\n") + "\n\n## Localization on real history\n\n" + block + "\n"
    doc.write_text(current, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mirrors", nargs="+", type=Path, help="git directories of the projects")
    parser.add_argument("--cases", type=int, default=6, help="cases per project")
    parser.add_argument("--window", type=int, default=800, help="recent commits considered per project")
    parser.add_argument("--provider", choices=("offline", "anthropic"), default="offline")
    parser.add_argument("--only", default="", help="comma-separated projects to run (default: all)")
    parser.add_argument("--no-history", action="store_true",
                        help="replay each case without its git history (the commit's files alone)")
    parser.add_argument("--jobs", type=int, default=1, help="cases planned at once (processes)")
    parser.add_argument("--json", type=Path, help="write every case's planned files here")
    parser.add_argument("--write", action="store_true", help="replace the figures in docs/BENCHMARKS.md")
    args = parser.parse_args()
    if args.write and args.no_history:
        parser.error("--write records the planner as it runs, with the history: drop --no-history or --write")
    spec = args.provider
    if spec == "anthropic" and load_settings().anthropic_api_key is None:
        print("no API key (set ANTHROPIC_API_KEY or WFQUEUE_ANTHROPIC_API_KEY): measuring the offline planner only",
              file=sys.stderr)
        spec = "offline"
    only = {p for p in args.only.split(",") if p}
    cases = [(case, mirror) for mirror in args.mirrors if not only or project_name(mirror) in only
             for case in select_cases(mirror, args.cases, args.window)]
    results: list[Result] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for result in pool.map(run_case, [case for case, _ in cases], [mirror for _, mirror in cases],
                               [spec] * len(cases), [not args.no_history] * len(cases)):
            case = result.case
            results.append(result)
            marks = " ".join(f"{k}={len(s.planned)}/{s.found}" for k, s in result.scores.items() if "=" not in k
                             and not k.startswith("bm25@"))
            print(f"{case.project} {case.commit[:9]} {result.seconds:5.1f}s answer={len(case.answer)} {marks}"
                  + (f" ERROR {result.error}" if result.error else ""), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([{"project": r.case.project, "commit": r.case.commit,
                                          "requirement": r.case.requirement, "answer": r.case.answer,
                                          "error": r.error, "seconds": round(r.seconds, 2),
                                          "planned": {k: s.planned for k, s in r.scores.items()}}
                                         for r in results], indent=1))
    groups = {"held-out": [r for r in results if r.case.project not in TUNING],
              "tuning": [r for r in results if r.case.project in TUNING]}
    groups = {label: rs for label, rs in groups.items() if rs}
    command = ("bench/localize.py " + " ".join(f"<{project_name(m)}>" for m in args.mirrors) + f" --cases {args.cases}"
               + (f" --provider {spec}" if spec != "offline" else "") + (" --no-history" if args.no_history else ""))
    text = markdown(groups, spec, command)
    print(text)
    if args.write:
        write_docs(text)


if __name__ == "__main__":
    main()
