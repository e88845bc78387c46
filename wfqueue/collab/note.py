"""plan-note.md as a document: YAML front matter, a preamble, ``## `` sections.

Parsing keeps every section's body verbatim, so ``render_note(parse_note(x)) == x``
for any note wfqueue wrote, and unknown sections of hand-written notes survive.
Only the owner of a section replaces its body. Pure: strings in, models out.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from pydantic import BaseModel, Field

from wfqueue.collab.models import RequirementAnalysis, SubDomain
from wfqueue.errors import PlanNoteError

REQUIREMENT_HEADING = "需求理解"
DEPENDENCY_HEADING = "依赖关系"
CONFLICT_HEADING = "冲突标记"
TASK_POOL_PREFIX = "任务池 - "
EVIDENCE_PREFIX = "上下文证据 - "

_SECTION = re.compile(r"^## (?!#)(?P<heading>.*?)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A heading line as _SECTION reads it, at a line start (the first) or after a "\n" (the second: a literal
# start, so the regex engine skips ahead instead of trying every position of a large note).
_HEADING_LINE = re.compile(r"## (?!#)(?P<heading>[^\n]*?)[^\S\n]*(?=\n|\Z)")
_NEXT_HEADING = re.compile(r"\n## (?!#)(?P<heading>[^\n]*?)[^\S\n]*(?=\n|\Z)")
_FRONT_MATTER_CLOSE = re.compile(r"^---$", re.MULTILINE)
# Line breaks other than "\n" that str.splitlines honours; text holding one is read line by line.
_ODD_LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_FAST_LOADER: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)


def has_odd_line_break(text: str) -> bool:
    """Whether ``text`` breaks lines with anything but "\n" (then it is read one line at a time)."""
    return any(char in text for char in _ODD_LINE_BREAKS)


@contextmanager
def collection_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector from running inside the block (and restore its state after).

    Reading a large note builds tens of thousands of container objects that all stay alive; every
    collection they trigger while they are built walks them again, and each full one every object of
    the process (about a third of the time of a 10 000-task note). They are walked once when the block
    ends instead. A parse makes no reference cycles, so no memory is held back meanwhile. The switch is
    process-wide: another thread's block ending first only lets collections run again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class NoteProblem(BaseModel):
    line: int = Field(description="1-based line number in plan-note.md")
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class NoteSection(BaseModel):
    heading: str = Field(description="The heading text after '## '")
    body: str = Field(description="Everything up to the next section, verbatim")
    line: int = Field(default=0, exclude=True, description="1-based line of the heading")

    @property
    def is_task_pool(self) -> bool:
        return self.heading.startswith(TASK_POOL_PREFIX)

    @property
    def is_evidence(self) -> bool:
        return self.heading.startswith(EVIDENCE_PREFIX)


class PlanNote(BaseModel):
    front_matter: dict[str, Any] = Field(default_factory=dict)
    preamble: str = ""
    sections: list[NoteSection] = Field(default_factory=list)
    problems: list[NoteProblem] = Field(default_factory=list, exclude=True)

    def section(self, heading: str) -> NoteSection | None:
        for section in self.sections:
            if section.heading == heading:
                return section
        return None

    def area_of(self, section: NoteSection) -> str:
        """The focus area that owns a task-pool or evidence section."""
        for area, headings in (self.front_matter.get("agent_sections") or {}).items():
            if section.heading in (headings or []):
                return str(area)
        title = section.heading.split(" - ", 1)[-1]
        return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


# -- rendering ------------------------------------------------------------------------


def dump_front_matter(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10_000)


def render_note(note: PlanNote) -> str:
    parts: list[str] = []
    if note.front_matter:
        parts.append("---\n" + dump_front_matter(note.front_matter) + "---\n")
    parts.append(note.preamble)
    for section in note.sections:
        parts.append(f"## {section.heading}\n{section.body}")
    return "".join(parts)


# -- parsing --------------------------------------------------------------------------


def _load_yaml(raw: str) -> Any:
    """``yaml.safe_load``, through libyaml when PyYAML has it: the front matter of a 100-area note is
    a third of its parse time in pure Python. A document libyaml refuses is read again by the pure
    loader, so problems keep the messages and line numbers the pure loader gives."""
    if _FAST_LOADER is not None:
        try:
            return yaml.load(raw, Loader=_FAST_LOADER)  # CSafeLoader: safe_load through libyaml
        except yaml.YAMLError:
            pass
    return yaml.safe_load(raw)


def _closing_line(lines: list[str]) -> int | None:
    """The index of the '---' line that closes front matter opened on line 1 (None: it is never closed)."""
    return next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n") == "---"), None)


def _split_front_matter(lines: list[str], problems: list[NoteProblem]) -> tuple[dict[str, Any], int]:
    """Return the front matter and the index of the first line after it."""
    if not lines or lines[0].rstrip("\r\n") != "---":
        problems.append(NoteProblem(line=1, message="no YAML front matter ('---' on line 1)"))
        return {}, 0
    end = _closing_line(lines)
    if end is None:
        problems.append(NoteProblem(line=1, message="front matter opened with '---' is never closed"))
        return {}, 0
    raw = "".join(lines[1:end])
    try:
        data = _load_yaml(raw) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 1
        problem = getattr(exc, "problem", None) or "invalid YAML"
        problems.append(NoteProblem(line=line, message=f"front matter is not valid YAML: {problem}"))
        return {}, end + 1
    if not isinstance(data, dict):
        problems.append(NoteProblem(line=2, message="front matter must be a YAML mapping"))
        return {}, end + 1
    return data, end + 1


def _head_lines(text: str) -> list[str]:
    """The lines ``_split_front_matter`` reads: up to the first '---' line after line 1 (all of them
    when there is none), so a 2 MB note is not split into lines just to find its front matter."""
    close = _FRONT_MATTER_CLOSE.search(text, (text.find("\n") + 1) or len(text))
    end = len(text) if close is None else (text.find("\n", close.end()) + 1) or len(text)
    return text[:end].splitlines(keepends=True)


def _sections_by_line(lines: list[str], start: int) -> tuple[str, list[NoteSection]]:
    """Preamble and sections of ``lines[start:]``, one line at a time (any line breaks)."""
    preamble: list[str] = []
    sections: list[NoteSection] = []
    current: tuple[str, int, list[str]] | None = None
    in_fence = False
    for index in range(start, len(lines)):
        line = lines[index]
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _SECTION.match(line.rstrip("\r\n"))
        if match:
            if current:
                sections.append(NoteSection(heading=current[0], line=current[1], body="".join(current[2])))
            current = (match.group("heading"), index + 1, [])
        elif current:
            current[2].append(line)
        else:
            preamble.append(line)
    if current:
        sections.append(NoteSection(heading=current[0], line=current[1], body="".join(current[2])))
    return "".join(preamble), sections


def _marks(text: str, offset: int) -> list[tuple[int, re.Match[str] | None]]:
    """Start of every heading line (with its match) and fence line (None) from ``offset`` on, in order.

    Found by literal searches, which skip most of a large note without looking at its lines."""
    marks: list[tuple[int, re.Match[str] | None]] = []
    first = _HEADING_LINE.match(text, offset)
    if first:
        marks.append((offset, first))
    marks += [(m.start() + 1, m) for m in _NEXT_HEADING.finditer(text, offset)]
    for fence in ("```", "~~~"):
        at = text.find(fence, offset)
        while at != -1:
            start = text.rfind("\n", 0, at) + 1
            if start >= offset and (start == at or text[start:at].isspace()):
                marks.append((start, None))
            at = text.find(fence, at + 1)
    marks.sort(key=lambda mark: mark[0])
    return marks


_Span = tuple[str, int, int, int]  # a section's heading, line, and where its body starts and ends in the text


def _section_spans(text: str, offset: int, line_no: int) -> tuple[int, list[_Span]]:
    """Where the preamble of ``text[offset:]`` (whose first line is ``line_no``) ends, and every section's
    span, when "\n" is its only line break: heading and fence lines found by ``_marks``."""
    spans: list[_Span] = []
    current: tuple[str, int, int] | None = None  # heading, line, where its body starts
    preamble_end = len(text)
    in_fence = False
    counted = offset  # line_no is the line at this position
    for start, heading in _marks(text, offset):
        if heading is None:
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line_no += text.count("\n", counted, start)
        counted = start
        if current:
            spans.append((*current, start))
        else:
            preamble_end = start
        current = (heading.group("heading"), line_no, min(heading.end() + 1, len(text)))
    if current:
        spans.append((*current, len(text)))
    return preamble_end, spans


def _sections_by_scan(text: str, offset: int, line_no: int) -> tuple[str, list[NoteSection]]:
    """What ``_sections_by_line`` gives for ``text[offset:]`` (whose first line is ``line_no``) when
    "\n" is its only line break; bodies are slices of ``text``."""
    preamble_end, spans = _section_spans(text, offset, line_no)
    sections = [NoteSection(heading=heading, line=line, body=text[start:end]) for heading, line, start, end in spans]
    return text[offset:preamble_end], sections


def parse_note(text: str) -> PlanNote:
    """Parse plan-note.md; problems are collected with line numbers, not raised."""
    problems: list[NoteProblem] = []
    if has_odd_line_break(text):
        lines = text.splitlines(keepends=True)
        front_matter, start = _split_front_matter(lines, problems)
        preamble, sections = _sections_by_line(lines, start)
    else:
        head = _head_lines(text)
        front_matter, start = _split_front_matter(head, problems)
        preamble, sections = _sections_by_scan(text, sum(map(len, head[:start])), start + 1)
    seen: dict[str, int] = {}
    for section in sections:
        if section.heading in seen:
            problems.append(
                NoteProblem(
                    line=section.line,
                    message=f"section '## {section.heading}' repeats the one on line {seen[section.heading]}",
                )
            )
        seen.setdefault(section.heading, section.line)
    return PlanNote(front_matter=front_matter, preamble=preamble, sections=sections, problems=problems)


def parse_note_strict(text: str) -> PlanNote:
    """Parse, raising PlanNoteError with every problem when the note is malformed."""
    note = parse_note(text)
    if note.problems:
        raise PlanNoteError(
            f"plan-note.md has {len(note.problems)} problem(s)",
            problems=[str(p) for p in note.problems],
            hint="fix the lines named above, or delete the note and rerun the plan",
        )
    return note


# -- editing (pure: returns a new note) -------------------------------------------------


def replace_section_bodies(text: str, bodies: dict[str, str]) -> str | None:
    """``text`` with the bodies of the sections named in ``bodies`` replaced and every other byte kept,
    which is what parsing, ``replace_section`` and ``render_note`` give for a note wfqueue wrote, without
    reading or writing its YAML front matter: with 100 areas that is most of an agent's note update.
    None where this shortcut does not apply (a line break other than "\n", no closed front matter, a
    section missing or repeated): then parse and render."""
    if has_odd_line_break(text):
        return None
    head = _head_lines(text)
    closing = _closing_line(head)
    if not head or head[0].rstrip("\n") != "---" or closing is None:
        return None
    _, spans = _section_spans(text, sum(map(len, head[: closing + 1])), closing + 2)
    found = {heading: (start, end) for heading, _, start, end in spans if heading in bodies}
    if len(found) != len(bodies) or sum(heading in bodies for heading, *_ in spans) != len(bodies):
        return None
    parts, at = [], 0
    for heading, (start, end) in sorted(found.items(), key=lambda item: item[1][0]):
        parts += [text[at:start], bodies[heading]]
        at = end
    return "".join(parts) + text[at:]


def replace_section(note: PlanNote, heading: str, body: str) -> PlanNote:
    """Replace one section's body; a missing owned section is recreated in its place."""
    sections = [s.model_copy() for s in note.sections]
    for section in sections:
        if section.heading == heading:
            section.body = body
            return note.model_copy(update={"sections": sections})
    new = NoteSection(heading=heading, body=body)
    if heading.startswith(TASK_POOL_PREFIX):
        # Task pools sit before the dependency section; keep that order.
        anchor = next((i for i, s in enumerate(sections) if s.heading == DEPENDENCY_HEADING), None)
        sections.insert(anchor if anchor is not None else len(sections), new)
    else:
        sections.append(new)
    return note.model_copy(update={"sections": sections})


