"""collab-plan, lite-plan and plan against a Messages API having a bad day: every fifth call failing (429
with retry-after, 529, 500, a timeout, a reset connection, a cut stream), low rate limits announced in the
headers, answers cut at max_tokens or without JSON, a model that calls tools every turn, and an
understanding step that names its sub-domains badly.

The real CLI runs in a subprocess; one embedded Redis and one ``wfqueue worker`` (real processes, the real
SDK) serve every test of the module, pointed at the local fake (tests/fake_anthropic.py) in this process,
which each test reconfigures. Every plan must complete, and no turn the workers already had may be sent
again (``FakeAnthropic.repeated_turns``): a failed call is retried by itself, not by re-running its step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import CliRun, Cluster, run_cli, session_dir, shared_cluster
from test_anthropic_e2e import COLLAB_REQUIREMENT, LITE_REQUIREMENT, WFS_REQUIREMENT, check_lite, check_workflow

from tests.fake_anthropic import Always, Every, FakeAnthropic, Fault, RateLimits
from tests.fake_model import FakeModel, SloppyUnderstanding
from wfqueue.collab.note import parse_note
from wfqueue.collab.note_blocks import note_tasks

# One xdist worker runs the module, so its stack starts once (ungrouped, `--dist loadgroup` would spread the
# tests over the workers and start and stop the stack again each time a worker switched modules).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("anthropic-adversarial")]

CLIENT_TIMEOUT_S = 2  # the workers' WFQUEUE_ANTHROPIC_TIMEOUT_S; a held request outlasts it
LOW_START = 2  # requests available at the first request in the low-limits mode
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass
class Stack:
    fake: FakeAnthropic
    cluster: Cluster

    @property
    def env(self) -> dict[str, str]:
        return self.cluster.env


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One fake API, one Redis and one worker (4 processes) for the module: starting them per plan would
    cost more than the plans."""
    root = tmp_path_factory.mktemp("adversarial")
    with FakeAnthropic() as fake, shared_cluster(
            root, "adversarial", 4, ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url,
            NO_PROXY="127.0.0.1,localhost", WFQUEUE_ANTHROPIC_TIMEOUT_S=str(CLIENT_TIMEOUT_S),
            WFQUEUE_RETRY_BACKOFF_S="0.1", WFQUEUE_RETRY_BACKOFF_MAX_S="0.5",
            # No configured rate cap: the limits are the server's (and the tests share one Redis, where a
            # cap's budget would carry over); four turns keep endless tool calls short.
            WFQUEUE_RATE_LIMIT_RPM="0", WFQUEUE_ANTHROPIC_MAX_TURNS="4") as cluster:
        yield Stack(fake, cluster)


def cli(stack: Stack, *args: str) -> CliRun:
    return run_cli(*args, "--provider", "anthropic", "-y", "--json", env=stack.env, timeout=180)


def explain(stack: Stack, run: CliRun) -> str:
    """What to read when a plan did not complete: its stderr, the calls the server saw, the worker's log."""
    start = stack.fake.calls[0].at if stack.fake.calls else 0.0
    calls = [(c.number, round(c.at - start, 2), c.status, c.fault, c.stream, c.requests_remaining)
             for c in stack.fake.calls]
    return f"{run.stderr[-3000:]}\ncalls (number, s, status, fault, stream, requests remaining): {calls}\n" \
           f"worker log:\n{stack.cluster.worker_log()}"


def check_collab(stack: Stack, run: CliRun) -> dict[str, Any]:
    """A complete collaborative plan: every area planned, named by a unique slug; returns the analysis."""
    assert run.code == 0, explain(stack, run)
    payload = run.json()
    assert payload["status"] == "completed" and payload["tasks"] > 0, payload
    folder = session_dir(run)
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    areas = [s["focus_area"] for s in analysis["sub_domains"]]
    assert len(set(areas)) == len(areas) and all(SLUG.match(a) for a in areas), areas
    for area in areas:
        assert json.loads((folder / "agents" / area / "plan.json").read_text())["task_count"] > 0, area
    tasks, problems = note_tasks(parse_note((folder / "plan-note.md").read_text()))
    assert problems == [] and len(tasks) == payload["tasks"]
    return analysis


