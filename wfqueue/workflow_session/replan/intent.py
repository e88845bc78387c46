"""Reading a replan request: what the user wants changed, as data. Pure (no I/O).

Accepted grammar
================

A request is split into clauses at new lines, ``;`` ``；`` ``。``, a sentence
period (``. `` followed by a space), and before ``and`` / ``then`` / a comma
when the next word starts another operation ("remove IMPL-3 and add a task
for X", "新增任务：X，删除 IMPL-3"). Matching ignores case; task ids may be
written ``IMPL-3``, ``impl-3`` or ``IMPL-003`` (all mean ``IMPL-3``). A list of
ids is separated by ``,`` ``、`` ``and`` ``和``.

Execution intent (both modes; session mode: every unfinished task in scope)
    use / using / switch to / change to / run with / execute with TOOL
    使用 TOOL 执行 / 用 TOOL 执行 / 改用 TOOL / 改为 TOOL 执行 / 切换到 TOOL
    where TOOL is one of the configured tools (default: codex, gemini, claude,
    qwen, agent). ``agent`` -> {method: agent, cli_tool: null, enable_resume:
    false}; any other tool -> {method: cli, cli_tool: TOOL, enable_resume: true}.
    Two different tools in one request are refused.

Session mode (no task id)
    add a task (to|for|:) TEXT [that depends on IDS]   create a task ...   (to the clause end)
    新增任务 TEXT [，依赖 IDS]     添加任务 / 增加任务 / 新增一个任务
    add TEXT / 新增 TEXT / 添加 TEXT / 增加 TEXT      (clearly asks for new work: a new task)
    remove | delete | drop [task] IDS                 删除 / 移除 / 去掉 [任务] IDS
    ID depends on IDS        (replaces ID's dependencies)    ID 依赖 IDS / ID 改为依赖 IDS
    ID also depends on IDS   (adds)                          ID 也依赖 IDS
    ID no longer depends on IDS   (removes)                  ID 不再依赖 IDS
    ID depends on nothing / ID has no dependencies           ID 无依赖 / ID 不依赖任何任务
    Anything else is refused with the list of these forms: free text never
    becomes a task unless it says "add".

Task mode (``wfqueue replan IMPL-N "..."``): the dependency forms above without
the leading id (``depends on IMPL-2``, ``no longer depends on IMPL-1``), and
    title: TEXT / rename to TEXT / 标题：TEXT / 重命名为 TEXT          -> title
    description: TEXT / 描述：TEXT                                      -> description (replaced)
    criterion: TEXT / add criterion TEXT / update acceptance criteria to include TEXT
    / 验收标准：TEXT / 验收标准包含 TEXT                                  -> one more criterion
    step: TEXT / implementation: TEXT / 实现步骤：TEXT                   -> one more implementation step
    files: A, B / 文件：A、B                                             -> focus_paths and files[]
    any other text                                                       -> appended to the description
Adding or deleting tasks is session mode only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from wfqueue.errors import UnrecognisedRequestError

# A setting should carry this list (the seed reads it from cli-tools.json); callers pass
# the configured tools, this default is only what works without configuration.
DEFAULT_TOOLS: tuple[str, ...] = ("codex", "gemini", "claude", "qwen", "agent")
AGENT_TOOL = "agent"
TASK_ID = re.compile(r"^IMPL-\d+(?:\.\d+)?$")

ACCEPTED_FORMS = (
    'add a task for TEXT [that depends on IMPL-2]   |  新增任务：TEXT',
    "remove IMPL-3   |  删除 IMPL-3",
    "IMPL-4 depends on IMPL-2 / also depends on / no longer depends on   |  IMPL-4 依赖 IMPL-2",
    "use codex / run with claude   |  改用 gemini / 使用 Agent 执行",
    'task mode: wfqueue replan IMPL-2 "title: ...; criterion: ...; step: ...; files: a, b; any text"',
)


class ExecutionIntent(BaseModel):
    method: Literal["agent", "cli"]
    cli_tool: str | None = None
    enable_resume: bool = False


class AddTask(BaseModel):
    kind: Literal["add"] = "add"
    title: str
    description: str
    depends_on: list[str] = Field(default_factory=list)


class DeleteTasks(BaseModel):
    kind: Literal["delete"] = "delete"
    task_ids: list[str]


class EditDependencies(BaseModel):
    kind: Literal["depends"] = "depends"
    task_id: str | None = Field(default=None, description="None: the task of task mode")
    mode: Literal["set", "add", "remove"]
    depends_on: list[str] = Field(default_factory=list)


UpdateField = Literal["title", "description", "criterion", "step", "files", "note"]


class UpdateTask(BaseModel):
    kind: Literal["update"] = "update"
    field: UpdateField
    value: str


Operation = Annotated[AddTask | DeleteTasks | EditDependencies | UpdateTask, Field(discriminator="kind")]


class ChangeRequest(BaseModel):
    text: str
    task_id: str | None = None
    intent: ExecutionIntent | None = None
    operations: list[Operation] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.intent is None and not self.operations


# -- ids ---------------------------------------------------------------------------------

_ID = r"IMPL-\d+(?:\.\d+)?"
_SEP = r"\s*(?:,|，|、|/|&|\band\b|和|及)\s*"
_IDS = rf"{_ID}(?:{_SEP}{_ID})*"


def normalise_id(text: str) -> str:
    """``impl-003`` -> ``IMPL-3``; ``IMPL-2.01`` -> ``IMPL-2.1``."""
    numbers = text.split("-", 1)[1].split(".")
    return "IMPL-" + ".".join(str(int(n)) for n in numbers)


def _ids(text: str) -> list[str]:
    found: list[str] = []
    for match in re.finditer(_ID, text, re.I):
        tid = normalise_id(match.group(0))
        if tid not in found:
            found.append(tid)
    return found


def task_id_argument(value: str | None) -> str | None:
    """The id when a positional argument is exactly a task id (``IMPL-2``), else None."""
    if value is None or not re.fullmatch(_ID, value.strip(), re.I):
        return None
    return normalise_id(value.strip())


# -- execution intent ----------------------------------------------------------------------


def _tool_group(tools: Sequence[str], named: bool = True) -> str:
    names = "|".join(re.escape(t) for t in sorted(tools, key=len, reverse=True))  # longest first
    return ("(?P<tool>" if named else "(?:") + names + r")(?![A-Za-z0-9_-])"


def _intent_patterns(tools: Sequence[str]) -> list[re.Pattern[str]]:
    tool = _tool_group(tools)
    english = (r"\b(?:use|using|switch(?:ed)?\s+to|change\s+to|run\s+(?:it\s+|them\s+)?(?:with|on|via|using)"
               r"|execute\s+(?:it\s+|them\s+)?(?:with|via|using|by))\s+(?:the\s+)?(?:an?\s+)?")
    chinese = r"(?:使用|用|改用|改为|切换到|切换为|交给)\s*"
    instead = rf"(?:\s+(?:cli|agent)\b)?(?:\s+instead\s+of\s+(?:the\s+)?(?:an?\s+)?{_tool_group(tools, named=False)})?"
    return [re.compile(english + tool + instead, re.I),
            re.compile(chinese + tool + r"\s*(?:来)?\s*(?:执行)?", re.I)]


def intent_for(tool: str) -> ExecutionIntent:
    if tool == AGENT_TOOL:
        return ExecutionIntent(method="agent", cli_tool=None, enable_resume=False)
    # The seed resumes CLI sessions (enable_resume = method !== 'agent').
    return ExecutionIntent(method="cli", cli_tool=tool, enable_resume=True)


def parse_execution_intent(text: str, tools: Sequence[str] = DEFAULT_TOOLS) -> ExecutionIntent | None:
    """The execution intent a request states, or None. Two different tools are refused."""
    return parse_request_intent(_take_intents(text, tools)[0])


def parse_request_intent(tools_named: list[str]) -> ExecutionIntent | None:
    distinct = list(dict.fromkeys(tools_named))
    if len(distinct) > 1:
        raise UnrecognisedRequestError(f"the request names more than one execution tool: {', '.join(distinct)}",
                                       hint="name one tool, e.g. 'use codex'")
    return intent_for(distinct[0]) if distinct else None


def _take_intents(text: str, tools: Sequence[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """The tools named by intent phrases in ``text`` and where the phrases are."""
    if not tools:
        return [], []
    names = {t.lower(): t for t in tools}
    found: list[str] = []
    spans: list[tuple[int, int]] = []
    for pattern in _intent_patterns(tools):
        for match in pattern.finditer(text):
            if any(s <= match.start() < e for s, e in spans):
                continue
            found.append(names[match.group("tool").lower()])
            spans.append(match.span())
    return found, spans


# -- operations ---------------------------------------------------------------------------

def _splitter(tools: Sequence[str]) -> re.Pattern[str]:
    # Split before "and"/"then"/a comma only when another operation follows, so
    # "remove IMPL-3 and IMPL-4" and "add a task for login and logout" stay whole.
    tool = _tool_group(tools, named=False) if tools else "(?!)"
    intent = rf"(?:use|using|run\s+with|switch\s+to|execute\s+with)\s+(?:the\s+)?(?:an?\s+)?{tool}"
    dep = rf"{_ID}\s+(?:also\s+|now\s+|should\s+|no\s+longer\s+)?depends?\b"
    english = rf"(?:remove|delete|drop|add|create)\b|{intent}|{dep}"
    chinese = (rf"(?:删除|移除|去掉|新增|添加|增加|IMPL-\d+\s*(?:也|不再)?依赖"
               rf"|(?:改用|使用|改为|切换到|切换为)\s*{tool})")
    return re.compile(rf"\n|;|；|。|\.\s+|\s+(?:and\s+then|and|then)\s+(?={english})|[，,]\s*(?={english}|{chinese})",
                      re.I)


_DELETE = re.compile(rf"(?:\b(?:remove|delete|drop)\s+(?:the\s+)?(?:tasks?\s+)?|(?:删除|移除|去掉)\s*(?:任务\s*)?)"
                     rf"(?P<ids>{_IDS})", re.I)
_NO_DEPS = r"(?:nothing|none|no\s+tasks?|无|任何任务|空)"
_DEPENDS = re.compile(
    rf"(?:(?P<subject>{_ID})\s*(?:should\s+|now\s+|must\s+)?)?"
    rf"(?P<verb>(?:also|additionally)\s+depends?\s+on|no\s+longer\s+depends?\s+on|(?:does\s+not|doesn't)\s+depend\s+on"
    rf"|depends?\s+on|depending\s+on|也依赖(?:于)?|不再依赖(?:于)?|(?:改为|改成)?依赖(?:于)?|不依赖(?:于)?)"
    rf"\s*(?P<ids>{_IDS}|{_NO_DEPS})"
    rf"|(?:(?P<subject2>{_ID})\s*)?(?:(?:has\s+)?no\s+dependencies|无依赖)",
    re.I,
)
_ADD_TASK = re.compile(r"(?:\b(?:add|create)\s+(?:a\s+|an\s+|one\s+|another\s+)?(?:new\s+)?task\b"
                       r"|(?:新增|添加|增加|创建)(?:一个)?(?:新)?任务)\s*(?:to\b|for\b|that\b|:|：|-)?\s*", re.I)
_ADD_BARE = re.compile(r"^\s*(?:please\s+)?(?:\badd\b|新增|添加|增加)\s*(?=\S)", re.I)
_LABELS: list[tuple[UpdateField, re.Pattern[str]]] = [
    ("title", re.compile(r"(?:\btitle\s*[:：]|\brename\s+(?:it\s+|the\s+task\s+)?(?:to|as)\b\s*:?"
                         r"|标题\s*[:：]|重命名为)\s*", re.I)),
    ("description", re.compile(r"(?:\bdescription\s*[:：]|描述\s*[:：])\s*", re.I)),
    ("criterion", re.compile(r"(?:\badd\s+(?:an?\s+)?(?:acceptance\s+)?criterion\b\s*:?"
                             r"|\b(?:acceptance\s+)?criteri(?:on|a)\s*[:：]"
                             r"|\b(?:update|extend|change)\s+(?:the\s+)?(?:acceptance\s+)?criteria\s+to\s+include\b"
                             r"|\b(?:acceptance\s+)?criteria\s+(?:should|must)\s+include\b"
                             r"|(?:新增|添加|增加)?验收标准\s*(?:[:：]|(?:需要|要|应)?包含))\s*", re.I)),
    ("step", re.compile(r"(?:\b(?:step|implementation)\s*[:：]|\badd\s+(?:a\s+)?step\b\s*:?"
                        r"|(?:实现步骤|步骤)\s*[:：])\s*", re.I)),
    ("files", re.compile(r"(?:\b(?:files?|focus(?:\s+paths)?)\s*[:：]|文件(?:范围)?\s*[:：])\s*", re.I)),
]
# Words that carry no instruction of their own once the operations are taken out
# ("use codex *for execution*", "*and* remove IMPL-3", "改用 gemini *执行所有任务*").
_FILLER_WORDS = {
    "and", "then", "also", "please", "for", "to", "the", "a", "an", "of", "with", "all", "every", "task", "tasks",
    "execution", "execute", "executing", "run", "running", "it", "its", "this", "that", "them", "instead", "now",
    "from", "on", "via", "by", "make", "let", "should", "be", "executed", "cli", "mode",
}
_FILLER_CJK = re.compile(r"执行|所有|全部|任务|并且|并|然后|请|来|的|吧|和|改为|都|让|一下")
_CONNECTORS = re.compile(r"^(?:\s|[,，、:：\-]|\band\b|\bthen\b|\bplease\b|和|并且|并|然后|请)+"
                         r"|(?:\s|[,，、:：\-]|\band\b|\bthen\b|和|并且|并|然后)+$", re.I)


# In task mode a "|" or a comma before a label with its colon starts a new clause: the accepted form
# "title: ... | criterion: ... | files: a, b" (the title took all of it). Only the colon forms: "..., rename it to
# parse_config" inside a step is the step's text, not a new title. A "|" elsewhere is the text's own (a criterion
# "`grep x | wc -l` prints 1").
_BEFORE_LABEL = re.compile(
    r"\s*[|,，]\s*(?=(?:title|description|(?:acceptance\s+)?criteri(?:on|a)|step|implementation|files?"
    r"|focus(?:\s+paths)?|add\s+(?:an?\s+)?(?:acceptance\s+)?criterion|add\s+(?:a\s+)?step"
    r"|标题|描述|(?:新增|添加|增加)?验收标准(?:(?:需要|要|应)?包含)?|实现步骤|步骤|文件(?:范围)?)\s*[:：])", re.I)


def _clauses(text: str, tools: Sequence[str], task_mode: bool = False) -> list[str]:
    parts = _BEFORE_LABEL.split(text) if task_mode else [text]
    return [c.strip() for part in parts for c in _splitter(tools).split(part) if c and c.strip()]


def _is_filler(text: str) -> bool:
    rest = _FILLER_CJK.sub(" ", text)
    words = re.findall(r"[^\W_]+", rest)
    return all(w.lower() in _FILLER_WORDS for w in words)


_QUOTE_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`"}


def _unquoted(text: str) -> str:
    """``text`` without the quotes around all of it: `"429"` is 429, but the quotes of `status "429"` and the
    backticks of `` `pytest` passes `` are the text's own."""
    if len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1] and text[0] not in text[1:-1] \
            and text[-1] not in text[1:-1]:
        return text[1:-1].strip()
    return text


