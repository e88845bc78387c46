"""A fake model for the local Messages API server (tests/fake_anthropic.py): it answers every planning
step of wfqueue with schema-valid content built from the request, as a responder
(``FakeAnthropic(FakeModel())``).

The step is recognised by its instructions (system block 2); the repository listing, the requirement
analysis, the focus area, the id range and the angle are read from the prompt. Tool-using steps
(explore, plan_area) first make one ``read`` call and build their answer from its result.
``FakeModel(wrong=True)`` answers schema-valid but wrong content (ids, dependencies, files).

:class:`SloppyUnderstanding` wraps a responder so that the understanding step names its sub-domains
badly: the same name twice, names that are no slugs, or a single sub-domain.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fake_anthropic import Reply, answer, tool_call

__all__ = ["GHOST", "STEP_MARKERS", "FakeModel", "SloppyUnderstanding", "step_kind"]

STEP_MARKERS = {
    "Step: understand the requirement": "understand",
    "Step: plan ONE sub-domain": "plan_area",
    "Step: assess the requirement": "assess",
    "Step: explore the repository from ONE angle": "explore",
    "Step: turn the assessment": "lite_plan",
    "Step: find conflicts": "detect_conflicts",
    "Step: generate the implementation tasks": "generate_tasks",
}
GHOST = "notes_api/ghost_limiter.py"  # never exists


# -- reading the request -------------------------------------------------------------------------


def step_kind(body: dict[str, Any]) -> str:
    instructions = body["system"][1]["text"]
    for marker, kind in STEP_MARKERS.items():
        if instructions.startswith(marker):
            return kind
    raise AssertionError(f"unknown step: {instructions[:80]}")


def between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0].strip()


def repo_files(body: dict[str, Any]) -> list[str]:
    listing = between(body["system"][0]["text"], "repository_files")
    return [m.group(1) for m in re.finditer(r"^(\S+) \(\d+ B\)$", listing, re.M)]


def code_files(body: dict[str, Any]) -> list[str]:
    return [f for f in repo_files(body) if f.endswith(".py") and not f.startswith("tests/")
            and not f.endswith("__init__.py")]


def first_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(b.get("content", "")) for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def wants_tool(body: dict[str, Any]) -> bool:
    """A tool step's first turn (the answer is not forced yet): make one read call."""
    return (body.get("tool_choice") or {}).get("type") != "none" and not tool_results(body)


def a_def_line(body: dict[str, Any]) -> tuple[int, str] | None:
    """(line, text) of the first ``def`` in what the read call returned."""
    for result in tool_results(body):
        for row in result.splitlines():
            number, _, text = row.partition("\t")
            if number.strip().isdigit() and text.lstrip().startswith("def "):
                return int(number), text.strip()
    return None


def unified(task_id: str, title: str, files: list[dict[str, Any]], deps: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": task_id, "title": title, "description": f"{title}: change what the requirement needs",
        "depends_on": deps or [], "type": "feature", "priority": "medium", "effort": "small",
        "convergence": {"criteria": [f"{title} works"], "verification": "python -m pytest -q",
                        "definition_of_done": "the change is in and the suite passes"},
        "files": files, "implementation": [f"change {f['path']}" for f in files],
    }


def modify(path: str) -> dict[str, Any]:
    return {"path": path, "action": "modify", "changes": ["apply the requirement"], "conflict_risk": "low"}


# -- the fake model ------------------------------------------------------------------------------


