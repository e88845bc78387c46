"""How far a replan may go: the clarification questions, their safe defaults, and the UI
protocol that asks them (the terminal in the CLI, a fake in tests).

The selections bound what a replan changes. ``-y`` (and no terminal) uses the
safe defaults of ARTIFACTS §8 for every question: scope ``tasks_only``, task
changes ``update_only``, dependencies preserved, no ripple. An operation the
request states in so many words ("add a task ...", "remove IMPL-3", "IMPL-4
depends on IMPL-2") is the user's own answer to the matching question, so it
widens the recorded scope instead of being dropped; what the defaults still
forbid is anything *implicit*: re-wiring the dependents of a deleted task,
touching dependent tasks (ripple), applying a session-wide change outside the
chosen modules. With ``--interactive`` the answers are binding: a request that
goes beyond them is refused before anything is written.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from wfqueue.errors import OutsideSelectionError
from wfqueue.unified_task import UnifiedTask
from wfqueue.workflow_session.replan.intent import AddTask, ChangeRequest, DeleteTasks, EditDependencies, UpdateTask

Scope = Literal["tasks_only", "plan_update", "task_restructure", "comprehensive"]
SCOPES: tuple[Scope, ...] = ("tasks_only", "plan_update", "task_restructure", "comprehensive")
TaskChanges = Literal["update_only", "add_remove", "merge_split"]
UpdateType = Literal["requirements", "implementation", "focus_paths", "depends_on", "all"]
Ripple = Literal["no", "yes", "analyze"]
Decision = Literal["confirm", "adjust", "cancel"]
MAX_MODULE_OPTIONS = 6
# Which task-mode update type each field edit belongs to (seed Q1 "update type").
FIELD_TYPES: dict[str, UpdateType] = {"title": "requirements", "description": "requirements",
                                      "criterion": "requirements", "note": "requirements",
                                      "step": "implementation", "files": "focus_paths"}


class Option(BaseModel):
    value: str
    label: str


class Question(BaseModel):
    key: str
    text: str
    options: list[Option]
    default: list[str]
    multi: bool = False


def _all_updates() -> list[UpdateType]:
    return ["all"]


class Selections(BaseModel):
    scope: Scope = "tasks_only"
    modules: list[str] | None = Field(default=None, description="None: all affected modules")
    task_changes: TaskChanges = "update_only"
    dependency_changes: bool = False
    update_types: list[UpdateType] = Field(default_factory=_all_updates)
    ripple: Ripple = "no"
    answered: bool = Field(default=False, description="True when a user answered; False for the safe defaults")


SAFE_DEFAULTS = Selections()


class ReplanUI(Protocol):
    """What the replan needs from a user interface. Messages go to stderr in the CLI."""

    def info(self, message: str) -> None: ...

    def ask(self, question: Question) -> list[str]:
        """The chosen option values (empty: take the question's default)."""
        ...

    def ask_text(self, prompt: str) -> str:
        """Free text (the change request when none was given)."""
        ...

    def show_impact(self, text: str) -> None: ...

    def confirm(self, text: str) -> Decision: ...


def module_of(path: str) -> str:
    """``src/auth/login.py`` -> ``src/auth``; a top-level file is its own module."""
    parent = posixpath.dirname(path.replace("\\", "/").rstrip("/"))
    return parent or path


def module_options(tasks: list[UnifiedTask]) -> list[str]:
    counts = Counter(module_of(p) for t in tasks for p in [*t.focus_paths, *(f.path for f in t.files)])
    return [m for m, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:MAX_MODULE_OPTIONS]


def in_modules(paths: list[str], modules: list[str] | None) -> bool:
    """Whether a task with these paths (focus_paths and files[]) lies in one of ``modules``.
    A task without paths is in every module: nothing says it is outside."""
    if modules is None or not paths:
        return True
    return any(p == m or p.startswith(m.rstrip("/") + "/") for p in paths for m in modules)


def _structural(request: ChangeRequest) -> bool:
    return any(isinstance(op, (AddTask, DeleteTasks)) for op in request.operations)


def _edits_dependencies(request: ChangeRequest) -> bool:
    return any(isinstance(op, EditDependencies) for op in request.operations)


def requested_update_types(request: ChangeRequest) -> list[UpdateType]:
    types: list[UpdateType] = []
    for op in request.operations:
        kind: UpdateType | None = FIELD_TYPES.get(op.field) if isinstance(op, UpdateTask) else None
        kind = "depends_on" if isinstance(op, EditDependencies) else kind
        if kind and kind not in types:
            types.append(kind)
    return types


def request_defaults(request: ChangeRequest) -> Selections:
    """The safe defaults, with what the request states itself taken as answered."""
    structural = _structural(request)
    return Selections(scope="task_restructure" if structural else "tasks_only",
                      task_changes="add_remove" if structural else "update_only",
                      dependency_changes=False, update_types=requested_update_types(request) or ["all"])


def session_questions(scope: Scope, tasks: list[UnifiedTask], defaults: Selections,
                      edits_dependencies: bool = False) -> list[Question]:
    """Seed Q1-Q4 of session mode; Q2 from plan_update on, Q3 from task_restructure on."""
    questions = [Question(key="scope", text="修改范围 (modification scope)?", default=[defaults.scope], options=[
        Option(value="tasks_only", label="仅更新任务细节 (tasks_only)"),
        Option(value="plan_update", label="修改规划方案 (plan_update)"),
        Option(value="task_restructure", label="重构任务结构 (task_restructure)"),
        Option(value="comprehensive", label="全面重规划 (comprehensive)")])]
    rank = SCOPES.index(scope)
    if rank >= SCOPES.index("plan_update"):
        modules = module_options(tasks)
        questions.append(Question(key="modules", text="受影响模块 (affected modules)?", multi=True, default=["*"],
                                  options=[*(Option(value=m, label=m) for m in modules),
                                           Option(value="*", label="全部模块 (all)")]))
    if rank >= SCOPES.index("task_restructure"):
        questions.append(Question(key="task_changes", text="任务变更 (task changes)?", default=[defaults.task_changes],
                                  options=[Option(value="add_remove", label="添加/删除任务 (add_remove)"),
                                           Option(value="merge_split", label="合并/拆分任务 (merge_split)"),
                                           Option(value="update_only", label="仅更新内容 (update_only)")]))
    questions.append(Question(key="dependency_changes", text="依赖关系变更 (dependency changes)?",
                              default=["yes" if edits_dependencies else "no"],
                              options=[Option(value="yes", label="是，需要重新梳理依赖 (yes)"),
                                       Option(value="no", label="否，保持现有依赖 (no)")]))
    return questions


def task_questions(defaults: Selections) -> list[Question]:
    """Seed Q1-Q2 of task mode."""
    return [
        Question(key="update_types", text="更新类型 (update type)?", multi=True, default=list(defaults.update_types),
                 options=[Option(value="requirements", label="需求和验收标准 (requirements & acceptance)"),
                          Option(value="implementation", label="实现方案 (implementation_approach)"),
                          Option(value="focus_paths", label="文件范围 (focus_paths)"),
                          Option(value="depends_on", label="依赖关系 (depends_on)"),
                          Option(value="all", label="全部更新 (all)")]),
        Question(key="ripple", text="影响范围 (ripple effect)?", default=["no"],
                 options=[Option(value="yes", label="是，需要同步更新依赖任务 (yes)"),
                          Option(value="no", label="否，仅影响当前任务 (no)"),
                          Option(value="analyze", label="不确定，请帮我分析 (analyze)")]),
    ]


def _answer(ui: ReplanUI, question: Question) -> list[str]:
    allowed = {o.value for o in question.options}
    chosen = [v for v in ui.ask(question) if v in allowed] or question.default
    return chosen if question.multi else chosen[:1]


def clarify(ui: ReplanUI, request: ChangeRequest, tasks: list[UnifiedTask]) -> Selections:
    """Ask the seed's questions; defaults come from the request so accepting them all fits it."""
    defaults = request_defaults(request)
    if request.task_id is not None:
        q_types, q_ripple = task_questions(defaults)
        types = _answer(ui, q_types)
        return defaults.model_copy(update={"update_types": types, "ripple": _answer(ui, q_ripple)[0],
                                           "dependency_changes": "depends_on" in types or "all" in types,
                                           "answered": True})
    answer = _answer(ui, session_questions("tasks_only", tasks, defaults)[0])[0]
    scope = next(s for s in SCOPES if s == answer)  # the scope question offers SCOPES only
    answers: dict[str, list[str]] = {"scope": [scope]}
    follow_ups = session_questions(scope, tasks, defaults, _edits_dependencies(request))
    for question in follow_ups[1:]:
        answers[question.key] = _answer(ui, question)
    modules = answers.get("modules", ["*"])
    return Selections(scope=scope, modules=None if "*" in modules else modules,
                      task_changes=answers.get("task_changes", ["update_only"])[0],
                      dependency_changes=answers["dependency_changes"] == ["yes"],
                      update_types=defaults.update_types, answered=True)


def check_selections(request: ChangeRequest, selections: Selections) -> None:
    """Refuse (exit 2) a request that goes beyond answers the user gave; defaults never refuse."""
    if not selections.answered:
        return
    if _structural(request) and (selections.task_changes != "add_remove"
                                 or SCOPES.index(selections.scope) < SCOPES.index("task_restructure")):
        raise OutsideSelectionError(
            f"the request adds or deletes tasks, but the answers were scope {selections.scope}, "
            f"task changes {selections.task_changes}",
            hint="answer task_restructure (or comprehensive) and add_remove, or change the request")
    if request.task_id is not None:
        allowed = set(selections.update_types)
        outside = [t for t in requested_update_types(request) if "all" not in allowed and t not in allowed]
        if outside:
            raise OutsideSelectionError(f"the request changes {', '.join(outside)} of {request.task_id}, "
                                        f"but the update type answered was {', '.join(sorted(allowed))}",
                                        hint="answer 'all' or the matching update type")
    elif _edits_dependencies(request) and not selections.dependency_changes:
        raise OutsideSelectionError("the request changes dependencies, but the answer was to keep them",
                                    hint="answer yes to dependency changes, or leave dependencies out of the request")


def effective_scope(request: ChangeRequest, selections: Selections) -> Scope:
    """The scope recorded in the history: what was chosen, widened by what the request states."""
    if _structural(request) and SCOPES.index(selections.scope) < SCOPES.index("task_restructure"):
        return "task_restructure"
    return selections.scope