def _clean(text: str) -> str:
    return _unquoted(_CONNECTORS.sub("", _unquoted(text.strip())).strip())


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        out.append(text[last:start])
        last = max(last, end)
    out.append(text[last:])
    return " ".join(part.strip() for part in out if part.strip())


def _title(text: str, limit: int = 100) -> str:
    """One line, at most ``limit`` characters (cut at a word), first letter upper-case."""
    line = " ".join(text.split()).rstrip(".。!！")
    if len(line) > limit:
        line = line[:limit].rsplit(" ", 1)[0].rstrip(",，;；") + "…"
    return line[:1].upper() + line[1:]


def _dependency_op(match: re.Match[str]) -> EditDependencies:
    subject = match.group("subject") or match.group("subject2")
    verb = (match.group("verb") or "").lower()
    ids_text = match.group("ids") or ""
    ids = _ids(ids_text)
    if not ids:  # "depends on nothing", "has no dependencies", "无依赖"
        mode: Literal["set", "add", "remove"] = "set"
    elif "also" in verb or "additionally" in verb or "也" in verb:
        mode = "add"
    elif "longer" in verb or "not" in verb or "n't" in verb or "不" in verb:
        mode = "remove"
    else:
        mode = "set"
    return EditDependencies(task_id=normalise_id(subject) if subject else None, mode=mode, depends_on=ids)


