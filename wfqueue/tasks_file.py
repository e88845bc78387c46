"""Reading, checking and writing unified task files (tasks.jsonl and .task/*.json).

Parsing is pure and returns problems instead of raising, so one run reports every
defect of a plan at once; ``wfqueue.plan_check`` checks a plan as a whole. Only
``load_task_dir`` touches the disk. The format is ARTIFACTS.md section 2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from wfqueue.sessions import WORKFLOW_DIR
from wfqueue.unified_task import UnifiedTask

ProblemCode = Literal[
    "invalid_json", "schema", "duplicate_id", "unknown_dependency", "self_dependency",
    "dependency_cycle", "missing_file", "not_an_object", "empty", "stray_copy", "bad_path", "not_ready", "bad_id",
]
# Folders no task may write: git's own, and wfqueue's sessions and broker (git ignores it; an execution's merge
# would lose the change).
OFF_LIMITS = (".git", WORKFLOW_DIR)
PATH_HINT = "pass a tasks.jsonl file, a .task/ folder, or a session folder that contains one"
# The 6-field layout has no verification or definition of done; these defaults
# keep mapped tasks valid while saying plainly that checking is manual.
LEGACY_VERIFICATION = "Check each acceptance criterion by hand."
LEGACY_DONE = "All acceptance criteria are met."
_LINE_RANGE = re.compile(r"^\d+(-\d+)?$")


class TaskProblem(BaseModel):
    location: str
    task_id: str | None
    code: ProblemCode
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class LoadedTask(BaseModel):
    task: UnifiedTask
    location: str
    legacy: bool


# -- the 6-field layout -------------------------------------------------------


def is_legacy(data: dict[str, Any]) -> bool:
    return ("context" in data or "flow_control" in data) and "convergence" not in data


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _target_file(entry: Any) -> Any:
    """``path``, ``path:symbol`` or ``path:symbol:lines`` -> a files[] entry."""
    if not isinstance(entry, str):
        return entry  # already an object (or garbage the schema check will name)
    path, _, rest = entry.partition(":")
    parts = [p for p in rest.split(":") if p]
    symbols = [p for p in parts if not _LINE_RANGE.match(p)]
    # The target is the symbol; a bare line range is the only location there is.
    target = ":".join(symbols) or ":".join(parts)
    return {"path": path, "target": target} if target else {"path": path}


def legacy_to_unified(data: dict[str, Any]) -> dict[str, Any]:
    """Map a 6-field task to the unified layout (ARTIFACTS.md section 2).

    Unified fields already present win over their legacy source. Legacy
    sub-fields with no unified home stay under ``context`` / ``flow_control``
    so nothing the planner wrote is lost.
    """
    out = {k: v for k, v in data.items() if not (k in ("context", "flow_control") and isinstance(v, dict))}
    context = dict(data["context"]) if isinstance(data.get("context"), dict) else {}
    flow = dict(data["flow_control"]) if isinstance(data.get("flow_control"), dict) else {}
    meta = dict(data["meta"]) if isinstance(data.get("meta"), dict) else None

    requirements = [str(r) for r in _as_list(context.pop("requirements", None))]
    out.setdefault("description", "\n".join(requirements))
    out.setdefault("implementation", requirements)
    if "convergence" not in out:
        out["convergence"] = {
            "criteria": _as_list(context.pop("acceptance", None)),
            "verification": LEGACY_VERIFICATION,
            "definition_of_done": LEGACY_DONE,
        }
    for source, key, field in ((context, "depends_on", "depends_on"), (context, "focus_paths", "focus_paths")):
        if key in source and field not in out:
            out[field] = _as_list(source.pop(key))
    if "target_files" in flow and "files" not in out:
        out["files"] = [_target_file(t) for t in _as_list(flow.pop("target_files"))]
    if meta is not None:
        if "type" in meta and "type" not in out:
            out["type"] = meta.pop("type")
        out["meta"] = meta
    for key, rest in (("context", context), ("flow_control", flow)):
        if rest:
            out[key] = rest
    return out


# -- parsing (pure) -----------------------------------------------------------


def field_path(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as a reader writes it: ``convergence.criteria[0]``."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    return text or "task"


def load_object(data: Any, location: str) -> tuple[LoadedTask | None, list[TaskProblem]]:
    """One decoded JSON value -> a task, or the problems that keep it from being one."""
    if not isinstance(data, dict):
        message = (f"expected a JSON object (one task), found {type(data).__name__}; "
                   "write each task as one {...} object")
        return None, [TaskProblem(location=location, task_id=None, code="not_an_object", message=message)]
    legacy = is_legacy(data)
    mapped = legacy_to_unified(data) if legacy else data
    task_id = mapped.get("id") if isinstance(mapped.get("id"), str) else None
    try:
        return LoadedTask(task=UnifiedTask.model_validate(mapped), location=location, legacy=legacy), []
    except ValidationError as exc:
        note = " (after mapping the 6-field layout)" if legacy else ""
        return None, [
            TaskProblem(
                location=location, task_id=task_id, code="schema",
                message=f"{field_path(err['loc'])}: {err['msg']}{note}; fix it to match the unified task schema",
            )
            for err in exc.errors()
        ]


def _invalid_json(location: str, exc: ValueError, with_line: bool) -> TaskProblem:
    if isinstance(exc, json.JSONDecodeError):
        where = f"line {exc.lineno} column {exc.colno}" if with_line else f"column {exc.colno}"
        message = f"invalid JSON at {where}: {exc.msg}; fix the syntax so it holds one JSON object"
    else:
        message = f"invalid JSON: {exc}; fix it so it holds one JSON object"
    return TaskProblem(location=location, task_id=None, code="invalid_json", message=message)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:  # JSON keeps the last silently: a second "id" renamed the task, and another was blamed
            raise ValueError(f"the key {key!r} is given twice in one object")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (a number must be finite)")


def loads_plan_json(text: str) -> Any:
    """JSON of a plan file, strictly: a key given twice in an object, NaN or Infinity, nesting too deep for the
    parser and numbers too long to convert are ValueErrors (the last two were tracebacks)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def parse_jsonl(text: str, name: str = "tasks.jsonl") -> tuple[list[LoadedTask], list[TaskProblem]]:
    tasks: list[LoadedTask] = []
    problems: list[TaskProblem] = []
    # split("\n"), not splitlines(): U+2028 and friends are legal inside JSON strings.
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if not line.strip():
            continue
        location = f"{name}:{number}"
        try:
            data = loads_plan_json(line)
        except ValueError as exc:
            problems.append(_invalid_json(location, exc, with_line=False))
            continue
        task, found = load_object(data, location)
        tasks.extend([task] if task else [])
        problems.extend(found)
    if not tasks and not problems:
        message = "no tasks in the file; write one task per line as a JSON object"
        problems.append(TaskProblem(location=name, task_id=None, code="empty", message=message))
    return tasks, problems


