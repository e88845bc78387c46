"""System blocks and messages for each planning step. Pure: no I/O, no clock.

Layout of every request, in the order the prompt cache sees it (tools, system,
messages):

1. system block 1 — the role and the context every agent of a session shares:
   the repository listing, the requirement and, for sub-domain planning, the
   requirement analysis. It ends with ``cache_control: ephemeral`` so agents
   2..N of a chord read it from the cache. Nothing step- or agent-specific may
   go here, or the prefix stops matching byte for byte.
2. system block 2 — the instructions for the step type (same text for every
   agent running that step).
3. the first user message — this agent's inputs (focus area, angle, explorations...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from wfqueue.providers.base import (
    AssessStep,
    DetectConflictsStep,
    ExploreAngleStep,
    GenerateTasksStep,
    LitePlanStep,
    PlanAreaStep,
    Step,
    UnderstandStep,
)

__all__ = [
    "CACHE_CONTROL", "FINAL_TURN_TEXT", "Prompt", "build_prompt", "feedback_text", "repair_text", "shared_context",
    "step_instructions", "task_message",
]

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}

ROLE = """You are a planning agent of wfqueue, a system that plans software changes with several agents \
working in parallel. You read code and plan; you never write files. Your answer is one JSON object that \
matches the required schema; it is validated by code and each claim about the repository (paths, lines, \
patterns) is checked against the files. Name only files that exist, unless a task creates them."""

FINAL_TURN_TEXT = ("Your tool budget for this step is used up. Do not call any more tools: answer now with "
                   "the JSON object, based on what you have seen.")

TASK_RULES = """Every task: a unique id, a title, a description, convergence {criteria: 1-5 testable \
statements, verification: a command or check, definition_of_done}, depends_on (ids of earlier tasks of this \
plan only, no cycles), type, priority, effort, scope, focus_paths, files [{path relative to the repository \
root, action modify|create|delete, target, changes, conflict_risk}], implementation (ordered steps as \
strings), test {commands, unit, integration, manual_checks}, rationale and risks. Use null for a field you \
have nothing for. design_decisions are {decision, rationale, tradeoff}."""

INSTRUCTIONS: dict[str, str] = {
    "understand": """Step: understand the requirement and split it into sub-domains that separate agents \
can plan in parallel without editing the same files.
Answer: complexity (Low, Medium or High); understanding {objectives (at least one), key_points, constraints, \
split_strategy, clarifications}; sub_domains: between 2 and the maximum given in the message, each with \
a distinct focus_area (a kebab-case slug: lowercase letters, digits and hyphens, at most 40 characters), description, \
focus_paths (directories or files from the repository listing), estimated_effort (small, medium or large) and \
dependencies (focus_area slugs of other sub-domains). Task ids are allocated by code: do not invent any.""",
    "plan_area": f"""Step: plan ONE sub-domain of the requirement analysis above (named in the message). \
Look at the code with the tools before you plan.
Answer: summary, approach, recommended_execution (Sequential, Parallel or Phased), design_decisions, tasks, \
evidence {{related_files [{{path, relevance from 0 to 1, reason}}], patterns, constraints}} and understanding \
(your synthesis of the sub-domain, a few paragraphs).
Task ids are TASK-NNN numbers inside your id range only, in order from its first number. {TASK_RULES}""",
    "assess": """Step: assess the requirement before planning a lite plan.
Answer: complexity (Low, Medium or High) judged from four dimensions, each a short phrase with the reason: \
scope, depth, risk, dependencies. preset: the kind of change (architecture, security, performance, bugfix or \
feature). angles: 1 to 4 exploration angles as kebab-case words (about 1 for Low, 3 for Medium, 4 for High), \
for example architecture, dependencies, modularity, integration-points, security, auth-patterns, dataflow, \
validation, performance, bottlenecks, caching, data-access, error-handling, state-management, edge-cases, \
patterns, testing. needs_exploration: whether the code must be explored before planning, with \
exploration_reasons. When the message says exploration is forced, needs_exploration must be true.""",
    "explore": """Step: explore the repository from ONE angle (named in the message) for the requirement. \
Use the tools: list, glob, grep and read the files that matter before you answer.
Answer: angle (the angle given), structure (short observations on how the relevant code is organised), \
relevant_files [{path, relevance high|medium|low, rationale}], patterns [{description, search: a Python \
regular expression that finds the pattern line by line, example}], integration_points [{file, line (1-based), \
description, snippet: text that is on that line}], dependencies [{source file, target file or module}], \
constraints, clarification_needs [{question, options, context}] for decisions only the user can make.
Every path, line, snippet and regular expression is verified against the files afterwards: report only what \
you have seen.""",
    "lite_plan": f"""Step: turn the assessment, the verified explorations and the user's answers into a \
plan of 2 to 7 tasks (one is enough when the requirement asks only for tests in one file or for one \
document). Findings marked unverified may be wrong: rely on verified ones.
Answer: understanding (your synthesis, a few paragraphs) and tasks. Task ids are TASK-001, TASK-002, ... \
in order. {TASK_RULES}""",
    "detect_conflicts": """Step: find conflicts between the planned change and the existing code, from the \
context package in the message.
Answer: conflicts, possibly none. Each: id CON-001, CON-002, ...; category (Architecture, API, Data, \
Dependency or ModuleOverlap); severity (Critical, High or Medium); title; description; affected_files; \
2 to 4 strategies {name, approach, complexity Low|Medium|High, risk Low|Medium|High, pros, cons, \
modifications: constraints the plan must follow if this strategy is chosen}; recommended: the index of the \
recommended strategy. Report real conflicts only.""",
    "generate_tasks": f"""Step: generate the implementation tasks of a workflow session from the structured \
