"""Bodies of plan-note.md sections: task blocks, evidence, conflicts, dependencies.

``parse_task_pool(render_task_pool(tasks))`` gives the tasks back, and rendering
what was parsed gives the same text. Hand-written pools are read tolerantly:
English field names are accepted, a task header without ``[area]`` is attributed
to the section's owner (and reported), anything else malformed is reported with
its line number rather than dropped silently.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

from wfqueue.collab.models import (
    Conflict,
    Evidence,
    ModificationPoint,
    NoteTask,
    Understanding,
)
from wfqueue.collab.note import NoteProblem, PlanNote, collection_paused, has_odd_line_break, placeholder

NO_CONFLICTS = "✅ 无冲突检测到"

_TASK_HEADER = re.compile(r"^### (?P<id>TASK-\d+):\s*(?P<title>.*?)\s*(\[(?P<area>[^\]\[]+)\])?\s*$")
_FIELD = re.compile(r"^\*\*(?P<key>[^*]+)\*\*\s*[:：]\s*(?P<value>.*?)\s*$")
_POINT = re.compile(r"^[-*]\s+`(?P<target>[^`]+)`\s*[:：]?\s*(?P<summary>.*?)\s*$")
_TASK_REF = re.compile(r"TASK-\d+")

# One block as render_task writes it. Values are trimmed and single-line, so each group holds what the
# line-by-line reader would take from the same line; a block must be followed by blank lines only up to
# the next ``### `` line (anything else would belong to it). Anything off this shape is read line by line.
_VALUE = r"[^\s](?:[^\n]*[^\s])?"
_CANONICAL_TASK = re.compile(
    rf"(?<![^\n])### (?P<id>TASK-\d+): (?P<title>{_VALUE}) \[(?P<area>[^\]\[\s](?:[^\]\[\n]*[^\]\[\s])?)\]\n"
    rf"\*\*状态\*\*: (?P<status>{_VALUE})\n"
    rf"\*\*复杂度\*\*: (?P<complexity>{_VALUE})\n"
    rf"\*\*依赖\*\*: (?P<depends_on>{_VALUE})\n"
    rf"\*\*范围\*\*: (?P<scope>{_VALUE})\n"
    rf"\*\*修改点\*\*:\n"
    rf"(?P<points>(?:- `[^`\n]+`:(?: {_VALUE})?\n)*)"
    rf"\*\*冲突风险\*\*: (?P<conflict_risk>{_VALUE})\n"
    r"(?=\s*(?:^### |\Z))",
    re.MULTILINE,
)
_Model = TypeVar("_Model", bound=BaseModel)
_set = object.__setattr__  # as model_construct sets a model's slots
# A point line of a block _CANONICAL_TASK matched; the target split at its first ":" as _parse_point does.
_CANONICAL_POINT = re.compile(rf"- `([^`:\n]*):?([^`\n]*)`:(?: ({_VALUE}))?\n")

# Field labels as wfqueue writes them, and the aliases accepted from hand-written notes.
_FIELD_KEYS = {
    "状态": "status", "status": "status",
    "复杂度": "complexity", "complexity": "complexity",
    "依赖": "depends_on", "dependencies": "depends_on", "depends on": "depends_on",
    "范围": "scope", "scope": "scope",
    "修改点": "modification_points", "modification points": "modification_points",
    "冲突风险": "conflict_risk", "conflict risk": "conflict_risk",
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- task pools --------------------------------------------------------------------------


def render_task(task: NoteTask) -> str:
    depends = ", ".join(task.depends_on) if task.depends_on else "-"
    lines = [
        f"### {task.id}: {_one_line(task.title)} [{task.area}]",
        f"**状态**: {task.status}",
        f"**复杂度**: {task.complexity}",
        f"**依赖**: {depends}",
        f"**范围**: {_one_line(task.scope) or '-'}",
        "**修改点**:",
    ]
    for point in task.modification_points:
        target = f"{point.file}:{point.location}" if point.location else point.file
        lines.append(f"- `{target}`: {_one_line(point.summary)}")
    lines.append(f"**冲突风险**: {task.conflict_risk}")
    return "\n".join(lines) + "\n"


def render_task_pool(tasks: list[NoteTask]) -> str:
    if not tasks:
        return placeholder("no tasks in this area")
    return "\n" + "\n".join(render_task(t) for t in tasks) + "\n"


def _parse_point(line: str) -> ModificationPoint | None:
    match = _POINT.match(line.strip())
    if not match:
        return None
    file, _, location = match.group("target").partition(":")
    return ModificationPoint(file=file.strip(), location=location.strip(), summary=match.group("summary"))


def parse_task_pool(body: str, area: str, first_line: int) -> tuple[list[NoteTask], list[NoteProblem]]:
    """Tasks of one task-pool body; ``first_line`` is the body's first line number.

    Blocks exactly as ``render_task`` writes them are read by one regex each; whatever lies between
    them (hand edits, malformed blocks) goes through the line-by-line reader, which restarts at every
    ``### `` line, so the two give the same tasks and problems as reading every line would."""
    if has_odd_line_break(body):  # line numbers below count "\n" only
        return _parse_lines(body, area, first_line)
    tasks: list[NoteTask] = []
    problems: list[NoteProblem] = []
    pos, line_no = 0, first_line
    for block in _CANONICAL_TASK.finditer(body):
        gap = body[pos : block.start()]
        if not gap.isspace():  # blank lines alone hold nothing
            found, issues = _parse_lines(gap, area, line_no)
            tasks += found
            problems += issues
        line_no += gap.count("\n")
        tasks.append(_canonical_task(block, line_no))
        pos = block.end()
        line_no += body.count("\n", block.start(), pos)
    if body[pos:].strip():
        found, issues = _parse_lines(body[pos:], area, line_no)
        tasks += found
        problems += issues
    return tasks, problems