def _add_op(body: str, whole: str) -> AddTask:
    depends: list[str] = []
    tail = re.search(rf"[,，]?\s*(?:\b(?:which|that)\s+)?(?:\bdepends?\s+on|\bdepending\s+on|\bafter|依赖(?:于)?)"
                     rf"\s*(?P<ids>{_IDS})\s*$", body, re.I)
    if tail:
        depends = _ids(tail.group("ids"))
        body = body[:tail.start()]
    body = _clean(body)
    if not body:
        raise UnrecognisedRequestError(f"'{whole}': the new task needs a description",
                                       hint="e.g. 'add a task for audit logging'")
    return AddTask(title=_title(body), description=" ".join(body.split()), depends_on=depends)


def _parse_clause(clause: str, task_mode: bool, tools: Sequence[str]) -> tuple[list[Operation], list[str], str]:
    """The operations and execution tools of one clause, and the text left that none explains."""
    # A "to the end" form (add a task, title:, ...) owns the rest of the clause, so a
    # new task "to use gemini for summaries" keeps its title and sets no execution intent.
    ends: list[tuple[int, int, UpdateField | None]] = [
        (m.start(), m.end(), None) for m in [_ADD_TASK.search(clause)] if m
    ]
    if task_mode:  # labelled updates name fields of the one task of task mode
        ends += [(m.start(), m.end(), field) for field, p in _LABELS for m in [p.search(clause)] if m]
    owner = min(ends, key=lambda e: e[0]) if ends else None
    head = clause[:owner[0]] if owner else clause
    ops: list[Operation] = []
    named, spans = _take_intents(head, tools)
    for match in _DELETE.finditer(head):
        ops.append(DeleteTasks(task_ids=_ids(match.group("ids"))))
        spans.append(match.span())
    for match in _DEPENDS.finditer(head):
        if not any(s <= match.start() < e for s, e in spans):
            ops.append(_dependency_op(match))
            spans.append(match.span())
    leftover = _cut(head, spans)
    if owner is not None:
        _, end, field = owner
        if field is None:
            ops.append(_add_op(clause[end:], clause))
        else:
            value = _clean(clause[end:])
            if not value:
                raise UnrecognisedRequestError(f"'{clause}': nothing after the label", hint="e.g. 'title: New title'")
            ops.append(UpdateTask(field=field, value=value))
    elif not task_mode and not spans and _ADD_BARE.match(clause):
        ops.append(_add_op(clause, clause))  # "Add 2FA support": the user plainly asks for new work
        leftover = ""
    return ops, named, leftover