class FakeModel:
    """Answers each step from the request; ``wrong`` answers schema-valid but wrong content."""

    def __init__(self, *, wrong: bool = False) -> None:
        self.wrong = wrong

    def __call__(self, body: dict[str, Any]) -> Reply:
        kind = step_kind(body)
        return getattr(self, kind)(body)

    def understand(self, body: dict[str, Any]) -> Reply:
        dirs = sorted({f.rsplit("/", 1)[0] for f in code_files(body) if "/" in f}, key=lambda d: (-d.count("/"), d))
        most = int(re.search(r"at most (\d+) sub-domains", first_user_text(body)).group(1))  # type: ignore[union-attr]
        areas = [{"focus_area": d.rsplit("/", 1)[-1].replace("_", "-"), "description": f"the code in {d}",
                  "focus_paths": [d], "estimated_effort": "small", "dependencies": []} for d in dirs[:min(2, most)]]
        return answer({
            "complexity": "Medium",
            "understanding": {"objectives": ["limit requests per user"], "key_points": ["per-user counters"],
                              "constraints": [], "split_strategy": "one area per package", "clarifications": []},
            "sub_domains": areas,
        })

    def plan_area(self, body: dict[str, Any]) -> Reply:
        analysis = json.loads(between(body["system"][0]["text"], "requirement_analysis"))
        message = first_user_text(body)
        area = re.search(r"Plan the sub-domain `([^`]+)`", message).group(1)  # type: ignore[union-attr]
        subs = analysis["sub_domains"]
        position = next(i for i, s in enumerate(subs) if s["focus_area"] == area)
        first, _last = subs[position]["task_id_range"]
        other_first = subs[(position + 1) % len(subs)]["task_id_range"][0]
        prefix = subs[position]["focus_paths"][0].rstrip("/") + "/"
        mine = [f for f in code_files(body) if f.startswith(prefix)]
        if wants_tool(body):
            return tool_call("read", {"path": mine[0], "max_lines": 40})
        evidence = {"related_files": [{"path": mine[0], "relevance": 0.9, "reason": "read it"}],
                    "patterns": ["plain functions"], "constraints": []}
        draft = {"summary": f"{area} plan", "approach": "small steps", "recommended_execution": "Sequential",
                 "design_decisions": [{"decision": "keep it simple", "rationale": "r", "tradeoff": "t"}],
                 "evidence": evidence, "understanding": f"{area} is planned from {mine[0]}"}
        tid = f"TASK-{first:03d}"
        if not self.wrong:
            tasks = [unified(tid, f"{area}: first change", [modify(mine[0])])]
            if len(mine) > 1:
                tasks.append(unified(f"TASK-{first + 1:03d}", f"{area}: second change", [modify(mine[1])], [tid]))
            return answer({**draft, "tasks": tasks})
        # Ids in the other agent's range and duplicated, unknown and self dependencies, missing files,
        # and a dependency on the other agent's first task: with both agents doing it, a cycle.
        stray = f"TASK-{other_first + 49:03d}"
        tasks = [
            unified(tid, f"{area}: first change", [modify(mine[0])], [f"TASK-{other_first:03d}"]),
            unified(stray, f"{area}: stray id", [modify(mine[-1])], [tid, stray, "TASK-999"]),
            unified(tid, f"{area}: duplicate id", [modify(GHOST), modify(mine[0]),
                                                   {"path": f"{prefix}limits.py", "action": "create"}], [stray]),
            unified(f"TASK-{first + 9:03d}", f"{area}: only ghosts", [modify(GHOST)]),
        ]
        return answer({**draft, "tasks": tasks})

    def assess(self, body: dict[str, Any]) -> Reply:
        return answer({"complexity": "Medium", "scope": "two packages", "depth": "new checks", "risk": "low",
                       "dependencies": "none new", "preset": "feature", "angles": ["security", "integration-points"],
                       "needs_exploration": True, "exploration_reasons": ["the request path must be understood"]})

    def explore(self, body: dict[str, Any]) -> Reply:
        angle = re.search(r"from the angle `([^`]+)`", first_user_text(body)).group(1)  # type: ignore[union-attr]
        files = code_files(body)
        target = files[0] if angle == "security" else files[-1]
        if wants_tool(body):
            return tool_call("read", {"path": target})
        point = a_def_line(body)
        return answer({
            "angle": angle, "structure": [f"{target} holds the code for {angle}"],
            "relevant_files": [{"path": target, "relevance": "high", "rationale": "read it"},
                               {"path": files[1], "relevance": "high", "rationale": "next to it"}],
            "patterns": [{"description": "plain functions", "search": r"^def \w+", "example": "def f():"}],
            "integration_points": [{"file": target, "line": point[0], "description": "a function",
                                    "snippet": point[1]}] if point else [],
            "dependencies": [], "constraints": [f"keep {target} compatible"], "clarification_needs": [],
        })

    def lite_plan(self, body: dict[str, Any]) -> Reply:
        files = code_files(body)
        if not self.wrong:
            return answer({"understanding": "two steps", "tasks": [
                unified("TASK-001", "limits", [modify(files[0])]),
                unified("TASK-002", "wire in", [modify(files[1])], ["TASK-001"]),
            ]})
        return answer({"understanding": "three steps, badly numbered", "tasks": [
            unified("TASK-005", "limits", [modify(files[0]), modify(GHOST)], ["TASK-005"]),
            unified("TASK-005", "wire in", [modify(files[1])], ["TASK-005", "TASK-042"]),
            unified("TASK-1", "only ghosts", [modify(GHOST)], ["TASK-005"]),
        ]})

    def detect_conflicts(self, body: dict[str, Any]) -> Reply:
        context = json.loads(between(first_user_text(body), "context_package"))
        touched = [a["path"] for a in context["assets"]["source_code"]][:3]
        strategy = {"name": "", "approach": "a", "complexity": "Low", "risk": "Low", "pros": ["p"], "cons": ["c"],
                    "modifications": []}
        return answer({"conflicts": [{
            "id": "CON-001", "category": "ModuleOverlap", "severity": "High", "title": "Existing code overlaps",
            "description": "the change touches modules other code imports", "affected_files": touched,
            "strategies": [{**strategy, "name": "Extend in place", "modifications": ["extend existing modules"]},
                           {**strategy, "name": "New module", "complexity": "High"}],
            "recommended": 0,
        }]})

    def generate_tasks(self, body: dict[str, Any]) -> Reply:
        files = code_files(body)
        constraints = json.loads(between(first_user_text(body), "planning_constraints"))
        goal = json.loads(between(first_user_text(body), "structured_input"))["goal"]
        # As the prompt asks: each critical file is changed by a task.
        critical = [f for f in json.loads(between(first_user_text(body), "critical_files")) if f in files]
        note = f" Constraints: {'; '.join(constraints)}." if constraints else ""
        if not self.wrong:
            tasks = [unified("IMPL-1", "storage", [modify(f) for f in dict.fromkeys([files[-1], *critical])]),
                     unified("IMPL-2", "auth", [modify(files[0])], ["IMPL-1"])]
        else:  # out-of-order, duplicated ids; unknown dependency; a ghost file; a cycle between two tasks
            tasks = [unified("IMPL-4", "storage", [modify(files[-1]), modify(GHOST)], ["IMPL-7"]),
                     unified("IMPL-4", "auth", [modify(files[0])], ["IMPL-12"]),
                     unified("IMPL-7", "wire in", [modify(files[1])], ["IMPL-4", "IMPL-7"])]
        for t in tasks:  # as a model does, each task says which part of the goal it carries out
            t["description"] = f"{t['title']}: the {t['title']} part of: {goal}.{note}"
        return answer({"summary": f"{goal}, in two packages", "approach": "storage first", "tasks": tasks,
                       "design_decisions": [{"decision": "extend in place", "rationale": "r", "tradeoff": "t"}]})


