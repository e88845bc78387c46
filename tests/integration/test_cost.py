"""Cost accounting end to end: the real CLI, embedded Redis and worker processes, the real SDK against the
local fake Messages API (tests/fake_anthropic.py), answered by the fake model of test_anthropic_e2e.

What is checked: every call the workers make is recorded per step and per session with its four token
counts (the totals equal what the server reported), plan.md / IMPL_PLAN.md and `wfqueue status --json`
show tokens and the estimated cost, `--budget 1k` stops new LLM work and ends a plan with no task failed (exit 1),
a bad `--budget` is refused with exit 2 before anything is written.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support import run_cli, run_cli_in_process, session_dir, wfqueue_env
from test_anthropic_e2e import COLLAB_REQUIREMENT, LITE_REQUIREMENT, WFS_REQUIREMENT, FakeModel, cli, step_kind

from tests.fake_anthropic import Always, FakeAnthropic, Reply
from wfqueue.usage import DEFAULT_PRICE_TABLE, PriceTable, Usage, cost

pytestmark = pytest.mark.integration

MODEL = "claude-sonnet-4-6"  # the settings' default model: priced by the default table


class MeteredFake(FakeAnthropic):
    """The fake server, also keeping the usage it reported for each answered request (in answer order)."""

    def __init__(self, responder: Any, faults: Any = None) -> None:
        super().__init__(responder, faults=faults)
        self.reported: list[tuple[str, dict[str, int]]] = []

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]], reply: Reply) -> dict[str, Any]:
        usage = super()._usage(body, content, reply)
        self.reported.append((step_kind(body), usage))
        return usage


def reported_total(fake: MeteredFake) -> Usage:
    total = Usage()
    for _, usage in fake.reported:
        total = total + Usage.from_api(usage)
    return total


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def status_json(repo: Path, session_id: str) -> dict[str, Any]:
    # No broker configured: the embedded Redis of the plan is gone, status reads usage.json.
    run = run_cli("status", session_id, "--repo", str(repo), "--json")
    assert run.code == 0, run.stderr
    return run.json()


def test_collab_usage_is_recorded_per_step_and_shown(sample_repo: Path) -> None:
    with MeteredFake(FakeModel()) as fake:
        run = cli(fake, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "3")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    areas = [s["focus_area"] for s in read_json(folder / "requirement-analysis.json")["sub_domains"]]
    usage = read_json(folder / "usage.json")

    # Per call: exactly the calls the server answered, with the four counts it reported.
    assert len(usage["calls"]) == len(fake.reported) == 5  # understand + (tool turn + answer) x 2 agents
    assert Counter(c["step"].split(":")[0] for c in usage["calls"]) == Counter(k for k, _ in fake.reported)
    for call in usage["calls"]:
        assert call["model"] == MODEL
        assert {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} <= set(call)
    # Per step and per session.
    assert sorted(usage["steps"]) == sorted(["understand", *(f"plan_area:{a}" for a in areas)])
    assert usage["steps"]["understand"]["calls"] == 1
    assert all(usage["steps"][f"plan_area:{a}"]["calls"] == 2 for a in areas)
    total = Usage.model_validate(usage["total"]["usage"])
    assert total == reported_total(fake)
    assert total.cache_read_tokens > 0 and total.cache_write_tokens > 0  # the agents share a cached prefix
    expected_cost = cost(total, MODEL, PriceTable(DEFAULT_PRICE_TABLE))
    assert expected_cost and usage["total"]["cost_usd"] == pytest.approx(expected_cost)
    assert usage["budget"] is None and usage["budget_exhausted"] is False

    plan = (folder / "plan.md").read_text()
    cost_section = plan.split("## Cost", 1)[1].split("\n## ", 1)[0]
    assert f"{total.total:,} tokens (input {total.input_tokens:,}" in cost_section
    cache = f"cache read {total.cache_read_tokens:,}, cache write {total.cache_write_tokens:,}) in 5 calls"
    assert cache in cost_section
    assert all(f"| plan_area:{a} | 2 |" in cost_section for a in areas) and "| understand | 1 |" in cost_section

    status = status_json(sample_repo, folder.name)
    assert status["usage"]["total"]["usage"] == usage["total"]["usage"]
    assert status["usage"]["total"]["cost_usd"] == pytest.approx(expected_cost)
    assert status["usage"]["summary"].startswith(f"{total.total:,} tokens") and "calls" not in status["usage"]
    text = run_cli("status", folder.name, "--repo", str(sample_repo))
    assert f"usage: {total.total:,} tokens" in text.stdout, text.stdout
    listing = run_cli("status", "--repo", str(sample_repo), "--json").json()
    assert listing[0]["usage"]["total"]["calls"] == 5


def test_lite_and_workflow_plans_show_their_usage(sample_repo: Path) -> None:
    with MeteredFake(FakeModel()) as fake:
        lite = cli(fake, "lite-plan", LITE_REQUIREMENT, "--repo", str(sample_repo))
        lite_calls = list(fake.reported)
        workflow = cli(fake, "plan", WFS_REQUIREMENT, "--repo", str(sample_repo))
    assert lite.code == 0 and workflow.code == 0, lite.stderr + workflow.stderr

    folder = session_dir(lite)
    usage = read_json(folder / "usage.json")
    assert sorted(usage["steps"]) == ["assess", "explore:integration-points", "explore:security", "lite_plan"]
    assert len(usage["calls"]) == len(lite_calls)
    assert f"**LLM usage** (cost estimated from the price_table setting): {usage['summary']}" in \
        (folder / "plan.md").read_text()

    wfs = session_dir(workflow)
    usage = read_json(wfs / "usage.json")
    assert sorted(usage["steps"]) == ["assess", "detect_conflicts", "explore:integration-points", "explore:security",
                                      "generate_tasks"]
    assert len(usage["calls"]) == len(fake.reported) - len(lite_calls)
    meta = read_json(wfs / "plan.json")["_metadata"]["usage"]
    assert meta["tokens"] == usage["total"]["usage"]["input_tokens"] + usage["total"]["usage"]["output_tokens"] + \
        usage["total"]["usage"]["cache_read_tokens"] + usage["total"]["usage"]["cache_write_tokens"]
    assert f"Planning LLM usage (cost estimated from the price_table setting): {usage['summary']}" in \
        (wfs / "IMPL_PLAN.md").read_text()


@pytest.mark.long
def test_a_token_budget_stops_new_llm_work_and_a_plan_with_no_task_is_failed(sample_repo: Path) -> None:
    with MeteredFake(FakeModel()) as fake:
        collab = cli(fake, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "3",
                     "--budget", "1k")
        after_collab = Counter(k for k, _ in fake.reported)
        lite = cli(fake, "lite-plan", LITE_REQUIREMENT, "--repo", str(sample_repo), "--budget", "1k tokens")
        after_lite = Counter(k for k, _ in fake.reported)
        workflow = cli(fake, "plan", WFS_REQUIREMENT, "--repo", str(sample_repo), "--budget", "1000")
        after_workflow = Counter(k for k, _ in fake.reported)
        wfs_status = status_json(sample_repo, session_dir(workflow).name)
        stopped_record = read_json(session_dir(workflow) / "workflow-session.json")
        stopped_usage = read_json(session_dir(workflow) / "usage.json")
        resumed = cli(fake, "resume", session_dir(workflow).name, "--repo", str(sample_repo), "--budget", "10m")

    # collab: the understanding alone spends more than 1k tokens; no agent calls the model.
    assert collab.code == 1, collab.stderr
    assert collab.json()["status"] == "failed" and collab.json()["tasks"] == 0
    assert after_collab == Counter({"understand": 1})
    folder = session_dir(collab)
    usage = read_json(folder / "usage.json")
    spent = usage["total"]["usage"]
    spent_total = sum(spent.values())
    assert usage["budget"] == {"dollars": None, "tokens": 1000} and usage["budget_exhausted"] is True
    plan = (folder / "plan.md").read_text()
    assert plan.count(f"budget exhausted: {spent_total:,} tokens of 1,000 tokens") == 2  # each failed area
    assert "- **Budget**: 1,000 tokens" in plan and "**exhausted**" in plan
    status = status_json(sample_repo, folder.name)
    assert status["status"] == "failed" and status["usage"]["budget_exhausted"] is True
    assert all(a["state"] == "failed" and a["error"].startswith("budget exhausted: ") for a in status["agents"])
    # Each stopped step says how to go on with this session, not with a placeholder for it.
    assert f"`wfqueue resume {folder.name} --budget LARGER`" in collab.stderr and "SESSION" not in collab.stderr

    # lite: the assessment (about 800 tokens here) runs; the angles that start once the budget is spent are
    # skipped (how many ran first depends on timing); planning never calls the model: failed, no tasks.
    assert lite.code == 1, lite.stderr
    assert lite.json()["status"] == "failed" and lite.json()["tasks"] == 0
    lite_calls = after_lite - after_collab
    assert lite_calls["assess"] == 1 and lite_calls["lite_plan"] == 0
    lite_usage = read_json(session_dir(lite) / "usage.json")
    assert lite_usage["budget_exhausted"] is True
    lite_plan = (session_dir(lite) / "plan.md").read_text()
    stopped = f"**Planning stopped**: budget exhausted: {sum(lite_usage['total']['usage'].values()):,} tokens of 1,000"
    assert stopped in lite_plan
    assert not (session_dir(lite) / "tasks.jsonl").exists()

    # workflow: the same; the phase that found the budget spent is marked failed so --session can continue.
    assert workflow.code == 1, workflow.stderr
    assert workflow.json()["status"] == "failed"
    workflow_calls = after_workflow - after_lite
    assert workflow_calls["assess"] == 1 and workflow_calls["generate_tasks"] == 0
    assert "failed" in stopped_record["phases"].values() and stopped_record["status"] == "failed"
    assert stopped_usage["budget_exhausted"] is True
    # The session says failed, with the way on: it read "interrupted", naming a resume that stopped at the same
    # cap; and a context phase whose angles the budget stopped was recorded done, so no resume explored them.
    assert wfs_status["status"] == "failed" and "--budget LARGER" in wfs_status["hint"], wfs_status
    assert resumed.code == 0, resumed.stderr
    assert resumed.json()["status"] == "completed" and resumed.json()["failed_angles"] == {}, resumed.stdout
    assert read_json(session_dir(workflow) / "workflow-session.json")["status"] == "active"


def test_a_step_that_keeps_calling_tools_stops_at_its_next_call_once_the_budget_is_spent(sample_repo: Path) -> None:
    """The budget was checked when a step began: agents of a model that never stops calling tools ran all their
    turns (25 calls, 71k tokens against a 3k budget) and the plan ended `completed`."""
    with MeteredFake(FakeModel(), faults=Always("tools_every_turn")) as fake:
        run = cli(fake, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2",
                  "--budget", "3k")
    assert run.code == 1, run.stderr
    # Every agent request offered tools, which this model always calls: left alone, each agent runs 12 turns.
    assert all(r.get("tools") for r in fake.requests if step_kind(r) == "plan_area")
    agent_calls = [kind for kind, _ in fake.reported if kind != "understand"]
    # Each agent makes at most the calls that began before the budget was seen spent: not its 12 turns.
    assert 0 < len(agent_calls) <= 4, Counter(agent_calls)
    usage = read_json(session_dir(run) / "usage.json")
    assert usage["budget_exhausted"] is True
    assert usage["total"]["calls"] == len(fake.reported)


def test_a_session_redis_forgot_still_counts_what_was_paid_before(sample_repo: Path) -> None:
    """Past the state's TTL (or with its data removed) Redis forgets a session: its resume counted the budget from
    zero, and paid again up to the whole budget."""
    with MeteredFake(FakeModel()) as fake:
        first = cli(fake, "lite-plan", LITE_REQUIREMENT, "--repo", str(sample_repo), "--budget", "1k")
        assert first.code == 1, first.stderr
        paid = len(fake.reported)
        shutil.rmtree(sample_repo / ".workflow" / ".queue")  # Redis's record of the session gone
        env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url,
                          NO_PROXY="127.0.0.1,localhost")
        again = run_cli("resume", session_dir(first).name, "--repo", str(sample_repo), "--budget", "1k", "--json",
                        env=env, timeout=240)
    assert len(fake.reported) == paid, "the resume paid for calls a spent budget forbids"
    assert again.code == 1 and "budget exhausted" in again.stdout + again.stderr
    usage = read_json(session_dir(first) / "usage.json")
    assert usage["total"]["calls"] == paid and usage["budget_exhausted"] is True


def test_a_plan_whose_first_step_fails_still_shows_what_its_calls_cost(sample_repo: Path) -> None:
    """The understanding's answer and its repair both unusable: two calls paid, and no usage.json, no usage in
    `status` (only the final step wrote it)."""
    with MeteredFake(FakeModel(), faults=Always("text_no_json")) as fake:
        run = cli(fake, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2")
    assert run.code == 1, run.stderr
    (folder,) = (sample_repo / ".workflow" / ".planning").iterdir()
    usage = read_json(folder / "usage.json")
    assert usage["total"]["calls"] == len(fake.reported) >= 2
    assert status_json(sample_repo, folder.name)["usage"]["total"]["calls"] == len(fake.reported)


def test_a_bad_budget_is_refused_before_anything_is_written(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch, sample_repo: Path) -> None:
    # collab-plan through a CLI process, the others through the same entry point in-process (nothing starts)
    for command, requirement in (("collab-plan", COLLAB_REQUIREMENT), ("lite-plan", LITE_REQUIREMENT),
                                 ("plan", WFS_REQUIREMENT)):
        args = (command, requirement, "--repo", str(sample_repo), "--provider", "offline", "-y", "--json",
                "--budget", "lots")
        run = run_cli(*args) if command == "collab-plan" else run_cli_in_process(capsys, monkeypatch, *args)
        assert run.code == 2, (command, run.stderr)
        assert "--budget" in run.stderr and "200k" in run.stderr and "$2.50" in run.stderr
    # A dollar budget for a model the price table does not know could never trigger.
    env = {"ANTHROPIC_API_KEY": "test-key", "WFQUEUE_MODEL": "claude-unknown-9"}
    run = run_cli_in_process(capsys, monkeypatch, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo),
                             "--provider", "anthropic", "-y", "--budget", "$2", env=env)
    assert run.code == 2 and "claude-unknown-9 has no price" in run.stderr, run.stderr
    assert not (sample_repo / ".workflow").exists()


def test_offline_plans_make_no_llm_calls(sample_repo: Path) -> None:
    run = run_cli("collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--provider", "offline", "-y",
                  "--json", "--budget", "$0.01")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    usage = read_json(folder / "usage.json")
    assert usage["calls"] == [] and usage["summary"] == "no LLM calls" and usage["budget_exhausted"] is False
    assert "- **Total**: no LLM calls" in (folder / "plan.md").read_text()
    assert status_json(sample_repo, folder.name)["usage"]["summary"] == "no LLM calls"


def test_a_plan_stopped_by_ctrl_c_bills_every_call_its_workers_were_answered(sample_repo: Path) -> None:
    """usage.json was written when Ctrl-C came, before the workers' warm stop let their running calls finish: it
    counted 1 call of the 5 the server had answered (a resume rewrote it right)."""
    import signal
    import time

    from support import cli_process, wait_until

    model = FakeModel()

    def slow_agents(body: dict[str, Any]) -> Any:
        if step_kind(body) != "understand":
            time.sleep(1.0)  # agents mid-call when the command is stopped; within the workers' 5 s stop grace
        return model(body)

    with MeteredFake(slow_agents) as fake:
        env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1")
        with cli_process("collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2",
                         "--provider", "anthropic", "-y", "--json", env=env) as plan:
            wait_until(lambda: any(r.get("system") and step_kind(r) != "understand" for r in fake.requests), 90,
                       "an agent's first call")
            plan.send_signal(signal.SIGINT)
            _, err = plan.communicate(timeout=120)
        answered = len(fake.reported)
    assert plan.returncode == 130, err
    (folder,) = (sample_repo / ".workflow" / ".planning").iterdir()
    usage = read_json(folder / "usage.json")
    assert usage["total"]["calls"] == answered and answered >= 2, (usage["total"], answered)


def test_a_lite_plan_its_budget_stopped_is_shown_for_acceptance_by_its_resume(sample_repo: Path) -> None:
    """A lite plan run without -y that its budget stopped before planning has a plan.md saying why, without the
    awaiting-acceptance mark: `resume --budget LARGER` planned it and took it as accepted, never shown."""
    from test_lite_interaction import drive

    with MeteredFake(FakeModel()) as fake:
        env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1")
        stopped = run_cli("lite-plan", LITE_REQUIREMENT, "--repo", str(sample_repo), "--provider", "anthropic",
                          "--budget", "1k", "--json", env=env)
        assert stopped.code == 1 and stopped.json()["status"] == "failed", stopped.stderr
        folder = session_dir(stopped)
        code, transcript = drive(sample_repo, [("allow, modify or cancel", "cancel")], env=env,
                                 command=("resume", folder.name), extra=("--budget", "10m"))
    assert code == 0 and '"status": "cancelled"' in transcript, transcript


def test_a_collab_plan_cancelled_at_its_split_still_shows_what_its_understanding_cost(sample_repo: Path) -> None:
    """The understanding was paid for, and each adjusted split again: cancelling said only "nothing was
    planned", with no usage.json and "usage: not recorded" in status (a cancelled lite plan shows its cost)."""
    from test_lite_interaction import drive

    with MeteredFake(FakeModel()) as fake:
        env = wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1")
        code, transcript = drive(sample_repo, [("start, adjust or cancel", "adjust"), ("how many sub-domains", "2"),
                                               ("start, adjust or cancel", "cancel")], env=env,
                                 command=("collab-plan", COLLAB_REQUIREMENT), extra=("--provider", "anthropic"))
    assert code == 0 and '"status": "cancelled"' in transcript, transcript
    assert len(fake.reported) >= 2  # the understanding, then the adjusted split
    (folder,) = (sample_repo / ".workflow" / ".planning").iterdir()
    assert read_json(folder / "usage.json")["total"]["calls"] == len(fake.reported)
    assert status_json(sample_repo, folder.name)["usage"]["total"]["calls"] == len(fake.reported)