def dump_jsonl(tasks: list[UnifiedTask]) -> str:
    """One compact JSON object per line; unknown fields (even null ones) written back."""
    lines = [json.dumps(_json_ready(t), ensure_ascii=False, separators=(",", ":")) for t in tasks]
    return "".join(line + "\n" for line in lines)


def _json_ready(task: UnifiedTask) -> dict[str, Any]:
    # UnifiedTask.dump() drops every None, including null values of unknown
    # fields; keep a None when the input had it, drop only unset defaults.
    ready: dict[str, Any] = _drop_unset_nones(task.model_dump(mode="json"),
                                              task.model_dump(mode="json", exclude_unset=True))
    return ready


def _drop_unset_nones(full: Any, given: Any) -> Any:
    if isinstance(full, dict):
        seen = given if isinstance(given, dict) else {}
        return {k: _drop_unset_nones(v, seen.get(k)) for k, v in full.items() if v is not None or k in seen}
    if isinstance(full, list):
        seen_items = given if isinstance(given, list) else []
        return [_drop_unset_nones(v, seen_items[i] if i < len(seen_items) else None) for i, v in enumerate(full)]
    return full


# -- disk -----------------------------------------------------------------------


def load_task_dir(folder: Path) -> tuple[list[LoadedTask], list[TaskProblem]]:
    """Every ``*.json`` in a ``.task/`` folder, in sorted file-name order."""
    tasks: list[LoadedTask] = []
    problems: list[TaskProblem] = []
    files = sorted(p for p in folder.glob("*.json") if p.is_file())
    for file in files:
        location = f"{folder.name}/{file.name}"
        try:
            data = loads_plan_json(file.read_text(encoding="utf-8-sig"))
        except UnicodeDecodeError:
            message = "not UTF-8 text; save the task file as UTF-8 JSON"
            problems.append(TaskProblem(location=location, task_id=None, code="invalid_json", message=message))
            continue
        except ValueError as exc:
            problems.append(_invalid_json(location, exc, with_line=True))
            continue
        task, found = load_object(data, location)
        if task is not None and file.stem != task.task.id and (folder / f"{task.task.id}.json").is_file():
            # "IMPL-1 copy.json" beside IMPL-1.json: a file manager's copy, not a second task with that id.
            message = (f"holds task {task.task.id}, whose own file is {folder.name}/{task.task.id}.json: "
                       f"a copy? move it out of {folder.name}/")
            problems.append(TaskProblem(location=location, task_id=task.task.id, code="stray_copy", message=message))
            continue
        tasks.extend([task] if task else [])
        problems.extend(found)
    if not files:
        message = "no *.json task files in this folder; a plan needs at least one task"
        problems.append(TaskProblem(location=f"{folder.name}/", task_id=None, code="empty", message=message))
    return tasks, problems