input, the assessment, the verified explorations and the planning constraints in the message. Every \
planning constraint must be respected by the tasks it concerns. Each critical file (the code the gathered \
context ranks most relevant) is in a task: changed by it, or among its focus_paths for a task that only reads \
it (tests or documents about it); else the summary says why it is left out.
Answer: summary, approach, design_decisions and 1 to 10 tasks with ids IMPL-1, IMPL-2, ... in order. \
{TASK_RULES}""",
}


@dataclass(frozen=True)
class Prompt:
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)


def _json(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True, by_alias=True)
    elif isinstance(value, list):
        value = [v.model_dump(mode="json", exclude_none=True, by_alias=True) if isinstance(v, BaseModel) else v
                 for v in value]
    return json.dumps(value, ensure_ascii=False, indent=1)


def shared_context(step: Step, repo_summary: str) -> str:
    """Role plus what every agent of the session shares; identical for all agents of a chord."""
    parts = [ROLE, "", "<repository_files>", repo_summary, "</repository_files>", "",
             "<requirement>", step.requirement.strip(), "</requirement>"]
    if isinstance(step, PlanAreaStep):
        analysis = step.analysis.model_dump(mode="json", exclude_none=True)
        analysis.pop("original_requirement", None)
        parts += ["", "<requirement_analysis>", json.dumps(analysis, ensure_ascii=False, indent=1),
                  "</requirement_analysis>"]
    return "\n".join(parts)


def step_instructions(step: Step) -> str:
    return INSTRUCTIONS[step.name]


def _explorations(explorations: list[Any]) -> str:
    rows = [{"findings": e.findings.model_dump(mode="json", exclude_none=True),
             "checks": [{"kind": c.kind, "subject": c.subject, "verified": c.verified, "evidence": c.evidence}
                        for c in e.checks]}
            for e in explorations]
    return json.dumps(rows, ensure_ascii=False, indent=1)


def task_message(step: Step, *, tools: bool) -> str:
    """The agent's own inputs: everything that differs between agents of one chord."""
    if isinstance(step, UnderstandStep):
        body = f"Split the requirement into at most {step.max_agents} sub-domains (at least 2)."
    elif isinstance(step, PlanAreaStep):
        sub = step.analysis.area(step.focus_area)
        first, last = sub.task_id_range
        body = (f"Plan the sub-domain `{sub.focus_area}`: {sub.description}\n"
                f"Your id range: TASK-{first:03d} to TASK-{last:03d}.\n"
                f"Focus paths: {', '.join(sub.focus_paths) or '(none given)'}.\n"
                f"Depends on sub-domains: {', '.join(sub.dependencies) or '(none)'}.")
    elif isinstance(step, AssessStep):
        body = ("Exploration is forced: needs_exploration must be true." if step.force_explore
                else "Assess the requirement.")
    elif isinstance(step, ExploreAngleStep):
        body = f"Explore the repository from the angle `{step.angle}`."
    elif isinstance(step, LitePlanStep):
        body = "\n".join([
            "<assessment>", _json(step.assessment), "</assessment>",
            "<explorations>", _explorations(step.explorations), "</explorations>",
            "<clarification_answers>", _json(step.answers), "</clarification_answers>",
            "Plan the tasks.",
        ])
    elif isinstance(step, DetectConflictsStep):
        body = "\n".join(["<context_package>", _json(step.context), "</context_package>", "Find the conflicts."])
    elif isinstance(step, GenerateTasksStep):
        body = "\n".join([
            "<structured_input>", _json(step.structured), "</structured_input>",
            "<assessment>", _json(step.assessment), "</assessment>",
            "<explorations>", _explorations(step.explorations), "</explorations>",
            "<planning_constraints>", _json(step.constraints), "</planning_constraints>",
            "<critical_files>", _json(step.critical_files), "</critical_files>",
            "Generate the tasks.",
        ])
    else:
        raise TypeError(f"no prompt for step {type(step).__name__}")
    ending = ("Use the tools (list, glob, grep, read) to look at the code, then answer with the JSON object."
              if tools else "Answer with the JSON object.")
    return f"{body}{feedback_text(step.feedback)}\n\n{ending}"


def feedback_text(problems: list[str]) -> str:
    """The problems of the previous answer to a re-asked step (empty for a first ask). It goes in the
    user message, never in a system block, so the cached prefix stays the same for every attempt."""
    if not problems:
        return ""
    lines = "\n".join(f"- {p}" for p in problems)
    return ("\n\n<previous_answer_problems>\nYou answered this step before, and the answer validated but "
            f"could not be used:\n{lines}\nAnswer again with a complete JSON object that avoids these "
            "problems.\n</previous_answer_problems>")


def build_prompt(step: Step, repo_summary: str, *, tools: bool) -> Prompt:
    system: list[dict[str, Any]] = [
        {"type": "text", "text": shared_context(step, repo_summary), "cache_control": dict(CACHE_CONTROL)},
        {"type": "text", "text": step_instructions(step)},
    ]
    messages = [{"role": "user", "content": [{"type": "text", "text": task_message(step, tools=tools)}]}]
    return Prompt(system=system, messages=messages)


def repair_text(errors: str, *, truncated: bool = False, max_tokens: int | None = None) -> str:
    """The user turn of the one repair round: what was wrong, and a request for the whole object again."""
    head = (f"Your answer was cut off at the output limit ({max_tokens} tokens) and is not valid JSON. "
            "Answer again, more concisely." if truncated
            else "Your answer does not validate against the required schema.")
    return (f"{head}\nValidation errors:\n{errors}\n\n"
            "Answer again with the complete, corrected JSON object (not a patch), and nothing else.")