SLUG_BREAKING = ["Rate Limiting!", "Storage & Auth (v2)", "API/Handlers", "Über Config"]


class SloppyUnderstanding:
    """Wraps a responder: the understanding step's answer names its sub-domains badly.

    ``mode`` is ``duplicate`` (every sub-domain takes the first one's name, focus paths kept),
    ``slug`` (names such as "Rate Limiting!") or ``single`` (only the first sub-domain). ``times``
    limits how many understanding answers are spoiled (None: every one, the repair round's too).
    """

    MODES = ("duplicate", "slug", "single")

    def __init__(self, model: Any, mode: str, *, times: int | None = None) -> None:
        if mode not in self.MODES:
            raise ValueError(f"mode is one of {self.MODES}")
        self.model, self.mode, self.times = model, mode, times
        self.spoiled = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = self.model(body)
        reply = answer(reply) if isinstance(reply, dict) else reply
        if (step_kind(body) != "understand" or reply.status >= 400 or reply.stop_reason != "end_turn"
                or (self.times is not None and self.spoiled >= self.times)):
            return reply
        result = json.loads(reply.content[0]["text"])
        areas = result["sub_domains"]
        if self.mode == "duplicate":
            areas = [{**a, "focus_area": areas[0]["focus_area"]} for a in areas]
        elif self.mode == "slug":
            areas = [{**a, "focus_area": SLUG_BREAKING[i % len(SLUG_BREAKING)]} for i, a in enumerate(areas)]
        else:
            areas = areas[:1]
        self.spoiled += 1
        return answer({**result, "sub_domains": areas})
