"""Checking a plan as a whole: ids, dependencies, cycles, and what each task does to which file.

One rule for a task's files (``file_faults``) serves ``wfqueue validate``, the checks before an execution and
the planners' repair of a model's answer, so a plan the repair passes is one validate passes. Pure given the
``existing`` and ``is_folder`` answers, but for ``validate_path``, which reads the plan from disk.
"""

from __future__ import annotations

import posixpath
import re
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel

from wfqueue.errors import BadInputError
from wfqueue.fsio import real_path
from wfqueue.gitcmd import gitlinks, tracked_files
from wfqueue.sessions import WORKFLOW_DIR, resolve_repo
from wfqueue.tasks_file import (
    OFF_LIMITS,
    PATH_HINT,
    LoadedTask,
    ProblemCode,
    TaskProblem,
    load_task_dir,
    parse_jsonl,
)
from wfqueue.unified_task import TaskFile, UnifiedTask

_PAST = {"modify": "modified", "delete": "deleted", "create": "created"}


def find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Cycles as ``[a, b, ..., a]`` (each depends on the next), each reported once.

    One cycle per DFS back edge, rotated to start at its smallest id. Iterative,
    so a 10 000-task chain does not hit the recursion limit. Unknown ids and
    self-dependencies are skipped: they are reported as problems of their own.
    """
    state = dict.fromkeys(graph, 0)  # 0 unvisited, 1 on the current path, 2 done
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for start, deps in graph.items():
        if state[start]:
            continue
        path, position = [start], {start: 0}
        stack = [iter(deps)]
        state[start] = 1
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                state[path[-1]] = 2
                del position[path.pop()]
                stack.pop()
            elif dep not in state or dep == path[-1]:
                continue
            elif state[dep] == 1:
                cycle = path[position[dep]:]
                first = cycle.index(min(cycle))
                key = tuple(cycle[first:] + cycle[:first])
                if key not in seen:  # a dependency listed twice is the same edge twice
                    seen.add(key)
                    cycles.append([*key, key[0]])
            elif state[dep] == 0:
                state[dep] = 1
                position[dep] = len(path)
                path.append(dep)
                stack.append(iter(graph[dep]))
    return cycles


def repo_relative(path: str) -> str | None:
    """The normalised repo-relative path, or None when it is absolute or escapes the repo."""
    posix = path.replace("\\", "/")
    if posix.startswith("/") or re.match(r"^[A-Za-z]:", posix):
        return None
    normal = posixpath.normpath(posix)
    return None if normal == ".." or normal.startswith("../") else normal


def on_disk(root: Path) -> Callable[[str], bool]:
    """Whether a path relative to ``root`` exists there (``check_plan``'s ``existing``)."""
    return lambda rel: (root / rel).exists()


def leaves_repository(root: Path) -> Callable[[str], bool]:
    """Whether a path relative to ``root``, lexically inside it, leads out of it through a symbolic link (a link
    the repository holds to a folder elsewhere): a task's change there would be written outside the repository."""
    inside = root.resolve()
    return lambda rel: not real_path(root / rel).is_relative_to(inside)


def in_repository(root: Path) -> Callable[[str], bool]:
    """Whether a path relative to ``root`` is there to change: on disk, or tracked by git (a sparse checkout
    leaves tracked files out of the folder, and an execution's worktrees have them)."""
    tracked = tracked_files(root)
    return lambda rel: rel in tracked or (root / rel).exists()


class FileActionsInPlan:
    """The files a plan's own tasks create and delete, so that a later task may modify what an earlier one
    creates, or create what an earlier one deletes: a task "comes after" another when that one is among its
    dependencies, directly or through others."""

    def __init__(self, tasks: Sequence[UnifiedTask]) -> None:
        self._by_action: dict[str, dict[str, list[str]]] = {"create": {}, "delete": {}}
        self._deps: dict[str, list[str]] = {}  # of the first task with each id, as references resolve
        for task in tasks:
            self._deps.setdefault(task.id, task.depends_on)
            for entry in task.files:
                rel = repo_relative(entry.path)
                if entry.action in self._by_action and rel is not None:
                    self._by_action[entry.action].setdefault(rel, []).append(task.id)

    def creators(self, rel: str) -> list[str]:
        return self._by_action["create"].get(rel, [])

    def deleters(self, rel: str) -> list[str]:
        return self._by_action["delete"].get(rel, [])

    def deleted_first(self, task_id: str, rel: str) -> tuple[str, bool] | None:
        """Another task deleting ``rel`` that may run before ``task_id`` changes it: its id, and whether
        ``task_id`` depends on it (else neither depends on the other, and the order they run in is the plan's
        line order). A deleter that depends on ``task_id`` runs after it, and a file created again in between
        is there to change."""
        for other in self.deleters(rel):
            if other == task_id or self.comes_after(other, [task_id]):
                continue
            after = self.comes_after(task_id, [other])
            if after and any(self.comes_after(task_id, [c]) and self.comes_after(c, [other])
                             for c in self.creators(rel)):
                continue
            return other, after
        return None

    def comes_after(self, task_id: str, others: list[str]) -> bool:
        """Whether one of ``others`` is among ``task_id``'s dependencies, direct or not. Breadth first, each id
        once: a dependency cycle (reported on its own) ends the walk."""
        wanted = set(others)
        seen = {task_id}
        queue = deque(self._deps.get(task_id, []))
        while queue:
            dep = queue.popleft()
            if dep in wanted:
                return True
            if dep not in seen:
                seen.add(dep)
                queue.extend(self._deps.get(dep, []))
        return False


class FileFault(BaseModel):
    """What is wrong with one ``files[]`` entry of a task: ``check_plan`` reports it, the planners' repair drops
    the entry (``wfqueue.repair``). ``what`` reads after the path: "is outside the repository"."""

    code: ProblemCode
    what: str
    advice: str


def file_faults(files: list[TaskFile], *, exists: Callable[[str], bool] | None,
                is_folder: Callable[[str], bool], task_id: str | None = None,
                plan: FileActionsInPlan | None = None,
                leaves: Callable[[str], bool] | None = None, executed: bool = False) -> list[FileFault | None]:
    """For each entry of one task's ``files[]``, in order, the first reason no execution could carry it out, or
    None: a path outside the repository or inside a folder no task may change, a folder named as a file, a
    second action for a path the task already names, a file to modify or delete that does not exist and that
    no task ``task_id`` comes after creates (``plan``), a file to create that exists and that no task
    ``task_id`` comes after deletes, but for a task an execution completed (``executed``: what it created is
    there once its branch is merged). ``exists`` and ``is_folder`` answer for a normalised
    repo-relative path; with ``exists`` None missing files are not looked for (no repository to look in)."""
    faults: list[FileFault | None] = []
    actions: dict[str, str] = {}  # the first action named for each path
    for entry in files:
        rel = repo_relative(entry.path)
        fault = None
        unusable = unusable_name(rel) if rel is not None else None
        if rel is None:
            fault = FileFault(code="missing_file", what="is outside the repository",
                              advice="use a path relative to the repo root")
        elif unusable is not None:
            fault = FileFault(code="bad_path", what=f"cannot name a file: {unusable}",
                              advice="name the file as it is in the repository")
        elif leaves is not None and leaves(rel):
            fault = FileFault(code="missing_file", what="is outside the repository (through a symbolic link)",
                              advice="name the file where it is in the repository, or leave it out")
        elif rel.split("/", 1)[0] in OFF_LIMITS:
            fault = FileFault(code="bad_path", what=f"is inside {rel.split('/', 1)[0]}/, which no task may change",
                              advice="name a file of the project")
        elif is_folder(rel):
            fault = FileFault(code="bad_path", what="is a folder, not a file",
                              advice="name the files in it the task changes")
        elif actions.setdefault(rel, entry.action) != entry.action:
            fault = FileFault(code="bad_path",
                              what=f"is both {_PAST[actions[rel]]} and {_PAST[entry.action]} by this task",
                              advice="keep one action for it")
        elif entry.action == "create" and not executed and exists is not None and exists(rel):
            deleters = plan.deleters(rel) if plan is not None else []
            if task_id is None or plan is None or not plan.comes_after(task_id, deleters):
                # A coding agent told to create a file writes it from scratch: the code it held would be lost.
                fault = FileFault(code="bad_path", what="is in the repository already but is to be created",
                                  advice="use action modify, or delete it in a task this one depends on")
        elif entry.action != "create" and exists is not None and not exists(rel):
            creators = plan.creators(rel) if plan is not None else []
            if not creators:
                fault = FileFault(code="missing_file", what=f"does not exist but is to be {_PAST[entry.action]}",
                                  advice="fix the path or use action create")
            elif task_id is None or plan is None or not plan.comes_after(task_id, creators):
                fault = FileFault(code="missing_file",
                                  what=f"does not exist until {creators[0]} creates it, and this task does not "
                                       f"depend on {creators[0]}",
                                  advice=f"add {creators[0]} to depends_on")
        elif entry.action != "create" and not executed and task_id is not None and plan is not None:
            fault = _deleted_first_fault(plan, task_id, rel, entry.action)
        faults.append(fault)
    return faults


def _deleted_first_fault(plan: FileActionsInPlan, task_id: str, rel: str, action: str) -> FileFault | None:
    """A file to modify or delete that another task of the plan may delete first: the later of the two found it
    gone, on every attempt."""
    found = plan.deleted_first(task_id, rel)
    if found is None:
        return None
    other, after = found
    if action == "delete":
        return FileFault(code="bad_path", what=f"is deleted by {other} too", advice="delete it in one task only")
    if after:
        return FileFault(code="missing_file", what=f"is deleted by {other}, which this task depends on, before "
                                                   "this task changes it",
                         advice=f"drop the change to it, or move the delete to a task that depends on {task_id}")
    return FileFault(code="bad_path", what=f"is deleted by {other}, and neither task depends on the other: the one "
                                           "run second finds what the first did",
                     advice=f"add {task_id} to {other}'s depends_on, so that the change comes before the delete")


# What git refuses in a branch name (`git check-ref-format`): an execution makes one per task,
# wfqueue/tasks/EXEC-ID/TASK-ID. A slash would nest it, and one id would be the folder of another's branch.
_NOT_IN_A_BRANCH = re.compile(r"[\x00-\x20\x7f~^:?*\[\\/]|\.\.|@\{")


def unusable_id(task_id: str) -> str | None:
    """Why ``task_id`` cannot name the git branch an execution makes for its task, or None."""
    if (bad := _NOT_IN_A_BRANCH.search(task_id)) is not None:
        return f"it holds {bad.group()!r}"
    if task_id.startswith("."):
        return "it begins with '.'"
    if task_id.endswith(".lock"):
        return "it ends with '.lock'"
    if task_id.endswith("."):
        return "it ends with '.'"
    if task_id == "@":
        return "it is '@'"
    return None


MAX_NAME_BYTES = 255  # bytes in one file or folder name (most file systems' limit)
MAX_PATH_BYTES = 4096  # bytes in a whole path (Linux's PATH_MAX)


def unusable_name(rel: str) -> str | None:
    """Why no file system could hold ``rel`` (looking for it failed with a traceback), or None."""
    if "\0" in rel:
        return "it holds a NUL character"
    encoded = rel.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_PATH_BYTES:
        return f"it is {len(encoded)} bytes long, more than a path may be ({MAX_PATH_BYTES})"
    longest = max(rel.split("/"), key=lambda part: len(part.encode("utf-8", "surrogateescape")))
    if len(longest.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        return f"its part {longest[:40]}... is longer than a file name may be ({MAX_NAME_BYTES} bytes)"
    return None


def completed_by_an_execution(task: UnifiedTask) -> bool:
    """Whether an execution completed ``task``, as it wrote back into the plan: ``status`` in a task file or an
    agent's plan, ``_execution.status`` in a lite plan's tasks.jsonl (docs/ARTIFACTS.md section 9)."""
    extra = task.model_extra or {}
    lite = extra.get("_execution")
    return extra.get("status") == "completed" or (isinstance(lite, dict) and lite.get("status") == "completed")


def check_plan(
    tasks: list[LoadedTask], repo: Path | None, existing: Callable[[str], bool] | None = None,
    submodules: list[str] | None = None,
) -> list[TaskProblem]:
    """Ids, dependencies, cycles and files[] paths across all tasks of one plan; ``submodules`` (the repository's,
    by default asked of git when ``repo`` is given) hold files no task may change."""
    if existing is None and repo is not None:
        existing = on_disk(repo.resolve())
    problems: list[TaskProblem] = []

    def add(loaded: LoadedTask, code: ProblemCode, message: str) -> None:
        problems.append(TaskProblem(location=loaded.location, task_id=loaded.task.id, code=code, message=message))

    first: dict[str, LoadedTask] = {}
    for loaded in tasks:
        tid = loaded.task.id
        if (why := unusable_id(tid)) is not None:
            add(loaded, "bad_id", f"id {tid!r} cannot name the git branch an execution makes for the task ({why}); "
                                  "use letters, digits, '-', '_' and '.'")
        if tid in first:
            add(loaded, "duplicate_id",
                f"duplicate id {tid} (first used at {first[tid].location}); give each task a unique id")
        else:
            first[tid] = loaded
    for loaded in tasks:
        for dep in loaded.task.depends_on:
            if dep == loaded.task.id:
                add(loaded, "self_dependency", f"{dep} depends on itself; remove it from depends_on")
            elif dep not in first:
                add(loaded, "unknown_dependency",
                    f"depends on {dep}, which no task in this plan has; fix the id or remove it")
    for cycle in find_cycles({tid: t.task.depends_on for tid, t in first.items()}):
        chain = " -> ".join(cycle)
        add(first[cycle[0]], "dependency_cycle", f"dependency cycle {chain}; remove one of these dependencies")
    is_folder = (lambda rel: (repo / rel).is_dir()) if repo is not None else (lambda _: False)
    plan = FileActionsInPlan([loaded.task for loaded in tasks])
    if submodules is None:
        submodules = gitlinks(repo) if repo is not None else []
    for loaded in tasks:
        faults = file_faults(loaded.task.files, exists=existing, is_folder=is_folder, task_id=loaded.task.id,
                             leaves=leaves_repository(repo) if repo is not None else None,
                             plan=plan, executed=completed_by_an_execution(loaded.task))
        said: set[str] = set()  # a task names a file once per symbol it changes there: one problem, not three
        for entry, fault in zip(loaded.task.files, faults, strict=True):
            if fault is None and (module := _submodule_holding(entry.path, submodules)) is not None:
                # On disk, but another repository's: no task worktree of this one holds it (validate and execute).
                fault = FileFault(code="bad_path", what=f"is inside the submodule {module}, another repository, "
                                                        "whose files no execution of this one changes",
                                  advice=f"plan and execute that part in that repository (`--repo {module}`, with "
                                         "paths relative to it), then record its new commit here")
            message = f"file {entry.path} {fault.what}; {fault.advice}" if fault is not None else ""
            if fault is not None and message not in said:
                said.add(message)
                add(loaded, fault.code, message)
    return problems


def _submodule_holding(path: str, submodules: list[str]) -> str | None:
    rel = repo_relative(path)
    return next((m for m in submodules if rel is not None and rel.startswith(m.rstrip("/") + "/")), None)


def default_repo(path: Path) -> Path:
    """X for a path under ``X/.workflow/``; else what ``resolve_repo(None)`` finds from the cwd."""
    for parent in path.resolve().parents:
        if parent.name == WORKFLOW_DIR:
            return parent.parent
    return resolve_repo(None)


def validate_path(path: Path, repo: Path | None) -> tuple[list[LoadedTask], list[TaskProblem]]:
    """Load and check a tasks.jsonl, a .task/ folder, or a session folder holding one; a file to change is there
    on disk or in git (``in_repository``)."""
    if not path.exists():
        raise BadInputError(f"{path}: no such file or folder", hint=PATH_HINT)
    if path.is_dir():
        if (path / "tasks.jsonl").is_file():
            source = path / "tasks.jsonl"
        elif (path / ".task").is_dir():
            source = path / ".task"
        elif path.name == ".task" or any(path.glob("*.json")):
            source = path
        else:
            raise BadInputError(f"{path}: holds no tasks.jsonl, .task/ folder or task .json files", hint=PATH_HINT)
    elif path.suffix == ".jsonl":
        source = path
    else:
        raise BadInputError(f"{path}: unsupported file type",
                            hint=f"{PATH_HINT}; for one .task/*.json, pass its folder")
    root = resolve_repo(repo) if repo is not None else default_repo(path)
    if source.is_dir():
        tasks, problems = load_task_dir(source)
    else:
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"{source}: cannot be read as UTF-8 text ({exc})", hint=PATH_HINT) from exc
        tasks, problems = parse_jsonl(text, name=source.name)
    return tasks, problems + check_plan(tasks, root, in_repository(root))
