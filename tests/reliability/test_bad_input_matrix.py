"""Bad input through the CLI, for every command it concerns.

Each case must end with the documented exit code (2 for bad input, 3 for an unreachable broker), a message
that names the problem, no traceback, and nothing written under the repository's `.workflow/` (or, where
a session exists, its files byte-identical). Each test reports the inputs it tried and the clean errors.

Each matrix sends one case through the real CLI in a subprocess (`python -m wfqueue.cli.main ...`), so
every exit path (a refused input, a usage error, an unreachable broker, a broker that is not Redis) is
proven end to end. The other cases, and the inputs the OS cannot pass in argv (NUL bytes), go through the
same entry point, ``wfqueue.cli.main.main(argv)``, inside the test process: a CLI process costs one to two
seconds of CPU, and this suite shares two cores with the rest of `make test`. An exception escaping
``main`` counts as a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from faults_support import write_report
from support import CliRun, processes_mentioning, run_cli, run_cli_in_process, session_dir, wfqueue_env

from tests.fake_anthropic import FakeAnthropic, Reply, answer, text
from tests.wfs_factory import make_session, task
from wfqueue.collab.note import parse_note, render_note
from wfqueue.collab.note_blocks import note_tasks
from wfqueue.embedded import EmbeddedRedis
from wfqueue.settings_checks import mask_url
from wfqueue.tasks_file import dump_jsonl, parse_jsonl

pytestmark = pytest.mark.integration
PASSWORD = "s3cret-Pa55word"


@dataclass
class Case:
    args: tuple[str, ...]
    expect: str  # a regular expression the error output (stderr, or stdout for validate) must match
    code: int = 2
    settings: dict[str, str] = field(default_factory=dict)  # WFQUEUE_* environment
    max_seconds: float | None = None
    in_process: bool = False


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every folder under ``folder`` (empty when it does not exist)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


class Runner:
    """Runs cases: subprocesses three at a time, in-process ones one after another with captured output."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        self.capsys = capsys
        self.monkeypatch = monkeypatch

    def subprocess(self, case: Case) -> CliRun:
        return run_cli(*case.args, env=wfqueue_env(**case.settings), timeout=60)

    def in_process(self, case: Case) -> CliRun:
        return run_cli_in_process(self.capsys, self.monkeypatch, *case.args, env=case.settings)

    def __call__(self, cases: list[Case]) -> list[tuple[Case, CliRun]]:
        outside = [c for c in cases if not c.in_process]
        with ThreadPoolExecutor(3) as pool:
            ran = dict(zip(map(id, outside), pool.map(self.subprocess, outside), strict=True))
        ran.update((id(c), self.in_process(c)) for c in cases if c.in_process)
        return [(c, ran[id(c)]) for c in cases]