# -- the modes ------------------------------------------------------------------------------------------


@dataclass
class Mode:
    faults: Any = None
    limits: RateLimits | None = None
    expect: dict[str, int] = field(default_factory=dict)  # fault -> calls it must have hit, at least


MODES = {
    # 429 (retry-after: 1), 529 and 500 in turn: the three plans meet one or more each
    "429-529-500": Mode(Every(5, Fault("429", retry_after=1), "529", "500"), expect={"429": 1, "529": 1, "500": 1}),
    "timeout": Mode(Every(5, Fault("timeout", hold_s=CLIENT_TIMEOUT_S * 5)), expect={"timeout": 3}),
    "reset": Mode(Every(5, "reset"), expect={"reset": 3}),
    "cut-stream": Mode(Every(5, "cut_stream"), expect={"cut_stream": 3}),
    "truncated-json": Mode(Every(5, "truncated_json"), expect={"truncated_json": 3}),
    "text-without-json": Mode(Every(5, "text_no_json"), expect={"text_no_json": 3}),
    "tools-every-turn": Mode(Always("tools_every_turn"), expect={"tools_every_turn": 6}),
    # 120 requests a minute, all but 2 already spent at the first request: then one every half second, still
    # below the several a second the plans would send
    "low-limits": Mode(limits=RateLimits(requests_per_min=120, input_tokens_per_min=800_000,
                                         output_tokens_per_min=160_000, initial=LOW_START / 120)),
}


SLOW = {"429-529-500", "timeout"}  # retry-after and client timeouts: 15 s or more


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.long) if n in SLOW else n for n in MODES])
def test_plans_complete_on_a_bad_day(stack: Stack, sample_repo: Path, name: str) -> None:
    mode = MODES[name]
    fake = stack.fake.reconfigure(FakeModel(), faults=mode.faults, limits=mode.limits)

    collab = cli(stack, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2")
    check_collab(stack, collab)
    lite = cli(stack, "lite-plan", LITE_REQUIREMENT, "--repo", str(sample_repo))
    assert lite.code == 0, explain(stack, lite)
    check_lite(sample_repo, lite)
    workflow = cli(stack, "plan", WFS_REQUIREMENT, "--repo", str(sample_repo))
    assert workflow.code == 0, explain(stack, workflow)
    check_workflow(sample_repo, workflow)

    hit = fake.faulted()
    assert all(hit[kind] >= count for kind, count in mode.expect.items()), hit  # the bad day happened
    if name == "429-529-500":  # the command said why an agent or a step stood still, as the worker waited
        said = "".join(run.stderr for run in (collab, lite, workflow))
        assert re.search(r"the Anthropic API answered 429.*; sending again in \d+s", said), said[-3000:]
    if name == "cut-stream":
        assert all(c.stream for c in fake.calls if c.fault == "cut_stream"), "the cut answers were not streams"
    if name == "low-limits":
        # Two requests were available at the start, then one every half second: the plans (bursts of several
        # calls within a second) could only go on at the announced pace.
        assert len(fake.admitted) > LOW_START
        assert fake.rate_limited == 0, f"{fake.rate_limited} requests went over the announced limits"
    assert fake.repeated_turns() == 0, "a turn the workers had was sent again"


@pytest.mark.parametrize("mode", SloppyUnderstanding.MODES)
def test_sloppy_sub_domain_names_still_give_a_plan(stack: Stack, sample_repo: Path, mode: str) -> None:
    """The model names its sub-domains alike, breaks the slug rule, or proposes one, in every answer."""
    stack.fake.reconfigure(SloppyUnderstanding(FakeModel(), mode))

    run = cli(stack, "collab-plan", COLLAB_REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2")

    analysis = check_collab(stack, run)
    areas = [s["focus_area"] for s in analysis["sub_domains"]]
    plan_md = (session_dir(run) / "plan.md").read_text()
    if mode == "slug":
        assert len(areas) == 2 and "rate-limiting" in areas, areas
    else:  # the same name twice, or one area: a repair round, then a plan with the one usable area
        assert len(areas) >= 1 and analysis["total_agents"] == len(areas)
    if len(areas) == 1:
        assert "**One agent**" in plan_md