def placeholder(text: str) -> str:
    return f"\n_{text}_\n\n"


def build_template(analysis: RequirementAnalysis, created_at: str, understanding_body: str) -> PlanNote:
    """The note the understanding step writes: every section pre-allocated."""
    subs: list[SubDomain] = analysis.sub_domains
    front_matter: dict[str, Any] = {
        "session_id": analysis.session_id,
        "original_requirement": analysis.original_requirement,
        "created_at": created_at,
        "contributors": [],
        "sub_domains": [s.focus_area for s in subs],
        "agent_sections": {s.focus_area: [s.task_pool_heading, s.evidence_heading] for s in subs},
        "agent_task_id_ranges": {s.focus_area: list(s.task_id_range) for s in subs},
        "status": "planning",
    }
    sections = [NoteSection(heading=REQUIREMENT_HEADING, body=understanding_body)]
    sections += [
        NoteSection(heading=s.task_pool_heading,
                    body=placeholder(f"pending: the {s.focus_area} agent fills this section"))
        for s in subs
    ]
    sections.append(NoteSection(heading=DEPENDENCY_HEADING, body=placeholder("written once every agent has finished")))
    sections.append(NoteSection(heading=CONFLICT_HEADING, body=placeholder("written by conflict detection")))
    sections += [
        NoteSection(heading=s.evidence_heading,
                    body=placeholder(f"pending: the {s.focus_area} agent fills this section"))
        for s in subs
    ]
    preamble = f"\n# Plan Note: {analysis.session_id}\n\n"
    return PlanNote(front_matter=front_matter, preamble=preamble, sections=sections)
