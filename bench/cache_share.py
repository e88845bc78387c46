"""How much of the agents' input comes from the prompt cache: a 5-agent collab plan against the fake API.

    .venv/bin/python bench/cache_share.py [--agents 5] [--min-cache-tokens 0,1024,4096] [--write]

Runs `wfqueue collab-plan --provider anthropic` (the real CLI, embedded Redis, real workers, the real
SDK) against the local fake Messages API of tests/fake_anthropic.py, answered by a small scripted model:
the understanding splits the generated repository into one sub-domain per package, each agent makes one
``read`` tool call and then answers. The figure is, over the plan_area calls of agents 2..N (agents
ordered by when the server received their first call):

    share = cache read / (input + cache read + cache write)

The fake server hashes the cached prefix (tools, system blocks, messages up to each cache breakpoint),
so a read happens only when an agent's prefix is byte-identical to one written before: the figure shows
how much of the prompt the agents share byte for byte. ``--min-cache-tokens`` makes the fake refuse to
cache prefixes below that size, as the real API does (its minimum depends on the model). The usage the
session recorded (usage.json) is checked against what the server reported. ``--write`` puts the table
in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/fake_anthropic.py is imported as tests.fake_anthropic

from bench.benchdoc import write_section  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, Reply, answer, tool_call  # noqa: E402
from wfqueue.samples import make_service_repo  # noqa: E402

MARK_BEGIN, MARK_END = "<!-- cache_share:begin -->", "<!-- cache_share:end -->"
REQUIREMENT = "Add per-user rate limiting to every service API request"
SECTION = """
## Prompt cache: input read from cache by agents 2..N

`bench/cache_share.py` runs a 5-agent collab-plan with `--provider anthropic` against the fake
Messages API of `tests/fake_anthropic.py` (real CLI, embedded Redis, real workers, the real SDK) on a
generated repository with one package per agent. Every agent makes one `read` tool call and then
answers. The figure is, over the `plan_area` calls of agents 2..5 (agents in the order the server
received their first call), cache read / (input + cache read + cache write), from the token counts
the server reported; the session's own `usage.json` is checked against them call for call.

What the fake's cache model means: it hashes the prompt prefix up to each `cache_control` breakpoint
(tools, system blocks, messages) and reports a read only when that exact hash was written before. A
read for agents 2..N therefore shows that the prefix they send (tool definitions, the shared system
block with the repository listing, the requirement and the analysis, the step instructions) is
byte-identical to what agent 1 sent. It is not a measured hit rate of the real API:

- the fake counts the output schema (`output_config.format`, about 1,200 of its tokens for a
  sub-domain plan) as uncached input on every call; how the real API bills and caches the schema is
  not modelled. "Of the cacheable prefix only" leaves it out: cache read / (cache read + cache write);
- real hits also need the cached prefix to reach the model's minimum cacheable size (per Anthropic's
  prompt-caching documentation 1,024 tokens for Sonnet 4.5, 4,096 for Opus 4.5 and Haiku 4.5). The
  second and third rows make the fake refuse prefixes below 1,024 and 4,096 of its tokens (JSON
  length / 4, not real tokens; applied to the whole prefix, a simplification): this small generated
  repository's prompt is below 4,096, so a model with that minimum would cache nothing here. Larger
  repositories (longer listings) and longer analyses raise the shared prefix;
- and the write must have finished, within the cache lifetime (5 minutes), before the other agents'
  requests are processed.