def _built(model: type[_Model], values: dict[str, Any]) -> _Model:
    """``model.model_construct(**values)`` without its per-field Python work, for ``values`` that hold
    every field, in the order the model declares them, each already of its type: a 10 000-task note
    spent more time validating what _CANONICAL_TASK had just checked than reading it."""
    built = model.__new__(model)
    _set(built, "__dict__", values)
    _set(built, "__pydantic_fields_set__", set(values))
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built


def _canonical_task(block: re.Match[str], line_no: int) -> NoteTask:
    """The task of a block _CANONICAL_TASK matched: every value a trimmed one-line string (the id of the
    pattern NoteTask asks for), points and dependencies as the line-by-line reader would take them."""
    task_id, title, area, status, complexity, depends, scope, points, conflict_risk = block.groups()
    return _built(NoteTask, {
        "id": task_id, "title": title, "area": area, "status": status, "complexity": complexity,
        "depends_on": [] if depends == "-" else _TASK_REF.findall(depends),
        "scope": "" if scope == "-" else scope,
        "modification_points": [
            _built(ModificationPoint, {"file": file.strip(), "location": location.strip(), "summary": summary})
            for file, location, summary in _CANONICAL_POINT.findall(points)
        ],
        "conflict_risk": conflict_risk, "line": line_no,
    })


def _parse_lines(body: str, area: str, first_line: int) -> tuple[list[NoteTask], list[NoteProblem]]:
    """The tolerant reader: every line of ``body`` in turn."""
    tasks: list[NoteTask] = []
    problems: list[NoteProblem] = []
    fields: dict[str, object] | None = None
    points: list[ModificationPoint] = []  # the current task's modification points, also held in ``fields``
    in_points = False

    def close() -> None:
        if fields is not None:
            tasks.append(NoteTask.model_validate(fields))

    for offset, raw in enumerate(body.splitlines()):
        line_no = first_line + offset
        line = raw.rstrip()
        if line.startswith("### "):
            close()
            fields, in_points = None, False
            match = _TASK_HEADER.match(line)
            if not match or not match.group("title"):
                problems.append(
                    NoteProblem(line=line_no, message=f"'{line}' is not a task header ('### TASK-NNN: title [area]')")
                )
                continue
            owner = match.group("area")
            if owner is None:
                problems.append(
                    NoteProblem(line=line_no, message=f"{match.group('id')} has no [area]; attributed to '{area}'")
                )
            points = []
            fields = {"id": match.group("id"), "title": match.group("title"), "area": (owner or area).strip(),
                      "line": line_no, "modification_points": points}
            continue
        if fields is None or not line.strip():
            continue
        field = _FIELD.match(line.strip())
        key = _FIELD_KEYS.get(field.group("key").strip().lower()) if field else None
        if field and key:
            in_points = key == "modification_points"
            value = field.group("value")
            if key == "depends_on":
                fields[key] = _TASK_REF.findall(value)
            elif key == "scope":
                fields[key] = "" if value == "-" else value
            elif key != "modification_points":
                fields[key] = value
            continue
        point = _parse_point(line) if in_points else None
        if point is not None:
            points.append(point)
        else:
            problems.append(NoteProblem(line=line_no, message=f"unrecognised line in {fields['id']}: '{line.strip()}'"))
    close()
    return tasks, problems


