"""Plans whose answers validate but cannot be used as they are, and a collab-plan whose agents all fail:
the real CLI, real Redis, real worker processes, the scripted provider. One Redis and one worker serve the
module (the scripts travel in each plan's provider spec): an embedded cluster per plan would cost more
than the plan, and embedded mode is proven by test_collab_embedded.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Cluster, session_dir, shared_cluster, write_script

from wfqueue.collab.note import parse_note

# One xdist worker runs the module, so its cluster starts once.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("answer-repair")]
REQUIREMENT = "Add per-user rate limiting to the API"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with shared_cluster(tmp_path_factory.mktemp("answer-repair"), "answer-repair", 3) as started:
        yield started


def understanding(*areas: tuple[str, list[str]]) -> dict:
    return {
        "complexity": "Medium",
        "understanding": {"objectives": ["Limit requests per user"], "split_strategy": "by package"},
        "sub_domains": [{"focus_area": name, "description": f"the {name} side", "focus_paths": paths}
                        for name, paths in areas],
    }


def test_two_alike_sub_domains_get_a_repair_round_and_the_plan_completes(cluster: Cluster, sample_repo: Path,
                                                                         tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", replies={
        "understand": understanding(("API", ["notes_api/api"]), ("api", ["notes_api/auth"])),
        "understand#2": understanding(("api", ["notes_api/api"]), ("Auth Tokens", ["notes_api/auth"])),
    })
    run = cluster.run("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "3", "-y",
                  "--provider", provider, "--json")
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed" and run.json()["tasks"] > 0
    folder = session_dir(run)
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    assert [s["focus_area"] for s in analysis["sub_domains"]] == ["api", "auth-tokens"]
    kinds = [r["kind"] for r in analysis["repairs"]]
    assert kinds == ["renamed_sub_domain", "merged_sub_domain", "asked_again", "renamed_sub_domain"]
    for area in ("api", "auth-tokens"):
        assert json.loads((folder / "agents" / area / "plan.json").read_text())["task_count"] > 0
    plan_md = (folder / "plan.md").read_text()
    assert "## Repairs of the Understanding Answer" in plan_md and "One agent" not in plan_md


def test_a_model_that_keeps_proposing_one_sub_domain_gets_a_one_agent_plan(cluster: Cluster, sample_repo: Path,
                                                                           tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", replies={
        "understand": understanding(("rate-limits", ["notes_api/api"]), ("Rate Limits", ["notes_api/storage"])),
        "understand#2": understanding(("rate_limits", ["notes_api/api", "notes_api/storage"])),
    })
    run = cluster.run("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "3", "-y",
                  "--provider", provider, "--json")
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed" and run.json()["tasks"] > 0
    folder = session_dir(run)
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    assert [s["focus_area"] for s in analysis["sub_domains"]] == ["rate-limits"]
    assert analysis["total_agents"] == 1
    plan_md = (folder / "plan.md").read_text()
    assert "**One agent**: the understanding step proposed a single sub-domain" in plan_md
    assert "still proposed one" in plan_md
    assert "split repaired (single_sub_domain)" in run.stderr  # the CLI says it as it happens


def test_a_plan_where_every_agent_fails_is_failed_and_names_each_error(cluster: Cluster, sample_repo: Path,
                                                                       tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", replies={
        "understand": understanding(("api", ["notes_api/api"]), ("auth", ["notes_api/auth"])),
    }, fail={
        "plan_area:api": "injected: api planner overloaded (529)",
        "plan_area:auth": "injected: auth planner timed out",
    })
    run = cluster.run("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2", "-y",
                  "--provider", provider)
    assert run.code == 1, run.stderr
    assert "failed: 0 tasks" in run.stdout
    assert "failed area: api: injected: api planner overloaded (529)" in run.stdout
    assert "failed area: auth: injected: auth planner timed out" in run.stdout
    folder = Path(next(line.split(None, 1)[1] for line in run.stdout.splitlines() if line.startswith("session:")))
    assert parse_note((folder / "plan-note.md").read_text()).front_matter["status"] == "failed"
    plan_md = (folder / "plan.md").read_text()
    assert "- **Status**: failed" in plan_md and "**Failed plan**: no agent produced tasks" in plan_md
    assert "`api`: injected: api planner overloaded (529)" in plan_md
    assert "`auth`: injected: auth planner timed out" in plan_md
    status = cluster.run("status", folder.name, "--repo", str(sample_repo), "--json")
    assert json.loads(status.stdout)["status"] == "failed"


def test_lite_angles_named_sloppily_are_repaired_and_the_plan_completes(cluster: Cluster, sample_repo: Path,
                                                                        tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", replies={"assess": {
        "complexity": "Medium", "scope": "medium", "depth": "medium", "risk": "low", "dependencies": "low",
        "preset": "feature", "angles": ["Integration_Points", "integration points", "Testing", "../etc", "a", "b"],
        "needs_exploration": True, "exploration_reasons": ["modifies existing code"]}})
    run = cluster.run("lite-plan", REQUIREMENT, "--repo", str(sample_repo), "-y", "--provider", provider, "--json")
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed" and run.json()["tasks"] >= 2
    folder = session_dir(run)
    manifest = json.loads((folder / "explorations-manifest.json").read_text())
    assert [e["angle"] for e in manifest["explorations"]] == ["integration-points", "testing", "etc", "a"]
    assert sorted(p.name for p in folder.glob("exploration-*.md") if p.name != "exploration-notes.md") == [
        "exploration-a.md", "exploration-etc.md", "exploration-integration-points.md", "exploration-testing.md"]
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    kinds = [r["kind"] for r in analysis["repairs"]]
    assert kinds[:5] == ["renamed_angle", "renamed_angle", "merged_angle", "renamed_angle", "renamed_angle"]
    assert kinds.count("dropped_angle") == 1


def test_workflow_conflicts_with_one_id_are_renumbered_and_each_is_resolved(cluster: Cluster, sample_repo: Path,
                                                                            tmp_path: Path) -> None:
    def conflict(title: str, recommended: int) -> dict:
        return {"id": "CON-001", "category": "API", "severity": "High", "title": title, "description": title,
                "recommended": recommended, "strategies": [
                    {"name": f"{title} A", "approach": "a", "complexity": "Low", "risk": "Low",
                     "modifications": [f"{title}: keep every existing signature"]},
                    {"name": f"{title} B", "approach": "b", "complexity": "Low", "risk": "Low",
                     "modifications": [f"{title}: version the API"]}]}

    provider = write_script(tmp_path / "script.json", replies={"detect_conflicts": {"conflicts": [
        conflict("Routes", 1), conflict("Storage", 9)]}})
    run = cluster.run("plan", "Refactor the storage layer and authentication into a modular architecture", "--repo",
                  str(sample_repo), "-y", "--provider", provider, "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    resolution = json.loads((folder / ".process" / "conflict-resolution.json").read_text())
    assert [(r["conflict_id"], r["strategy_name"]) for r in resolution["resolved_conflicts"]] == [
        ("CON-001", "Routes B"), ("CON-002", "Storage A")]
    repairs = json.loads((folder / "plan.json").read_text())["_metadata"]["repairs"]
    assert [(r["kind"], r["task_id"]) for r in repairs if r["kind"] != "renumbered" or r["task_id"].startswith("CON")
            ][:2] == [("renumbered", "CON-002"), ("reset_recommendation", "CON-002")]