"""


# -- the scripted model ------------------------------------------------------------------------------


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0].strip()


def _first_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def step_kind(body: dict[str, Any]) -> str:
    instructions = body["system"][1]["text"]
    if instructions.startswith("Step: understand the requirement"):
        return "understand"
    if instructions.startswith("Step: plan ONE sub-domain"):
        return "plan_area"
    raise ValueError(f"the bench model answers collab steps only, not: {instructions[:60]}")


def area_of(body: dict[str, Any]) -> str:
    match = re.search(r"Plan the sub-domain `([^`]+)`", _first_user_text(body))
    return match.group(1) if match else ""


def _task(task_id: str, area: str, path: str) -> dict[str, Any]:
    return {
        "id": task_id, "title": f"{area}: limit requests per user", "description": f"rate-limit {path}",
        "depends_on": [], "type": "feature", "priority": "medium", "effort": "small",
        "convergence": {"criteria": ["requests over the limit are refused"], "verification": "python -m pytest -q",
                        "definition_of_done": "the limit is enforced and tested"},
        "files": [{"path": path, "action": "modify", "changes": ["check the limit"], "conflict_risk": "low"}],
        "implementation": [f"check the per-user limit in {path}"],
    }


def model(body: dict[str, Any]) -> Reply:
    """Understanding: one sub-domain per package. An agent: a read of its api.py, then its answer."""
    listing = _between(body["system"][0]["text"], "repository_files")
    packages = sorted({m.group(1) for m in re.finditer(r"^app/(\w+)/api\.py ", listing, re.M)})
    if step_kind(body) == "understand":
        most = int(re.search(r"at most (\d+) sub-domains", _first_user_text(body)).group(1))  # type: ignore[union-attr]
        return answer({
            "complexity": "Medium",
            "understanding": {"objectives": ["limit requests per user"], "key_points": ["one check per API"],
                              "constraints": [], "split_strategy": "one area per package", "clarifications": []},
            "sub_domains": [{"focus_area": p, "description": f"the {p} service", "focus_paths": [f"app/{p}"],
                             "estimated_effort": "small", "dependencies": []} for p in packages[:most]],
        })
    area = area_of(body)
    path = f"app/{area}/api.py"
    answered = any(b.get("type") == "tool_result" for m in body["messages"] if isinstance(m["content"], list)
                   for b in m["content"])
    if not answered and (body.get("tool_choice") or {}).get("type") != "none":
        return tool_call("read", {"path": path})
    analysis = json.loads(_between(body["system"][0]["text"], "requirement_analysis"))
    first = next(s["task_id_range"][0] for s in analysis["sub_domains"] if s["focus_area"] == area)
    return answer({
        "summary": f"{area} plan", "approach": "one check per request", "recommended_execution": "Sequential",
        "design_decisions": [{"decision": "check in the handler", "rationale": "one place", "tradeoff": "none"}],
        "evidence": {"related_files": [{"path": path, "relevance": 0.9, "reason": "the handler"}],
                     "patterns": ["plain functions"], "constraints": []},
        "understanding": f"{area}: the handler serves every request", "tasks": [_task(f"TASK-{first:03d}", area, path)],
    })


class LoggingFake(FakeAnthropic):
    """The fake server, keeping (step, area, reported usage) of every answered call in the order it was served."""

    def __init__(self, min_cache_tokens: int) -> None:
        super().__init__(model, min_cache_tokens=min_cache_tokens)
        self.log: list[tuple[str, str, dict[str, int]]] = []

    def _usage(self, body: dict[str, Any], content: list[dict[str, Any]], reply: Reply) -> dict[str, Any]:
        usage = super()._usage(body, content, reply)
        self.log.append((step_kind(body), area_of(body), usage))  # handle() holds the lock: call order
        return usage


# -- one run ------------------------------------------------------------------------------------------


def _prompt_tokens(usage: dict[str, int]) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def measure(agents: int, min_cache_tokens: int, work: Path) -> dict[str, Any]:
    repo = make_service_repo(work / f"repo-{min_cache_tokens}", agents)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WFQUEUE_", "ANTHROPIC_"))}
    with LoggingFake(min_cache_tokens) as fake:
        env.update(ANTHROPIC_API_KEY="bench-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1,localhost")
        done = subprocess.run(
            [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo", str(repo),
             "--max-agents", str(agents), "--provider", "anthropic", "-y", "--json"],
            env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"collab-plan failed ({done.returncode}):\n{done.stderr}")
    result = json.loads(done.stdout)
    calls = [(area, usage) for kind, area, usage in fake.log if kind == "plan_area"]
    order = list(dict.fromkeys(area for area, _ in calls))  # agents by their first call
    if len(order) != agents:
        raise SystemExit(f"expected {agents} agents, the server saw {len(order)}: {order}")
    later = [(a, u) for a, u in calls if a in order[1:]]
    read = sum(u["cache_read_input_tokens"] for _, u in later)
    prompt = sum(_prompt_tokens(u) for _, u in later)
    first_calls = [next(u for a, u in calls if a == area) for area in order]
    agent1 = [u for a, u in calls if a == order[0]]

    # The session must have recorded exactly what the server reported.
    recorded = json.loads((Path(result["session_dir"]) / "usage.json").read_text(encoding="utf-8"))
    recorded_plan = [c for c in recorded["calls"] if c["step"].startswith("plan_area:")]
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    if len(recorded_plan) != len(calls) or any(sum(c[k] for c in recorded_plan) != sum(u[k] for _, u in calls)
                                               for k in keys):
        raise SystemExit("usage.json does not match what the server reported")
    return {
        "min_cache_tokens": min_cache_tokens, "agents": agents, "status": result["status"],
        "calls_2_n": len(later),
        "input": sum(u["input_tokens"] for _, u in later), "cache_read": read,
        "cache_write": sum(u["cache_creation_input_tokens"] for _, u in later),
        "share_2_n": read / prompt if prompt else 0.0,
        # The same over the cacheable part only (up to the last breakpoint): the fake also counts the output
        # schema (output_config.format) as input on every call and never caches it.
        "prefix_share_2_n": read / max(1, read + sum(u["cache_creation_input_tokens"] for _, u in later)),
        "first_call_share_2_n": (sum(u["cache_read_input_tokens"] for u in first_calls[1:])
                                 / max(1, sum(_prompt_tokens(u) for u in first_calls[1:]))),
        "share_agent_1": (sum(u["cache_read_input_tokens"] for u in agent1)
                          / max(1, sum(_prompt_tokens(u) for u in agent1))),
        "session_cost": recorded["summary"],
    }


def render(rows: list[dict[str, Any]], command: str) -> str:
    lines = [
        MARK_BEGIN,
        f"Command: `{command}` · Python {platform.python_version()}",
        "",
        "| fake's minimum cacheable prefix | agents | plan_area calls of agents 2..N | input | cache read "
        "| cache write | **share read from cache, agents 2..N** | of the cacheable prefix only "
        "| their first calls only | agent 1 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['min_cache_tokens']:,} | {r['agents']} | {r['calls_2_n']} | {r['input']:,} "
                     f"| {r['cache_read']:,} | {r['cache_write']:,} | **{r['share_2_n']:.1%}** "
                     f"| {r['prefix_share_2_n']:.1%} | {r['first_call_share_2_n']:.1%} | {r['share_agent_1']:.1%} |")
    lines += ["", f"Usage the session recorded (first row): {rows[0]['session_cost']}.", MARK_END]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=5, help="agents (sub-domains) of the plan, 2..")
    parser.add_argument("--min-cache-tokens", default="0,1024,4096",
                        help="comma-separated minimum cacheable prefix sizes of the fake, one run each")
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    args = parser.parse_args()
    if args.agents < 2:
        raise SystemExit("--agents must be at least 2: the figure is about agents 2..N")
    rows = []
    with tempfile.TemporaryDirectory(prefix="wfq-cache-") as tmp:
        for minimum in (int(m) for m in args.min_cache_tokens.split(",")):
            row = measure(args.agents, minimum, Path(tmp))
            rows.append(row)
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    print(f"share of input read from cache, agents 2..{args.agents}: {rows[0]['share_2_n']:.1%}")
    table = render(rows, ("python bench/cache_share.py " + " ".join(sys.argv[1:])).strip())
    print(table)
    if args.write:
        write_section(MARK_BEGIN, MARK_END, table, SECTION)


if __name__ == "__main__":
    main()