def note_tasks(note: PlanNote) -> tuple[list[NoteTask], list[NoteProblem]]:
    """Every task of every task pool, in document order, plus parse problems."""
    tasks: list[NoteTask] = []
    problems: list[NoteProblem] = list(note.problems)
    seen: dict[str, int] = {}
    with collection_paused():  # thousands of tasks, all kept: see collection_paused
        for section in note.sections:
            if not section.is_task_pool:
                continue
            found, issues = parse_task_pool(section.body, note.area_of(section), section.line + 1)
            problems += issues
            for task in found:
                if task.id in seen:
                    problems.append(
                        NoteProblem(line=task.line or 0,
                                    message=f"{task.id} is defined twice (first on line {seen[task.id]})")
                    )
                else:
                    seen[task.id] = task.line or 0
            tasks += found
    return tasks, problems


# -- other section bodies ------------------------------------------------------------------


def _bullets(items: list[str], empty: str = "-") -> list[str]:
    return [f"- {_one_line(item)}" for item in items] or [f"- {empty}"]


def render_understanding(understanding: Understanding) -> str:
    lines = ["", "**核心目标**:", *_bullets(understanding.objectives)]
    lines += ["**关键点**:", *_bullets(understanding.key_points)]
    lines += ["**约束**:", *_bullets(understanding.constraints)]
    lines += [f"**拆分策略**: {_one_line(understanding.split_strategy)}"]
    lines += ["**待澄清**:", *_bullets(understanding.clarifications, empty="none")]
    return "\n".join(lines) + "\n\n"


def render_evidence(evidence: Evidence) -> str:
    lines = ["", "**相关文件**:"]
    lines += [f"- `{f.path}` (relevance {f.relevance:.2f}): {_one_line(f.reason)}"
              for f in evidence.related_files] or ["- -"]
    lines += ["**现有模式**:", *_bullets(evidence.patterns)]
    lines += ["**约束**:", *_bullets(evidence.constraints)]
    return "\n".join(lines) + "\n\n"


def render_failed_area(focus_area: str, reason: str) -> str:
    return f"\n> ⚠️ The {focus_area} agent failed: {_one_line(reason)}\n\n"


def render_conflicts(conflicts: list[Conflict]) -> str:
    if not conflicts:
        return f"\n{NO_CONFLICTS}\n\n"
    blocks = []
    for conflict in conflicts:
        blocks.append(
            "\n".join(
                [
                    f"### {conflict.id}: {_one_line(conflict.description)}",
                    f"**严重程度**: {conflict.severity}",
                    f"**涉及任务**: {', '.join(conflict.tasks_involved)}",
                    f"**涉及Agent**: {', '.join(conflict.agents_involved)}",
                    f"**问题详情**: {_one_line(conflict.details) or '-'}",
                    f"**建议解决方案**: {_one_line(conflict.suggested_resolution)}",
                    "**决策状态**: [ ] 待解决",
                ]
            )
            + "\n"
        )
    return "\n" + "\n".join(blocks) + "\n"


def render_dependencies(tasks: list[NoteTask]) -> str:
    area_of = {t.id: t.area for t in tasks}
    edges = [(t, dep) for t in tasks for dep in t.depends_on]
    if not edges:
        return "\n无依赖 (no task depends on another)\n\n"
    cross = sum(1 for t, dep in edges if area_of.get(dep, t.area) != t.area)
    lines = ["", f"跨子领域 (across areas): {cross} · 子领域内 (within an area): {len(edges) - cross}", ""]
    for task, dep in edges:
        lines.append(f"- {task.id} [{task.area}] → {dep} [{area_of.get(dep, 'unknown')}]")
    return "\n".join(lines) + "\n\n"