@pytest.fixture
def run_cases(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Runner:
    return Runner(capsys, monkeypatch)


def verdict(case: Case, run: CliRun) -> str | None:
    """None for a clean error, else what is wrong with it."""
    output = run.stdout + run.stderr
    if "Traceback" in output:
        return f"traceback: {output[-800:]}"
    if run.code != case.code:
        return f"exit {run.code}, expected {case.code}: {output[-500:]}"
    if not re.search(case.expect, run.stdout if case.args[0] == "validate" and case.code == 2 and not
                     run.stderr.strip() else run.stderr):
        return f"message does not match {case.expect!r}: {output[-500:]}"
    if PASSWORD in output:
        return "the broker password was printed"
    if "--json" in case.args and (problem := json_verdict(case, run)) is not None:
        return problem
    if case.max_seconds is not None and run.seconds >= case.max_seconds:
        return f"took {run.seconds:.1f}s, {case.max_seconds:.0f}s allowed"
    return None


def json_verdict(case: Case, run: CliRun) -> str | None:
    """A ``--json`` command's stdout is one JSON object also when it refused its input: the error, its exit code
    and hint (validate's own object lists its problems)."""
    try:
        printed = json.loads(run.stdout)
    except ValueError:
        return f"--json printed no JSON object on stdout: {run.stdout[-300:]!r}"
    if case.args[0] == "validate" and "problems" in printed:
        return None
    wanted = {"status": "error", "exit_code": case.code}
    if {k: printed.get(k) for k in wanted} != wanted or not re.search(case.expect.removeprefix("error: "),
                                                                      printed.get("error") or ""):
        return f"--json printed {printed!r}, not the error {case.expect!r} with exit {case.code}"
    return None


def check_matrix(name: str, results: list[tuple[Case, CliRun]], extra: dict[str, Any] | None = None) -> None:
    failures = {" ".join(a if len(a) < 60 else a[:40] + "..." for a in case.args): problem
                for case, run in results if (problem := verdict(case, run)) is not None}
    write_report(f"bad_input_{name}", {
        "inputs_tried": len(results), "clean_errors": len(results) - len(failures),
        "through_a_cli_process": sum(not c.in_process for c, _ in results), **(extra or {})})
    assert failures == {}


@pytest.fixture
def wfs_repo(tmp_path: Path, sample_repo: Path) -> Path:
    """A second copy of the sample repository with one workflow session (for verify, replan, plan --session)."""
    repo = tmp_path / "wfs-repo"
    shutil.copytree(sample_repo, repo)
    make_session(repo, "Add per-user rate limiting", [task(1, "limits", ["notes_api/api/middleware.py"]),
                                                      task(2, "wire in", ["notes_api/api/router.py"], [1])])
    return repo


# -- session ids -------------------------------------------------------------------------------------------


def test_bad_session_ids_are_refused_by_every_command(run_cases: Runner, sample_repo: Path, wfs_repo: Path) -> None:
    repo, wfs = str(sample_repo), str(wfs_repo)
    before = snapshot(wfs_repo / ".workflow")
    expect = r"error: invalid session id '.*': use letters, digits"
    nul = r"error: session id contains a NUL byte"
    ids = [("../escape", expect), ("/etc/passwd", expect), ("a" * 300, expect), ("CPLAN-x/../../../etc", expect),
           ("/tmp", expect), ("CPLAN-a\x00b", nul)]  # the OS cannot pass a NUL byte in argv: in-process only
    cases = []
    for sid, message in ids:
        cases += [Case(args, message, in_process=True) for args in (
            ("status", sid, "--repo", repo), ("resume", sid, "--repo", repo),
            ("verify", "--session", sid, "--repo", wfs),
            ("replan", "drop the cache", "--session", sid, "--repo", wfs, "-y"),
            ("plan", "--session", sid, "--repo", wfs, "-y"))]
    cases[0].in_process = False  # `status ../escape` through a CLI process
    results = run_cases(cases)
    long_shown = [run.stderr for case, run in results if "a" * 300 in case.args]
    assert all("a" * 300 not in err and "..." in err for err in long_shown), "a 300-character id is echoed whole"
    assert not (sample_repo / ".workflow").exists(), "a refused session id wrote under .workflow/"
    assert snapshot(wfs_repo / ".workflow") == before, "a refused session id changed the workflow session"
    check_matrix("session_ids", results)


# -- --repo ------------------------------------------------------------------------------------------------


def test_a_repo_that_does_not_exist_or_is_a_file_is_refused(run_cases: Runner, sample_repo: Path,
                                                            tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-repo.txt"
    a_file.write_text("a file\n")
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(unified("TASK-001", "limits", "notes_api/api/middleware.py")) + "\n")
    missing = tmp_path / "no" / "such" / "repo"
    cases = []
    for bad, expect in ((str(missing), r"error: --repo .*: no such directory"),
                        (str(a_file), r"error: --repo .*: is a file, not a directory")):
        cases += [Case(args, expect, in_process=True) for args in (
            ("collab-plan", "Add per-user rate limiting", "--repo", bad, "-y"),
            ("lite-plan", "Add per-user rate limiting", "--repo", bad, "-y"),
            ("plan", "Add per-user rate limiting", "--repo", bad, "-y"), ("status", "--repo", bad),
            ("resume", "CPLAN-x", "--repo", bad), ("verify", "--repo", bad),
            ("replan", "drop the cache", "--repo", bad, "-y"), ("validate", str(tasks_file), "--repo", bad))]
    cases[0].in_process = False  # `collab-plan --repo MISSING` through a CLI process
    results = run_cases(cases)
    assert not missing.parent.exists(), "a missing --repo was created"
    assert a_file.read_text() == "a file\n"
    assert not (sample_repo / ".workflow").exists()
    check_matrix("repo", results)


# -- requirements -----------------------------------------------------------------------------------------


def test_empty_huge_binary_and_unreadable_requirements_are_refused(run_cases: Runner, sample_repo: Path,
                                                                   wfs_repo: Path, tmp_path: Path) -> None:
    huge = tmp_path / "huge.md"
    huge.write_bytes(b"Add rate limiting.\n" * (5 * 1024 * 1024 // 19 + 1))  # 5 MB
    binary = tmp_path / "diagram.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    latin1 = tmp_path / "latin1.md"
    latin1.write_bytes("Ajouter une limite de débit par utilisateur".encode("latin-1"))
    kinds = {
        "": r"error: the requirement is empty",
        str(huge): r"error: requirement file .*huge\.md is \d+ bytes, above the 1048576-byte limit",
        str(binary): r"error: requirement file .*diagram\.md is binary",
        "   \n\t ": r"error: the requirement is empty",
        str(latin1): r"error: requirement file .*latin1\.md is not UTF-8",
        str(tmp_path / "missing.md"): r"error: requirement file .*missing\.md does not exist",
        "Add rate\x00limiting": r"error: the requirement contains a NUL byte",
        # No word to plan from: it was planned into tasks of the planner's own invention.
        "🚀🚀🚀 !!!": r"error: the requirement has no words",
    }
    repo, wfs = str(sample_repo), str(wfs_repo)
    before = snapshot(wfs_repo / ".workflow")
    cases = []
    for value, expect in kinds.items():
        plan_expect = r"error: nothing to plan" if value == "" else expect  # `plan` with no text continues a session
        replan_expect = r"error: No modifications specified" if not value.strip() else expect
        cases += [Case(("collab-plan", value, "--repo", repo, "-y"), expect, in_process=True),
                  Case(("lite-plan", value, "--repo", repo, "-y"), expect, in_process=True),
                  Case(("plan", value, "--repo", repo, "-y"), plan_expect, in_process=True),
                  Case(("replan", value, "--repo", wfs, "-y"), replan_expect, in_process=True)]
    cases[4].in_process = False  # `collab-plan HUGE-FILE` through a CLI process
    results = run_cases(cases)
    assert not (sample_repo / ".workflow").exists(), "a refused requirement wrote under .workflow/"
    assert snapshot(wfs_repo / ".workflow") == before, "a refused change text touched the session"
    check_matrix("requirements", results)


def test_other_bad_arguments_are_refused(run_cases: Runner, sample_repo: Path, wfs_repo: Path, tmp_path: Path) -> None:
    repo, wfs = str(sample_repo), str(wfs_repo)
    before = snapshot(wfs_repo / ".workflow")
    notes = tmp_path / "notes.txt"
    notes.write_text("not tasks")
    cases = [Case(args, expect, in_process=True) for args, expect in (
        (("collab-plan", "Add x", "--repo", repo, "--max-agents", "1", "-y"), r"--max-agents 1 is out of range"),
        (("collab-plan", "Add x", "--repo", repo, "--max-agents", "101", "-y"), r"--max-agents 101 is out of range"),
        (("collab-plan", "Add x", "--repo", repo, "--workers", "0", "-y"), r"--workers 0 [^\n]*\nhint: use 1..256"),
        # Above the limit the request model refused it with a pydantic traceback (exit 1).
        (("collab-plan", "Add x", "--repo", repo, "--workers", "257", "-y"), r"--workers 257 is out of range"),
        (("lite-plan", "Add x", "--repo", repo, "--workers", "65", "-y"), r"--workers 65 [^\n]*\nhint: use 1..64"),
        (("plan", "Add x", "--repo", repo, "--workers", "65", "-y"), r"--workers 65 is out of range"),
        (("collab-plan", "Add x", "--repo", repo, "--provider", "bogus", "-y"), r"unknown provider 'bogus'"),
        (("replan", "IMPL-99", "drop the cache", "--repo", wfs, "-y"), r"IMPL-99"),
        (("replan", "--restore", str(tmp_path / "no-backup"), "--repo", wfs), r"no-backup"),
        (("validate", str(tmp_path / "missing.jsonl")), r"missing\.jsonl: no such file or folder"),
        (("validate", str(notes)), r"notes\.txt: unsupported file type"),
        (("resume", "CPLAN-nope", "--repo", repo), r"no session CPLAN-nope"),
        (("verify", "--session", "WFS-nope", "--repo", wfs), r"WFS-nope"),
    )]
    results = run_cases(cases)
    assert not (sample_repo / ".workflow").exists()
    assert snapshot(wfs_repo / ".workflow") == before
    check_matrix("arguments", results)


def test_the_anthropic_provider_without_credentials_is_refused_before_anything_is_written(
        run_cases: Runner, monkeypatch: pytest.MonkeyPatch, sample_repo: Path, wfs_repo: Path) -> None:
    """`plan --provider anthropic` with no key started Redis and workers, wrote a WFS session, then failed in the
    worker (exit 2): the session's every resume failed the same way. `resume --provider anthropic` recorded the
    provider in the session before failing, so every later plain resume failed too."""
    for name in ("ANTHROPIC_API_KEY", "WFQUEUE_ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    repo, wfs = str(sample_repo), str(wfs_repo)
    before = snapshot(wfs_repo / ".workflow")
    (session,) = (wfs_repo / ".workflow" / "active").iterdir()
    cases = [Case((*args, "--provider", "anthropic"), r"no Anthropic credentials", in_process=True) for args in (
        ("plan", "Add caching to note lookups", "--repo", repo, "-y"),
        ("collab-plan", "Add caching to note lookups", "--repo", repo, "-y"),
        ("lite-plan", "Add caching to note lookups", "--repo", repo, "-y"),
        ("resume", session.name, "--repo", wfs),
        ("plan", "--session", session.name, "--repo", wfs, "-y"),
    )]
    results = run_cases(cases)
    assert not (sample_repo / ".workflow").exists()  # no session, no embedded Redis
    assert snapshot(wfs_repo / ".workflow") == before
    check_matrix("credentials", results)


def test_a_json_command_that_refuses_its_input_prints_the_error_as_its_one_object(
        run_cases: Runner, sample_repo: Path, wfs_repo: Path, tmp_path: Path) -> None:
    """A script parses a `--json` command's stdout: a refused input (exit 2), a usage error and an unreachable
    broker (exit 3) printed nothing there, so the script failed on empty JSON instead of reading the error."""
    repo, wfs = str(sample_repo), str(wfs_repo)
    cases = [
        Case(("collab-plan", "Add x", "--repo", str(tmp_path / "nowhere"), "-y", "--json"), r"nowhere: no such"),
        Case(("collab-plan", "Add x", "--bogus", "--json"), r"No such option: --bogus"),
        Case(("lite-plan", "   ", "--repo", repo, "-y", "--json"), r"error: the requirement is empty",
             in_process=True),
        Case(("plan", "Add x", "--repo", repo, "--workers", "65", "-y", "--json"), r"--workers 65 is out of range",
             in_process=True),
        Case(("resume", "CPLAN-nope", "--repo", repo, "--json"), r"no session CPLAN-nope", in_process=True),
        Case(("status", "CPLAN-nope", "--repo", repo, "--json"), r"CPLAN-nope", in_process=True),
        Case(("verify", "--session", "WFS-nope", "--repo", wfs, "--json"), r"WFS-nope", in_process=True),
        Case(("replan", "IMPL-99", "drop the cache", "--repo", wfs, "-y", "--json"), r"IMPL-99", in_process=True),
        Case(("execute", str(tmp_path / "none.jsonl"), "--dry-run", "--json"), r"none\.jsonl", in_process=True),
        Case(("validate", str(tmp_path / "none.jsonl"), "--json"), r"none\.jsonl: no such file", in_process=True),
        Case(("collab-plan", "Add x", "--repo", repo, "-y", "--json"), r"error: cannot reach the broker", 3,
             {"WFQUEUE_BROKER_URL": "redis://127.0.0.1:1/0"}, in_process=True),
    ]
    results = run_cases(cases)
    assert all("--json" in case.args for case, _ in results)  # so that verdict() reads each one's stdout
    check_matrix("json_errors", results)
    # A usage error's hint says where to look.
    assert json.loads(results[1][1].stdout)["hint"] == "see the command's --help"


def test_usage_errors_exit_2_without_a_traceback(run_cases: Runner, sample_repo: Path) -> None:
    """Typer vendors its own click (typer._click): main() must catch its usage errors too."""
    results = run_cases([
        Case(("status", "--bogus"), r"No such option: --bogus"),
        Case(("collab-plan",), r"Missing (argument|parameter)", in_process=True),
        Case(("resume", "-rf", "--repo", str(sample_repo)), r"No such option", in_process=True),
    ])
    check_matrix("usage_errors", results)


# -- a requirement in Chinese --------------------------------------------------------------------------------


def test_a_requirement_in_chinese_is_planned(sample_repo: Path) -> None:
    requirement = "为笔记 API 添加按用户的速率限制，并记录被拒绝的请求"
    run = run_cli("collab-plan", requirement, "--repo", str(sample_repo), "--max-agents", "3", "-y", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["status"] in ("completed", "conflicts_detected") and run.json()["tasks"] > 0
    folder = session_dir(run)
    assert re.fullmatch(r"CPLAN-[a-z0-9-]+-\d{4}-\d{2}-\d{2}", folder.name), folder.name
    analysis = json.loads((folder / "requirement-analysis.json").read_text(encoding="utf-8"))
    assert analysis["original_requirement"] == requirement
    text_ = (folder / "plan-note.md").read_text(encoding="utf-8")
    note = parse_note(text_)
    assert note.front_matter["original_requirement"] == requirement and render_note(note) == text_
    tasks, problems = note_tasks(note)
    assert problems == [] and len(tasks) == run.json()["tasks"]
    assert requirement in (folder / "plan.md").read_text(encoding="utf-8")
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []
    write_report("chinese_requirement", {"exit_code": run.code, "session": folder.name, "tasks": len(tasks)})


# -- plan-note.md edited into malformed shapes ---------------------------------------------------------------


NOTE = """---
session_id: CPLAN-demo-2026-11-22
original_requirement: Add per-user rate limiting
sub_domains:
- api
- auth
agent_sections:
  api: [任务池 - Api, 上下文证据 - Api]
  auth: [任务池 - Auth, 上下文证据 - Auth]
---

## 需求理解

**核心目标**:
- limit requests per user

## 任务池 - Api

### TASK-001: Add the limiter [api]
**状态**: pending
**复杂度**: Low
**依赖**: -
**范围**: notes_api/api
**修改点**:
- `notes_api/api/middleware.py:check`: count requests
**冲突风险**: low

## 任务池 - Auth

### TASK-101: Key limits by user [auth]
**状态**: pending
**复杂度**: Low
**依赖**: TASK-001
**范围**: notes_api/auth
**修改点**:
- `notes_api/auth/users.py:current_user`: expose the user id
**冲突风险**: low

## 依赖关系

## 冲突标记
"""


def line_of(text_: str, needle: str, occurrence: int = 1) -> int:
    lines = text_.splitlines()
    hits = [n for n, line in enumerate(lines, start=1) if needle in line]
    return hits[occurrence - 1]


def note_shapes() -> dict[str, tuple[str, Callable[[str], list[tuple[int, str]]]]]:
    """name -> (malformed note, the (line, message fragment) problems it must produce)."""
    dup = NOTE.replace("## 任务池 - Auth\n",
                       "## 任务池 - Auth\n\n### TASK-001: Add the limiter again [auth]\n**状态**: pending\n")
    no_area = NOTE.replace("### TASK-101: Key limits by user [auth]", "### TASK-101: Key limits by user")
    return {
        "no front matter": (NOTE.split("---\n", 2)[2], lambda t: [(1, "no YAML front matter")]),
        "front matter never closed": (NOTE.replace("---\n\n## 需求理解", "\n## 需求理解", 1),
                                      lambda t: [(1, "never closed")]),
        "broken YAML": (NOTE.replace("  auth: [任务池 - Auth, 上下文证据 - Auth]",
                                     "  auth: [任务池 - Auth, 上下文证据"),
                        lambda t: [(line_of(t, "---", 2), "front matter is not valid YAML")]),
        "duplicate task id": (dup, lambda t: [(line_of(t, "### TASK-001", 2), "TASK-001 is defined twice "
                                               f"(first on line {line_of(t, '### TASK-001')})")]),
        "task header without its area": (no_area, lambda t: [(line_of(t, "### TASK-101"),
                                                              "TASK-101 has no [area]; attributed to 'auth'")]),
        "not a task header": (NOTE.replace("### TASK-101: Key limits by user [auth]", "### Key limits by user"),
                              lambda t: [(line_of(t, "### Key limits"), "is not a task header")]),
        "unrecognised line": (NOTE.replace("**冲突风险**: low\n\n## 任务池 - Auth",
                                           "**冲突风险**: low\nsee the wiki\n\n## 任务池 - Auth"),
                              lambda t: [(line_of(t, "see the wiki"), "unrecognised line in TASK-001")]),
        "section twice": (NOTE.replace("## 依赖关系\n", "## 依赖关系\n\n## 任务池 - Api\n"),
                          lambda t: [(line_of(t, "## 任务池 - Api", 2), f"repeats the one on line "
                                      f"{line_of(t, '## 任务池 - Api')}")]),
    }


def test_malformed_plan_notes_are_parsed_with_line_numbered_problems() -> None:
    assert parse_note(NOTE).problems == [] and note_tasks(parse_note(NOTE))[1] == []
    shapes = note_shapes()
    for name, (malformed, expected) in shapes.items():
        tasks, problems = note_tasks(parse_note(malformed))
        found = [(p.line, p.message) for p in problems]
        for line, fragment in expected(malformed):
            assert any(n == line and fragment in m for n, m in found), \
                f"{name}: expected line {line} '{fragment}', got {found}"
        if name == "task header without its area":
            assert [t.area for t in tasks if t.id == "TASK-101"] == ["auth"]
    write_report("bad_input_plan_note_shapes", {"inputs_tried": len(shapes), "clean_errors": len(shapes)})


def test_a_malformed_plan_note_is_repaired_by_resume(run_cases: Runner, sample_repo: Path) -> None:
    """Owned sections come back from Redis and a lost or broken front matter from the template (COLLAB_PLAN.md)."""
    run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo),
                  "--max-agents", "3", "-y", "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    note_path = folder / "plan-note.md"
    good = note_path.read_text(encoding="utf-8")
    first = re.search(r"^### (TASK-\d+): .* \[(\S+)\]$", good, re.M)
    assert first is not None
    broken = (good.replace("sub_domains:", "sub_domains: [unclosed", 1)  # broken YAML
              .replace(first.group(0), first.group(0).rsplit(" [", 1)[0], 1)  # a header without its area
              .replace("## 依赖关系", first.group(0) + "\n**状态**: pending\n\n## 依赖关系", 1))  # the id twice
    outcomes = {}
    # One resume for three defects (each costs an embedded Redis and workers); the other shapes are parsed above.
    for name, malformed in (("broken YAML, header without area, duplicate id", broken),):
        note_path.write_text(malformed, encoding="utf-8")
        assert parse_note(malformed).problems or note_tasks(parse_note(malformed))[1]
        [(_, status)] = run_cases([Case(("status", folder.name, "--repo", str(sample_repo), "--json"), "", 0,
                                        in_process=True)])
        assert status.code == 0 and "Traceback" not in status.stderr, status.stderr
        resume = run_cli("resume", folder.name, "--repo", str(sample_repo), "--json")
        assert resume.code == 0 and "Traceback" not in resume.stderr, resume.stderr
        outcomes[name] = note_path.read_text(encoding="utf-8") == good
        assert outcomes[name], f"{name}: the note was not restored"
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []
    write_report("bad_input_plan_note_repair", {"inputs_tried": 3, "clean_errors": 3 * sum(outcomes.values()),
                                                "defects": list(outcomes)})


# -- tasks.jsonl ------------------------------------------------------------------------------------------------


def unified(task_id: str, title: str, path: str, deps: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": task_id, "title": title, "description": f"{title}: change {path}", "depends_on": deps or [],
        "type": "feature", "priority": "medium", "effort": "small",
        "convergence": {"criteria": [f"{title} works"], "verification": "python -m pytest -q",
                        "definition_of_done": "the change is in and the suite passes"},
        "files": [{"path": path, "action": "modify", "changes": ["apply the requirement"], "conflict_risk": "low"}],
        "implementation": [f"change {path}"], **extra,
    }


def jsonl(*rows: Any) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n" for row in rows)


def test_malformed_tasks_files_are_reported_with_line_numbers(run_cases: Runner, sample_repo: Path) -> None:
    folder = sample_repo / ".workflow" / ".lite-plan" / "edited-2026-11-22"
    folder.mkdir(parents=True)
    a = unified("TASK-001", "limits", "notes_api/api/middleware.py")
    b = unified("TASK-002", "wire in", "notes_api/api/router.py", ["TASK-001"])
    shapes = {
        "invalid JSON on line 2": (jsonl(a, '{"id": "TASK-002", "title": "wire in",', b),
                                   [r"tasks\.jsonl:2 .* invalid JSON at column \d+"]),
        "wrong types": (jsonl(a, {**b, "title": 42, "depends_on": "TASK-001"}),
                        [r"tasks\.jsonl:2 +TASK-002 +title: ", r"tasks\.jsonl:2 +TASK-002 +depends_on: "]),
        "not an object": (jsonl(a, ["TASK-002"]), [r"tasks\.jsonl:2 .*expected a JSON object"]),
        "cycle": (jsonl({**a, "depends_on": ["TASK-002"]}, b),
                  [r"tasks\.jsonl:1 +TASK-001 +dependency cycle TASK-001 -> TASK-002 -> TASK-001"]),
        "dangling dependency": (jsonl(a, {**b, "depends_on": ["TASK-404"]}),
                                [r"tasks\.jsonl:2 +TASK-002 +depends on TASK-404, which no task in this plan has"]),
        "duplicate id": (jsonl(a, {**b, "id": "TASK-001", "depends_on": []}),
                         [r"tasks\.jsonl:2 +TASK-001 +duplicate id TASK-001 \(first used at tasks\.jsonl:1\)"]),
        "empty": ("\n\n", [r"tasks\.jsonl .*no tasks in the file"]),
    }
    failures = {}
    for name, (content, patterns) in shapes.items():
        target = folder / "tasks.jsonl"
        target.write_text(content, encoding="utf-8")
        before = snapshot(sample_repo / ".workflow")
        # in-process: the round trip below runs `validate` through a CLI process
        [(_, run)] = run_cases([Case(("validate", str(target), "--repo", str(sample_repo)), "", in_process=True)])
        missing = [pattern for pattern in patterns if not re.search(pattern, run.stdout)]
        if run.code != 2 or "Traceback" in run.stdout + run.stderr or missing:
            failures[name] = f"exit {run.code}, missing {missing}: {run.stdout}{run.stderr}"
        assert snapshot(sample_repo / ".workflow") == before, f"{name}: validate wrote something"
    # Unknown fields are not a problem, and survive a round trip.
    kept = jsonl({**a, "x_owner": "team-a", "x_meta": {"ticket": 42, "tags": ["rate", None]}}, b)
    (folder / "tasks.jsonl").write_text(kept, encoding="utf-8")
    [(_, run)] = run_cases([Case(("validate", str(folder / "tasks.jsonl"), "--repo", str(sample_repo), "--json"), "")])
    loaded, problems = parse_jsonl(kept)
    if run.code != 0 or run.json()["problems"] != [] or problems != [] or json.loads(
            dump_jsonl([t.task for t in loaded]).splitlines()[0])["x_meta"] != {"ticket": 42, "tags": ["rate", None]}:
        failures["unknown fields"] = run.stdout
    tried = len(shapes) + 1
    write_report("bad_input_tasks_jsonl", {"inputs_tried": tried, "clean_errors": tried - len(failures),
                                           "through_a_cli_process": 1})
    assert failures == {}


# -- model answers that are not JSON, truncated, or of another shape -------------------------------------------


AREAS = {"api": "notes_api/api", "auth": "notes_api/auth", "storage": "notes_api/storage"}


def step_of(body: dict[str, Any]) -> str:
    instructions = body["system"][1]["text"]
    return "understand" if instructions.startswith("Step: understand") else "plan_area"


def area_of(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    message = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
    return re.search(r"Plan the sub-domain `([^`]+)`", message).group(1)  # type: ignore[union-attr]


UNDERSTANDING = {
    "complexity": "Medium",
    "understanding": {"objectives": ["limit requests per user"], "key_points": [], "constraints": [],
                      "split_strategy": "one area per package", "clarifications": []},
    "sub_domains": [{"focus_area": area, "description": f"the code in {path}", "focus_paths": [path],
                     "estimated_effort": "small", "dependencies": []} for area, path in AREAS.items()],
}
BAD_ANSWERS = {
    "api": lambda: text("Sure! Here is the plan for the API: add a limiter in the middleware."),  # not JSON
    "auth": lambda: answer('{"summary": "auth plan", "approach": "small steps", "tasks": [{"id": "TASK-1',
                           stop_reason="max_tokens"),  # truncated at the output limit
    "storage": lambda: answer([{"task": "add a counter table"}]),  # JSON of another shape
}


def model(bad_understanding: bool) -> Callable[[dict[str, Any]], Reply]:
    def reply(body: dict[str, Any]) -> Reply:
        if step_of(body) == "understand":
            return text("I think the API should be split by package.") if bad_understanding else answer(UNDERSTANDING)
        return BAD_ANSWERS[area_of(body)]()  # the first answer and the repair round alike
    return reply


def anthropic_cli(fake: FakeAnthropic, repo: Path) -> CliRun:
    env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url, WFQUEUE_RETRY_BACKOFF_S="0.1",
                      NO_PROXY="127.0.0.1,localhost")
    return run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(repo), "--max-agents", "3",
                   "--provider", "anthropic", "-y", "--json", env=env, timeout=180)


def test_model_answers_that_are_not_json_truncated_or_of_another_shape_fail_their_agent_clearly(
        sample_repo: Path) -> None:
    with FakeAnthropic(model(bad_understanding=False)) as fake:
        run = anthropic_cli(fake, sample_repo)
    assert "Traceback" not in run.stdout + run.stderr
    assert run.code == 1 and run.json()["status"] == "failed", run.stderr
    folder = session_dir(run)
    summary = (folder / "plan.md").read_text(encoding="utf-8")
    note = parse_note((folder / "plan-note.md").read_text(encoding="utf-8"))
    clean = {}
    for area in AREAS:  # plan.md and the area's task pool say why it failed; it wrote no plan.json
        pool = note.section(f"任务池 - {area.title()}")
        clean[area] = bool(re.search(rf"^.*{area}.*after one repair round.*$", summary, re.M)) and \
            pool is not None and "failed" in pool.body and "after one repair round" in pool.body and \
            not (folder / "agents" / area / "plan.json").exists()
    write_report("bad_input_model_answers", {"inputs_tried": len(AREAS), "clean_errors": sum(clean.values()),
                                             "kinds": {"api": "not JSON", "auth": "truncated JSON (max_tokens)",
                                                       "storage": "JSON of another shape"}})
    assert clean == dict.fromkeys(AREAS, True), summary
    assert note.problems == [] and note.front_matter["status"] == "failed"
    requests = [r for r in fake.requests if r.get("system") and step_of(r) == "plan_area"]
    assert len(requests) == 2 * len(AREAS), "each bad answer gets exactly one repair round"
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


def test_an_understanding_answer_that_is_not_json_fails_the_plan_clearly(sample_repo: Path) -> None:
    with FakeAnthropic(model(bad_understanding=True)) as fake:
        run = anthropic_cli(fake, sample_repo)
    # The plan ends failed, saying why (an error before, which left the session reading as interrupted).
    error = [line for line in run.stderr.splitlines() if "the understanding step stopped" in line]
    clean = ("Traceback" not in run.stdout + run.stderr and run.code == 1 and bool(error)
             and "understand" in error[0] and "after one repair round" in error[0]
             and "runs it again" in run.stderr)
    write_report("bad_input_model_understanding", {"inputs_tried": 1, "clean_errors": int(clean),
                                                   "exit_code": run.code, "error": error[0] if error else None})
    assert clean, run.stderr
    assert len(fake.requests) == 2
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


# -- an unreachable broker --------------------------------------------------------------------------------------


def broker_cases(repo: str, url: str, masked: str, all_commands: bool, in_process: bool = False,
                 expect: str = "") -> list[Case]:
    """collab-plan (through a CLI process unless ``in_process``), then with ``all_commands`` the other commands
    that reach the broker, in-process."""
    expect = expect or rf"error: cannot reach the broker at {masked}"
    commands = [("collab-plan", "Add per-user rate limiting", "--repo", repo, "-y")]
    if all_commands:
        commands += [("lite-plan", "Add per-user rate limiting", "--repo", repo, "-y"),
                     ("plan", "Add per-user rate limiting", "--repo", repo, "-y"),
                     ("resume", "CPLAN-existing-2026-11-22", "--repo", repo)]  # status shows the files (a warning)
    return [Case(args, expect, 3, {"WFQUEUE_BROKER_URL": url}, max_seconds=10, in_process=in_process or n > 0)
            for n, args in enumerate(commands)]


def check_broker_cases(name: str, run_cases: Runner, repo: Path, cases: list[Case]) -> None:
    before = snapshot(repo / ".workflow")
    started = time.monotonic()
    results = run_cases(cases)
    check_matrix(name, results, {"slowest_s": round(max(run.seconds for _, run in results), 1),
                                 "wall_s": round(time.monotonic() - started, 1)})
    assert snapshot(repo / ".workflow") == before, "nothing may be written when the broker is unreachable"


@pytest.mark.long
def test_an_unreachable_broker_exits_3_within_10_seconds_with_the_password_masked(run_cases: Runner,
                                                                                  sample_repo: Path) -> None:
    (sample_repo / ".workflow" / ".planning" / "CPLAN-existing-2026-11-22").mkdir(parents=True)
    repo = str(sample_repo)
    cases = broker_cases(repo, f"redis://:{PASSWORD}@127.0.0.1:1/0", r"redis://:\*\*\*@127\.0\.0\.1:1/0", True)
    cases += broker_cases(repo, f"redis+socket://:{PASSWORD}@/nonexistent/redis.sock",
                          r"redis\+socket://:\*\*\*@/nonexistent/redis\.sock", True, in_process=True)
    cases += broker_cases(repo, f"redis://planner:{PASSWORD}@127.0.0.1:1/0", r"redis://planner:\*\*\*@127\.0\.0\.1:1/0",
                          False, in_process=True)
    check_broker_cases("unreachable_broker", run_cases, sample_repo, cases)


class FakeBroker:
    """A local TCP server that is not a working Redis: it answers like a web server, or never answers."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.clients: list[socket.socket] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.clients.append(client)
            if self.mode == "http":
                with contextlib.suppress(OSError):
                    client.recv(4096)
                    client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    client.close()

    def __enter__(self) -> FakeBroker:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        # A close alone does not wake the thread blocked in accept(), which would hold the test 5 s in join().
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        for client in self.clients:
            client.close()
        self.thread.join(timeout=5)


@pytest.mark.parametrize("mode", ["http", "silent"])
def test_a_broker_url_that_is_not_a_working_redis_exits_3_within_10_seconds(mode: str, run_cases: Runner,
                                                                           sample_repo: Path) -> None:
    with FakeBroker(mode) as fake:
        url = f"redis://:{PASSWORD}@127.0.0.1:{fake.port}/0"
        masked = rf"redis://:\*\*\*@127\.0\.0\.1:{fake.port}/0"
        expect = {"http": rf"error: the broker at {masked} does not answer as Redis",
                  "silent": rf"error: the broker at {masked} accepts connections but does not answer as Redis"}[mode]
        # The silent broker runs in-process: its 5 s wait is the product's; a CLI process adds its start-up,
        # which on two loaded cores can reach 3 s and is not what this case measures.
        cases = broker_cases(str(sample_repo), url, masked, False, in_process=mode == "silent", expect=expect)
        check_broker_cases(f"broker_{mode}", run_cases, sample_repo, cases)


@pytest.mark.parametrize("mode", ["http", "silent"])
def test_a_worker_pointed_at_something_that_is_not_redis_exits_3_instead_of_hanging(mode: str) -> None:
    """`wfqueue worker` took a service that accepts connections and is not Redis for one "not reachable yet",
    started Celery, and hung in its first read for good: no message, and SIGTERM did not stop it."""
    with FakeBroker(mode) as fake:
        url = f"redis://:{PASSWORD}@127.0.0.1:{fake.port}/0"
        proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "worker", "--concurrency", "1"],
                                env={**wfqueue_env(), "WFQUEUE_BROKER_URL": url}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    said = " ".join(err.split())
    assert proc.returncode == 3, said
    assert f"the broker at redis://:***@127.0.0.1:{fake.port}/0" in said and "as Redis" in said, said
    assert PASSWORD not in said


def test_a_wrong_broker_password_exits_3_saying_the_credentials_were_refused(run_cases: Runner, sample_repo: Path,
                                                                              tmp_path: Path) -> None:
    redis = EmbeddedRedis(tmp_path / "broker", password="the-right-one")
    redis.start()
    try:
        url = redis.url.replace(":the-right-one@", f":{PASSWORD}@")
        assert url != redis.url
        masked = re.escape(mask_url(url))
        cases = broker_cases(str(sample_repo), url, masked, False, in_process=True,
                             expect=rf"error: the broker at {masked} refused the credentials")
        check_broker_cases("broker_wrong_password", run_cases, sample_repo, cases)
    finally:
        redis.stop()
