"""Each task's execution state written back into the plan it came from (docs/ARTIFACTS.md section 9).

A lite plan's ``tasks.jsonl`` gets ``_execution`` on each executed task; a ``.task/*.json`` file (workflow
sessions, agent plans kept as task files) and a collaborative agent's ``plan.json`` task get top-level
``status`` / ``executed_at`` / ``result``; TODO_LIST.md gets ``- [x]`` and a link to the task's
``.summaries/IMPL-N-summary.md`` for a completed task. Every other field is
written back as it was read. :func:`runtime_fields` is pure; a plan file that cannot be read is left alone
(the execution's own records still hold every state).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from wfqueue.execute.model import ExecTask, ExecutablePlan
from wfqueue.execute.records import IN_FLIGHT, Execution, TaskRecord, iso
from wfqueue.execute.safety import checked_in
from wfqueue.fsio import atomic_write_text, dumps_json
from wfqueue.markdown import inline_code, table_cell
from wfqueue.workflow_session.render import SUMMARY_DIR
from wfqueue.workflow_session.session import TASK_DIR, TODO_FILE, load_session, save_session

# Execution's task states as the unified task's ``status`` names them (running is in_progress).
STATUS = {"pending": "pending", "running": "in_progress", "conflict": "conflict", "completed": "completed",
          "failed": "failed", "skipped": "skipped", "blocked": "blocked", "rejected": "rejected"}


def runtime_fields(task: ExecTask, record: TaskRecord, execution: Execution) -> dict[str, Any]:
    """``status``, ``executed_at``, ``result`` and wfqueue's ``commit``/``branch``/``attempts``/``executor``. Pure."""
    done = record.state == "completed"
    summary = {"completed": f"merged into {execution.branch}"}.get(record.state, record.reason or record.state)
    # A task in flight when its execution was interrupted is not in progress any more: it runs again on
    # --continue.
    interrupted = record.state in IN_FLIGHT and execution.status == "interrupted"
    return {
        "status": "pending" if interrupted else STATUS[record.state],
        "executed_at": iso(record.finished_at) if record.finished_at else None,
        "result": {"success": done, "files_modified": record.files_changed, "summary": summary,
                   "error": None if done else record.reason,
                   "convergence_verified": [done] * len(task.criteria)},
        "commit": record.commit, "branch": execution.branch, "attempts": record.attempt,
        "executor": execution.executor,
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _lite(path: Path, fields: dict[str, dict[str, Any]]) -> None:
    """Each executed task's line of ``tasks.jsonl`` gets ``_execution``; every other byte stays as it was read.
    Lines end at "\n" only, as the reader splits them: U+2028, legal unescaped inside a JSON string, split a task
    in two (the plan no longer read). A byte order mark and CRLF endings are kept: the first task of a file with a
    mark got no state, and every ending became LF."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return  # a plan that cannot be read is left alone: the execution's own records hold every state
    mark = "\ufeff" if text.startswith("\ufeff") else ""
    out: list[str] = []
    for part in text[len(mark):].split("\n"):
        line, ending = (part[:-1], "\r") if part.endswith("\r") else (part, "")
        try:
            entry = json.loads(line) if line.strip() else None
        except ValueError:
            entry = None
        if isinstance(entry, dict) and entry.get("id") in fields:
            entry["_execution"] = fields[str(entry["id"])]
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))  # as the plan was written
        out.append(line + ending)
    atomic_write_text(path, mark + "\n".join(out))


def _top_level(entry: dict[str, Any], values: dict[str, Any]) -> None:
    entry.update({k: v for k, v in values.items() if k not in ("commit", "branch", "attempts", "executor")})
    entry["execution"] = {k: values[k] for k in ("commit", "branch", "attempts", "executor")}


def _task_dir(folder: Path, fields: dict[str, dict[str, Any]]) -> None:
    for path in sorted(folder.glob("*.json")):
        entry = _read_json(path)
        if isinstance(entry, dict) and entry.get("id") in fields:
            _top_level(entry, fields[str(entry["id"])])
            atomic_write_text(path, dumps_json(entry))


def _agent_plan(path: Path, fields: dict[str, dict[str, Any]]) -> None:
    data = _read_json(path)
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list):
        if (path.parent / TASK_DIR).is_dir():
            _task_dir(path.parent / TASK_DIR, fields)
        return
    for entry in tasks:
        if isinstance(entry, dict) and entry.get("id") in fields:
            _top_level(entry, fields[str(entry["id"])])
    atomic_write_text(path, dumps_json(data))


# A TODO_LIST.md task line: its box, its id, and the rest (title and links, docs/ARTIFACTS.md §5).
_TODO_LINE = re.compile(r"^(\s*)- \[[ xX]\] \*\*([^*]+)\*\*(.*)$", re.MULTILINE)


def _ticked(match: re.Match[str], completed: set[str]) -> str:
    """A completed task's line, ticked, its task-file link now its summary's; what else it says (a link the
    user added) kept."""
    indent, task_id, rest = match.groups()
    if task_id not in completed:
        return match.group(0)
    summary = f"[✅](./{SUMMARY_DIR}/{task_id}-summary.md)"
    if summary not in rest:
        linked = rest.replace(f"[📋](./{TASK_DIR}/{task_id}.json)", summary)
        rest = linked if linked != rest else f"{rest.rstrip()} → {summary}"
    return f"{indent}- [x] **{task_id}**{rest}"


def _todo(path: Path, completed: set[str]) -> None:
    """A completed task's line is ticked and links to its summary, as a session planned with it done shows it. A
    file with CRLF endings keeps them (they all became LF)."""
    text = path.read_bytes().decode("utf-8")
    crlf = "\r\n" in text
    plain = text.replace("\r\n", "\n") if crlf else text
    ticked = _TODO_LINE.sub(lambda m: _ticked(m, completed), plain)
    if ticked != plain:
        atomic_write_text(path, ticked.replace("\n", "\r\n") if crlf else ticked)


def summary_md(task: ExecTask, values: dict[str, Any]) -> str:
    """``.summaries/IMPL-N-summary.md``: what a completed task did, where it is, and what it was held to. Pure."""
    result = values["result"]
    lines = [f"# {task.id}: {table_cell(task.title)}", "",
             f"- **Status**: {values['status']}",
             f"- **Executed at**: {values['executed_at'] or '-'}",
             f"- **Commit**: `{values['commit'] or '-'}` ({result['summary']})",
             f"- **Executor**: {values['executor']}, attempt {values['attempts']}",
             "", "## Files modified", ""]
    lines += [f"- `{path}`" for path in result["files_modified"]] or ["- none"]
    lines += ["", "## Acceptance criteria", ""]
    lines += [f"- [{'x' if met else ' '}] {criterion}"
              for criterion, met in zip(task.criteria, result["convergence_verified"], strict=False)] or ["- none"]
    lines += ["", f"**Verification**: {inline_code(task.verification)}", ""]
    return "\n".join(lines)


def _summaries(folder: Path, plan: ExecutablePlan, fields: dict[str, dict[str, Any]], completed: set[str]) -> None:
    for task in plan.tasks:
        if task.id in completed and task.id in fields:
            atomic_write_text(folder / SUMMARY_DIR / f"{task.id}-summary.md", summary_md(task, fields[task.id]))


def _complete_session(folder: Path) -> None:
    """Every task of a workflow session merged: the session is ``completed``, which beat's maintenance archives
    once it has been idle WFQUEUE_ARCHIVE_AFTER_DAYS (nothing else marks a session completed)."""
    try:
        session = load_session(folder)
    except (OSError, ValueError):  # unreadable: left alone, as every other plan file here
        return
    if session.status != "completed":
        save_session(folder, session.model_copy(update={"status": "completed"}))


def kept_as_committed(plan: ExecutablePlan, execution: Execution) -> bool:
    """Whether the plan is a file (or folder) git tracks in the user's checkout, outside ``.workflow/``: its tasks'
    states are then not written into it. They dirtied the checkout an execution promises not to touch, and the
    next run of the plan was refused for it ("your working tree is not clean")."""
    return checked_in(Path(execution.repo), Path(plan.source))


def write_back(plan: ExecutablePlan, execution: Execution) -> None:
    """Each task's state into the plan's files (unless :func:`kept_as_committed`: execution.json and
    execution.md hold them all)."""
    if kept_as_committed(plan, execution):
        return
    fields = {t.id: runtime_fields(t, execution.tasks[t.id], execution) for t in plan.tasks if t.id in execution.tasks}
    source = Path(plan.source)
    if plan.kind == "lite" and source.is_file():
        _lite(source, fields)
    elif plan.kind == "workflow" and source.is_dir():
        _task_dir(source, fields)
        completed = {t for t, r in execution.tasks.items() if r.state == "completed"}
        _summaries(source.parent, plan, fields, completed)
        todo = source.parent / TODO_FILE
        if todo.is_file():
            _todo(todo, completed)
        if execution.status == "completed":
            _complete_session(source.parent)
    elif plan.kind == "collab":
        plans = [source] if source.is_file() else sorted(source.glob("*/plan.json"))
        for path in plans:
            _agent_plan(path, fields)
