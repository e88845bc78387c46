"""collab-plan, lite-plan and plan with ``--provider anthropic`` end to end, against the local fake
Messages API (tests/fake_anthropic.py) served from this process on 127.0.0.1: the real CLI in a
subprocess, embedded Redis, real worker processes, the real SDK in the workers.

The fake "model" answers every step with schema-valid content built from the request: the step is
recognised by its instructions (system block 2), the repository listing, the requirement analysis,
the focus area, the id range and the angle are read from the prompt (tests/fake_model.py).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import processes_mentioning, run_cli, session_dir, wfqueue_env

from tests.fake_anthropic import Every, FakeAnthropic, Fault, Reply, error
from tests.fake_model import GHOST, STEP_MARKERS, FakeModel, step_kind
from wfqueue.collab.note import parse_note, render_note
from wfqueue.collab.note_blocks import note_tasks
from wfqueue.plan_check import check_plan
from wfqueue.tasks_file import dump_jsonl, load_task_dir, parse_jsonl

pytestmark = pytest.mark.integration

COLLAB_REQUIREMENT = "Add per-user rate limiting to the API"
LITE_REQUIREMENT = "Add per-user rate limiting to the API"
WFS_REQUIREMENT = "Refactor the storage layer and authentication into a modular architecture"
class FirstCallOfEachStepFails:
    """The first request of every step kind fails (529, 429 with retry-after: 0, 500 in turn)."""

    def __init__(self, model: FakeModel) -> None:
        self.model = model
        self.statuses = itertools.cycle([529, 429, 500])
        self.failed: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        kind = step_kind(body)
        if kind not in self.failed:
            self.failed[kind] = next(self.statuses)
            return error(self.failed[kind], retry_after="0" if self.failed[kind] == 429 else None)
        return self.model(body)


# -- running the CLI against it ----------------------------------------------------------------------


def cli(fake: FakeAnthropic, *args: str) -> Any:
    env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url,
                      WFQUEUE_RETRY_BACKOFF_S="0.1", WFQUEUE_RETRY_BACKOFF_MAX_S="0.5", NO_PROXY="127.0.0.1,localhost")
    return run_cli(*args, "--provider", "anthropic", "-y", "--json", env=env, timeout=240)


def kinds_seen(fake: FakeAnthropic) -> Counter[str]:
    return Counter(step_kind(r) for r in fake.requests if r.get("system"))


def plan_three_ways(fake: FakeAnthropic, repo: Path) -> tuple[Any, Any, Any]:
    """A collab-plan (2 agents), a lite-plan and a workflow plan of the repository, one after another."""
    return (cli(fake, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(repo), "--max-agents", "2"),
            cli(fake, "lite-plan", LITE_REQUIREMENT, "--repo", str(repo)),
            cli(fake, "plan", WFS_REQUIREMENT, "--repo", str(repo)))


def check_collab(repo: Path, run: Any) -> tuple[Path, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """A complete, valid collaborative plan; returns its folder, plan.json by area and its conflicts."""
    assert run.code == 0, run.stderr
    payload = run.json()
    folder = session_dir(run)
    for name in ("requirement-analysis.json", "plan-note.md", "conflicts.json", "plan.md"):
        assert (folder / name).is_file(), name
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    areas = [s["focus_area"] for s in analysis["sub_domains"]]
    assert len(areas) == 2
    plans = {}
    for sub in analysis["sub_domains"]:
        area, (first, last) = sub["focus_area"], sub["task_id_range"]
        plan = json.loads((folder / "agents" / area / "plan.json").read_text())
        assert plan["task_count"] == len(plan["task_ids"]) == len(plan["tasks"]) > 0
        assert plan["_metadata"]["provider"] == "anthropic" and plan["_metadata"]["model"]
        ids = [t["id"] for t in plan["tasks"]]
        assert len(set(ids)) == len(ids) and all(first <= int(i.split("-")[1]) <= last for i in ids), ids
        assert all(t["source"]["tool"] == "wfqueue-collab" and t["source"]["session_id"] == folder.name
                   for t in plan["tasks"])
        loaded, problems = parse_jsonl(dump_jsonl_dicts(plan["tasks"]))
        assert problems == []
        assert [p for p in check_plan(loaded, repo) if p.code not in ("unknown_dependency", "dependency_cycle")] == []
        assert (folder / "agents" / area / "planning-context.md").read_text().startswith("# Planning Context")
        plans[area] = plan
    text = (folder / "plan-note.md").read_text()
    note = parse_note(text)
    assert render_note(note) == text
    tasks, problems = note_tasks(note)
    assert problems == [] and len(tasks) == payload["tasks"] == sum(p["task_count"] for p in plans.values())
    conflicts = json.loads((folder / "conflicts.json").read_text())["conflicts"]
    assert payload["conflicts"] == len(conflicts)
    assert "```mermaid" in (folder / "plan.md").read_text()
    return folder, plans, conflicts


def paths(tasks: list[dict[str, Any]]) -> list[str]:
    return [f["path"] for t in tasks for f in t.get("files", [])]


def dump_jsonl_dicts(tasks: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(t) + "\n" for t in tasks)


def check_lite(repo: Path, run: Any) -> tuple[Path, dict[str, Any]]:
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed"
    folder = session_dir(run)
    manifest = json.loads((folder / "explorations-manifest.json").read_text())
    assert [e["angle"] for e in manifest["explorations"]] == ["security", "integration-points"]
    for entry in manifest["explorations"]:
        assert (folder / entry["file"]).is_file()
    assert "✅" in (folder / "exploration-security.md").read_text()
    text = (folder / "tasks.jsonl").read_text()
    loaded, problems = parse_jsonl(text)
    assert problems == [] and 2 <= len(loaded) <= 7
    assert dump_jsonl([t.task for t in loaded]) == text
    assert check_plan(loaded, repo) == []
    assert [t.task.id for t in loaded] == [f"TASK-{n:03d}" for n in range(1, len(loaded) + 1)]
    assert all(t.task.source and t.task.source.tool == "wfqueue-lite" for t in loaded)
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    assert analysis["exploration_angles"] == ["security", "integration-points"]
    assert all(t.task.id in (folder / "plan.md").read_text() for t in loaded)
    validate = run_cli("validate", str(folder / "tasks.jsonl"), "--repo", str(repo))
    assert validate.code == 0, validate.stdout + validate.stderr
    return folder, analysis


def check_workflow(repo: Path, run: Any, *, cycle: bool = False) -> tuple[Path, dict[str, Any]]:
    """A plan whose answer had a dependency cycle is complete, and `plan -y` exits 1 for it as `verify` would."""
    assert run.code == (1 if cycle else 0), run.stderr
    payload = run.json()
    assert payload["status"] == "completed"
    assert payload["gate"] in (("PROCEED_WITH_FIXES",) if cycle else ("PROCEED", "PROCEED_WITH_CAUTION"))
    folder = session_dir(run)
    session = json.loads((folder / "workflow-session.json").read_text())
    assert session["phases"] == {"session": "done", "context": "done", "conflicts": "done", "tasks": "done"}
    process = folder / ".process"
    resolution = json.loads((process / "conflict-resolution.json").read_text())
    assert resolution["summary"]["total_conflicts"] == payload["conflicts"] == 1
    loaded, problems = load_task_dir(folder / ".task")
    assert problems == [] and 1 <= len(loaded) <= 10
    ids = [t.task.id for t in loaded]
    assert sorted(ids, key=lambda i: int(i.split("-")[1])) == [f"IMPL-{n}" for n in range(1, len(ids) + 1)]
    found = [p.code for p in check_plan(loaded, repo)]
    assert found == (["dependency_cycle"] if cycle else []), found
    assert all("extend existing modules" in t.task.description for t in loaded)
    assert all(t.task.source and t.task.source.tool == "wfqueue-workflow" for t in loaded)
    plan = json.loads((folder / "plan.json").read_text())
    assert sorted(plan["task_ids"]) == sorted(ids) and plan["task_count"] == payload["tasks"]
    assert plan["_metadata"]["provider"] == "anthropic"
    for name in ("IMPL_PLAN.md", "TODO_LIST.md", "planning-notes.md"):
        assert (folder / name).is_file(), name
    findings = json.loads((process / "verification-findings.json").read_text())
    cycle_found = any(f["dimension"] == "D" and "cycle" in f["summary"].lower() for f in findings["findings"])
    assert cycle_found == cycle, findings
    return folder, plan


# -- the tests ------------------------------------------------------------------------------------


def test_collab_plan_against_the_api(sample_repo: Path) -> None:
    with FakeAnthropic(FakeModel()) as fake:
        run = cli(fake, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "3")
    _folder, plans, conflicts = check_collab(sample_repo, run)
    assert all(p["_metadata"]["repairs"] == [] for p in plans.values())
    assert conflicts == []
    seen = kinds_seen(fake)
    assert seen["understand"] == 1 and seen["plan_area"] == 4, seen  # two agents, a read turn each
    reads = [r for r in fake.requests if step_kind(r) == "plan_area" and r.get("tools") and len(r["messages"]) == 3]
    assert len(reads) == 2 and all("\t" in r["messages"][-1]["content"][0]["content"] for r in reads)
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


def test_lite_plan_against_the_api(sample_repo: Path) -> None:
    with FakeAnthropic(FakeModel()) as fake:
        run = cli(fake, "lite-plan", LITE_REQUIREMENT, "--repo", str(sample_repo))
    _, analysis = check_lite(sample_repo, run)
    assert analysis["repairs"] == []
    assert kinds_seen(fake) == Counter({"assess": 1, "explore": 4, "lite_plan": 1})


def test_workflow_plan_against_the_api(sample_repo: Path) -> None:
    with FakeAnthropic(FakeModel()) as fake:
        run = cli(fake, "plan", WFS_REQUIREMENT, "--repo", str(sample_repo))
    _, plan = check_workflow(sample_repo, run)
    assert plan["_metadata"]["repairs"] == []
    assert kinds_seen(fake) == Counter({"assess": 1, "explore": 4, "detect_conflicts": 1, "generate_tasks": 1})


@pytest.mark.long
def test_wrong_content_is_repaired_and_the_cycle_reported(sample_repo: Path) -> None:
    with FakeAnthropic(FakeModel(wrong=True)) as fake:
        collab, lite, workflow = plan_three_ways(fake, sample_repo)

    folder, plans, conflicts = check_collab(sample_repo, collab)
    first_area, second_area = plans
    firsts = {area: plan["tasks"][0]["id"] for area, plan in plans.items()}
    for area, plan in plans.items():
        other = firsts[second_area if area == first_area else first_area]
        base = int(firsts[area].split("-")[1])
        ids = [f"TASK-{base + n:03d}" for n in (0, 1, 2)]
        assert plan["task_ids"] == ids  # the task naming only a file that does not exist is dropped, not kept empty
        first, stray, duplicate = plan["tasks"]
        assert first["depends_on"] == [other], "the dependency on the other agent is kept"
        assert stray["depends_on"] == [ids[0]] and duplicate["depends_on"] == [ids[1]]
        assert GHOST not in paths(plan["tasks"])
        assert stray["source"]["original_id"] != stray["id"]
        repairs = plan["_metadata"]["repairs"]
        assert Counter(r["kind"] for r in repairs) == Counter({"renumbered": 2, "removed_self_dependency": 1,
                                                               "removed_unknown_dependency": 1, "dropped_file": 1,
                                                               "dropped_task": 1})
        assert any(r["kind"] == "dropped_task" and "none of its files can be changed" in r["detail"]
                   and r["task_id"] == f"TASK-{base + 9:03d}" for r in repairs)
        assert any(r["detail"].startswith(f"{stray['source']['original_id']} -> {ids[1]}") for r in repairs)
    types = Counter(c["type"] for c in conflicts)
    assert types["dependency_cycle"] == 1 and not types["id_out_of_range"] and not types["dangling_dependency"]
    cycle = next(c for c in conflicts if c["type"] == "dependency_cycle")
    assert sorted(cycle["tasks_involved"]) == sorted(firsts.values())
    assert sorted(cycle["agents_involved"]) == sorted(plans)
    assert collab.json()["status"] == "conflicts_detected"
    assert "dependency_cycle" in (folder / "plan.md").read_text() or "cycle" in (folder / "plan.md").read_text()
    # What code changed in the answers is said in plan.md, not only in a JSON field nobody reads.
    repaired = (folder / "plan.md").read_text().split("## Repairs of the Agents' Answers", 1)[-1]
    assert repaired.count("- dropped_task `TASK-") == 2 and "none of its files can be changed" in repaired

    _, analysis = check_lite(sample_repo, lite)
    tasks = [json.loads(line) for line in (session_dir(lite) / "tasks.jsonl").read_text().splitlines()]
    assert [t["depends_on"] for t in tasks] == [[], ["TASK-001"]]
    assert GHOST not in paths(tasks)
    assert Counter(r["kind"] for r in analysis["repairs"]) == Counter(
        {"renumbered": 2, "removed_self_dependency": 1, "removed_unknown_dependency": 1, "dropped_file": 1,
         "dropped_task": 1})
    lite_md = (session_dir(lite) / "plan.md").read_text()
    assert "## Repairs of the Answers" in lite_md and "- dropped_task `TASK-1`" in lite_md

    wfs_folder, plan = check_workflow(sample_repo, workflow, cycle=True)
    tasks = {t.task.id: t.task for t in load_task_dir(wfs_folder / ".task")[0]}
    assert {i: t.depends_on for i, t in tasks.items()} == {"IMPL-1": ["IMPL-3"], "IMPL-2": [], "IMPL-3": ["IMPL-1"]}
    assert Counter(r["kind"] for r in plan["_metadata"]["repairs"]) == Counter(
        {"renumbered": 3, "removed_self_dependency": 1, "removed_unknown_dependency": 1, "dropped_file": 1})
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


@pytest.mark.long
def test_plans_complete_when_one_call_in_five_fails(sample_repo: Path) -> None:
    with FakeAnthropic(FakeModel(), faults=Every(5, "529", Fault("429", retry_after=0), "500")) as fake:
        collab, lite, workflow = plan_three_ways(fake, sample_repo)
    check_collab(sample_repo, collab)
    check_lite(sample_repo, lite)
    check_workflow(sample_repo, workflow)
    assert set(fake.faulted()) == {"529", "429", "500"}, fake.faulted()
    assert sum(fake.faulted().values()) == len(fake.calls) // 5
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


@pytest.mark.long
def test_every_step_type_retries_transient_errors(sample_repo: Path) -> None:
    first_fails = FirstCallOfEachStepFails(FakeModel())
    with FakeAnthropic(first_fails) as fake:
        collab, lite, workflow = plan_three_ways(fake, sample_repo)
    check_collab(sample_repo, collab)
    check_lite(sample_repo, lite)
    check_workflow(sample_repo, workflow)
    assert sorted(first_fails.failed) == sorted(set(STEP_MARKERS.values())), first_fails.failed
    # Each failed step was asked again: one request more than a clean run of the same plans.
    assert kinds_seen(fake) == Counter({"understand": 2, "plan_area": 5, "assess": 3, "explore": 9, "lite_plan": 2,
                                        "detect_conflicts": 2, "generate_tasks": 2})


def test_a_plan_killed_outright_still_shows_what_its_calls_cost(sample_repo: Path, tmp_path: Path) -> None:
    """SIGKILLed while its agents waited on the API, a plan left no usage.json: `wfqueue status` showed no spend
    for the calls it had paid (its bill was written only as it ended)."""
    import os
    import signal
    import subprocess
    import sys

    from support import wait_until

    release = tmp_path / "release"
    model = FakeModel()

    def agents_wait(body: dict[str, Any]) -> Reply:
        if step_kind(body) == "plan_area":
            wait_until(release.exists, 120, "the test's release")
        return model(body)

    with FakeAnthropic(agents_wait) as fake:
        env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url,
                          NO_PROXY="127.0.0.1,localhost")
        command = subprocess.Popen(
            [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo),
             "--max-agents", "2", "--provider", "anthropic", "-y", "--json"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            planning = sample_repo / ".workflow" / ".planning"

            def billed() -> int:
                found = list(planning.glob("*/usage.json"))
                return json.loads(found[0].read_text())["total"]["calls"] if found else 0

            wait_until(lambda: billed() >= 1, 120, "the understanding's call on the bill while the agents wait")
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
        finally:
            release.touch()
            if command.poll() is None:
                os.killpg(command.pid, signal.SIGKILL)
        answered = len([r for r in fake.requests if r.get("system") and step_kind(r) == "understand"])
    (folder,) = planning.iterdir()
    shown = run_cli("status", folder.name, "--repo", str(sample_repo), "--json", env=wfqueue_env()).json()
    assert shown["usage"] is not None and shown["usage"]["total"]["calls"] == answered == 1, shown["usage"]
