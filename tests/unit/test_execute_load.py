"""Loading the three plan formats from real sessions: the offline planner writes a collaborative plan, a
lite plan and a workflow session into one copy of the sample repository (real CLI, embedded Redis, real
workers), and `wfqueue execute` reads each by id and by path into the same tasks the files hold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wfqueue.cli.main import main
from wfqueue.errors import PlanRejectedError
from wfqueue.execute.load import load_plan
from wfqueue.execute.schedule import build_schedule

# One xdist worker runs them all: the module fixture plans three real sessions, once.
pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.xdist_group("execute-load")]

SAMPLE_REPO = Path(__file__).resolve().parents[2] / "examples" / "sample-api"
REQUIREMENT = "Add per-user rate limiting to the API"
PLANS = {
    "collab": ["collab-plan", REQUIREMENT, "--max-agents", "4"],
    "lite": ["lite-plan", REQUIREMENT + " middleware"],
    "workflow": ["plan", REQUIREMENT],
}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """One repository holding one session of each kind, as the planners leave them."""
    repo = tmp_path_factory.mktemp("execute-load") / "sample-api"
    shutil.copytree(SAMPLE_REPO, repo, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".workflow"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    folders = {}
    for kind, args in PLANS.items():
        done = subprocess.run([sys.executable, "-m", "wfqueue.cli.main", *args, "--repo", str(repo), "-y", "--json"],
                              env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        folders[kind] = Path(json.loads(done.stdout)["session_dir"])
    return repo, folders


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_collab_session_loads_every_agents_tasks(planned: tuple[Path, dict[str, Path]]) -> None:
    repo, folders = planned
    folder = folders["collab"]
    agent_plans = {p.parent.name: json.loads(p.read_text()) for p in (folder / "agents").glob("*/plan.json")}
    expected = {t["id"]: t for plan in agent_plans.values() for t in plan["tasks"]}
    by_id = load_plan(folder.name, str(repo))
    by_path = load_plan(str(folder))
    assert by_id == by_path
    # What an execution records as its source, and reads again on --continue or resume: it was "holds no plan".
    assert load_plan(by_id.source, by_id.repo) == by_id
    assert by_id.kind == "collab" and by_id.session_id == folder.name and by_id.repo == str(repo.resolve())
    assert sorted(t.id for t in by_id.tasks) == sorted(expected) and len(expected) >= 2
    for loaded in by_id.tasks:
        raw = expected[loaded.id]
        assert loaded.title == raw["title"] and loaded.depends_on == raw["depends_on"]
        assert loaded.verification == raw["convergence"]["verification"]
        assert loaded.criteria == raw["convergence"]["criteria"]
        assert set(loaded.files.written()) == {f["path"] for f in raw["files"]}
        assert loaded.location.startswith(f"agents/{raw['meta']['agent']}/plan.json tasks[")
    assert by_id.context.requirement == REQUIREMENT
    assert f".workflow/.planning/{folder.name}/plan-note.md" in by_id.context.documents
    schedule = build_schedule(by_id.tasks, 4)
    assert sorted(t for w in schedule.waves for t in w.task_ids) == sorted(expected)


def test_one_agents_plan_alone_is_refused_naming_the_task_it_waits_for(planned: tuple[Path, dict[str, Path]]) -> None:
    folder = planned[1]["collab"]
    for plan_file in sorted((folder / "agents").glob("*/plan.json")):
        tasks = json.loads(plan_file.read_text())["tasks"]
        own = {t["id"] for t in tasks}
        outside = sorted({d for t in tasks for d in t["depends_on"] if d not in own})
        if outside:
            break
    else:
        pytest.fail("the sample plan has no dependency across agents")
    with pytest.raises(PlanRejectedError) as refused:
        load_plan(str(plan_file))
    assert all(any(f"depends on {dep}, which no task" in p for p in refused.value.problems) for dep in outside)
    assert load_plan(str(folder)).kind == "collab"  # the whole session is fine


def test_a_lite_session_loads_by_id_folder_and_tasks_file(planned: tuple[Path, dict[str, Path]]) -> None:
    repo, folders = planned
    folder = folders["lite"]
    lines = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines() if line.strip()]
    plans = [load_plan(folder.name, str(repo)), load_plan(str(folder)), load_plan(str(folder / "tasks.jsonl"))]
    assert plans[0] == plans[1] == plans[2]
    plan = plans[0]
    assert plan.kind == "lite" and plan.source == str(folder / "tasks.jsonl")
    assert [t.id for t in plan.tasks] == [line["id"] for line in lines]
    assert [t.location for t in plan.tasks] == [f"tasks.jsonl:{n}" for n in range(1, len(lines) + 1)]
    assert [t.implementation for t in plan.tasks] == [[str(s) for s in line.get("implementation", [])]
                                                      for line in lines]
    assert plan.context.requirement == REQUIREMENT + " middleware"


def test_a_workflow_session_loads_by_id_folder_and_task_folder(planned: tuple[Path, dict[str, Path]]) -> None:
    repo, folders = planned
    folder = folders["workflow"]
    files = sorted((folder / ".task").glob("IMPL-*.json"))
    plans = [load_plan(folder.name, str(repo)), load_plan(str(folder)), load_plan(str(folder / ".task"))]
    assert plans[0] == plans[1] == plans[2]
    plan = plans[0]
    assert plan.kind == "workflow" and plan.session_id == folder.name
    assert sorted(t.id for t in plan.tasks) == sorted(f.stem for f in files)
    assert {t.location for t in plan.tasks} == {f".task/{f.name}" for f in files}
    for loaded in plan.tasks:
        raw = json.loads((folder / ".task" / f"{loaded.id}.json").read_text())
        assert loaded.type == raw.get("type") and loaded.definition_of_done == raw["convergence"]["definition_of_done"]
    assert plan.context.requirement == REQUIREMENT
    assert f".workflow/active/{folder.name}/IMPL_PLAN.md" in plan.context.documents


@pytest.mark.parametrize("kind", list(PLANS))
def test_the_dry_run_of_each_real_session_covers_its_tasks_and_writes_nothing(
        kind: str, planned: tuple[Path, dict[str, Path]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, folders = planned
    before = snapshot(repo)
    assert main(["execute", folders[kind].name, "--repo", str(repo), "--dry-run", "--json"]) in (0, None)
    payload = json.loads(capsys.readouterr().out)
    assert payload["plan"]["kind"] == kind
    ids = [t["id"] for t in payload["tasks"]]
    assert sorted(t for w in payload["waves"] for t in w["tasks"]) == sorted(ids)
    assert set(payload["critical_path"]["tasks"]) <= set(ids)
    assert snapshot(repo) == before


def test_planted_defects_in_a_real_plan_are_all_named(planned: tuple[Path, dict[str, Path]],
                                                      tmp_path: Path) -> None:
    repo, folders = planned
    copy = tmp_path / "repo"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".queue"))
    tasks_file = copy / folders["lite"].relative_to(repo) / "tasks.jsonl"
    tasks = [json.loads(line) for line in tasks_file.read_text().splitlines() if line.strip()]
    assert len(tasks) >= 2
    tasks[0]["depends_on"] = [tasks[1]["id"]]
    tasks[1]["depends_on"] = [tasks[0]["id"], "TASK-999"]
    tasks[-1]["files"] = [{"path": "notes_api/api/no_such_module.py", "action": "modify"}]
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    with pytest.raises(PlanRejectedError) as refused:
        load_plan(str(tasks_file))
    problems = "\n".join(refused.value.problems)
    assert f"dependency cycle {tasks[0]['id']} -> {tasks[1]['id']} -> {tasks[0]['id']}" in problems
    assert "depends on TASK-999" in problems
    assert "file notes_api/api/no_such_module.py does not exist but is to be modified" in problems
    assert refused.value.exit_code == 2


@pytest.mark.parametrize("recorded", ["failed", "running", None])
def test_a_workflow_session_still_being_planned_is_not_executed(tmp_path: Path, recorded: str | None) -> None:
    """`execute --dry-run` of a session whose task generation failed or never finished showed its old tasks, and
    the verification of an earlier plan, as ready to run. A session another tool wrote records no phases."""
    from tests.wfs_factory import make_session, task
    from wfqueue.errors import BadInputError
    from wfqueue.fsio import atomic_write_text

    folder = make_session(tmp_path, "Add rate limiting", [task(1, "Config", ["src/config.py"])])
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text("LIMIT = 1\n", encoding="utf-8")
    session = json.loads((folder / "workflow-session.json").read_text(encoding="utf-8"))
    if recorded is None:
        del session["phases"]
    else:
        session["phases"]["tasks"] = recorded
    atomic_write_text(folder / "workflow-session.json", json.dumps(session))
    if recorded is None:
        assert [t.id for t in load_plan(folder.name, str(tmp_path)).tasks] == ["IMPL-1"]
        return
    with pytest.raises(BadInputError) as caught:
        load_plan(folder.name, str(tmp_path))
    assert f"is still being planned (its tasks phase is {recorded})" in caught.value.message
    assert f"wfqueue resume {folder.name}" in caught.value.hint