def parse_request(text: str, task_id: str | None = None, tools: Sequence[str] = DEFAULT_TOOLS) -> ChangeRequest:
    """Parse the change request of session mode (``task_id`` None) or task mode.

    Raises :class:`UnrecognisedRequestError` (exit 2) for text that fits no form in
    session mode, for add/delete in task mode, and for two different tools.
    """
    operations: list[Operation] = []
    named: list[str] = []
    notes: list[str] = []
    unknown: list[str] = []
    for clause in _clauses(text, tools, task_mode=task_id is not None):
        ops, tools_named, leftover = _parse_clause(clause, task_id is not None, tools)
        operations.extend(ops)
        named.extend(tools_named)
        leftover = _clean(leftover)
        if leftover and not _is_filler(leftover):
            (notes if task_id is not None else unknown).append(leftover if task_id is not None else clause)
    intent = parse_request_intent(named)
    if task_id is not None:
        if any(isinstance(op, (AddTask, DeleteTasks)) for op in operations):
            raise UnrecognisedRequestError(
                f"task mode changes {task_id} only; adding or deleting tasks is a session-mode change",
                hint=f'run without the task id: wfqueue replan "{" ".join(text.split())}"')
        operations = [op.model_copy(update={"task_id": op.task_id or task_id}) if isinstance(op, EditDependencies)
                      else op for op in operations]
        operations.extend(UpdateTask(field="note", value=" ".join(n.split())) for n in notes)
    elif unknown:
        shown = "; ".join(f"'{u}'" for u in unknown)
        raise UnrecognisedRequestError(f"cannot tell what to change from {shown}",
                                       hint="accepted forms: " + " || ".join(ACCEPTED_FORMS))
    if any(isinstance(op, EditDependencies) and op.task_id is None for op in operations):
        raise UnrecognisedRequestError("a dependency change needs the task it applies to",
                                       hint="e.g. 'IMPL-4 depends on IMPL-2'")
    return ChangeRequest(text=text, task_id=task_id, intent=intent, operations=operations)
