"""Large and mixed plan-notes: what a 10 000-task note parses to, checked by hand from how it was generated,
and notes where blocks as wfqueue writes them sit beside hand edits."""

from __future__ import annotations

from wfqueue.collab.conflicts import detect_conflicts
from wfqueue.collab.models import NoteTask
from wfqueue.collab.note import parse_note, render_note
from wfqueue.collab.note_blocks import note_tasks, parse_task_pool, render_task_pool
from wfqueue.samples import synthetic_note


def test_a_10000_task_note_gives_every_task_and_the_conflicts_its_generator_planted() -> None:
    # synthetic_note(100, 100): area k owns TASK-(100k+1)..; task i depends on task i-1 (the first on the
    # previous area's first); tasks i = 0, 25, 50, 75 of every area change a shared module at high risk.
    text = synthetic_note(100, 100)
    note = parse_note(text)
    assert note.problems == [] and render_note(note) == text
    tasks, problems = note_tasks(note)
    assert problems == []
    assert len(tasks) == 10_000
    assert [t.id for t in tasks[:2]] + [tasks[-1].id] == ["TASK-001", "TASK-002", "TASK-10000"]
    lines = text.splitlines()
    first, shared, last = tasks[100], tasks[125], tasks[-1]
    assert (first.id, first.area, first.depends_on, first.conflict_risk) == ("TASK-101", "area-001", ["TASK-001"],
                                                                             "high")
    assert first.line == lines.index("### TASK-101: step 0 of area-001 [area-001]") + 1
    assert [(p.file, p.location, p.summary) for p in first.modification_points] == [
        ("shared/module_0.py", "fn_0", "change")]
    assert (shared.id, shared.title, shared.scope) == ("TASK-126", "step 25 of area-001", "synthetic")
    assert [(p.file, p.location) for p in shared.modification_points] == [("shared/module_4.py", "fn_1")]
    assert (last.area, last.depends_on, last.conflict_risk, last.status, last.complexity) == (
        "area-099", ["TASK-9999"], "low", "pending", "Medium")
    assert [(p.file, p.location) for p in last.modification_points] == [("area-099/file_99.py", "fn_0")]
    assert last.line == lines.index("### TASK-10000: step 99 of area-099 [area-099]") + 1

    conflicts = detect_conflicts(tasks, {})
    assert [(c.id, c.type, c.location or c.file) for c in conflicts] == [
        ("CONFLICT-001", "file_conflict", "shared/module_0.py:fn_0"),
        ("CONFLICT-002", "file_conflict", "shared/module_1.py:fn_2"),
        ("CONFLICT-003", "file_conflict", "shared/module_4.py:fn_1"),
        ("CONFLICT-004", "file_conflict", "shared/module_5.py:fn_0"),
        ("CONFLICT-005", "strategy_conflict", "shared/module_0.py"),
        ("CONFLICT-006", "strategy_conflict", "shared/module_1.py"),
        ("CONFLICT-007", "strategy_conflict", "shared/module_4.py"),
        ("CONFLICT-008", "strategy_conflict", "shared/module_5.py"),
    ]
    assert conflicts[0].tasks_involved == [f"TASK-{100 * k + 1:03d}" for k in range(100)]
    assert conflicts[0].agents_involved == [f"area-{k:03d}" for k in range(100)]


def _task(number: int, **fields: object) -> NoteTask:
    return NoteTask.model_validate({"id": f"TASK-{number:03d}", "title": f"task {number}", "area": "api",
                                    "modification_points": [{"file": "a.py", "location": "f", "summary": "s"}],
                                    **fields})


def test_blocks_as_written_and_hand_edits_in_one_pool() -> None:
    pool = render_task_pool([_task(1), _task(2, depends_on=["TASK-001"]), _task(3, scope="-")])
    edited = pool.replace("**冲突风险**: low\n\n### TASK-002", "**冲突风险**: low\na stray line\n\n### TASK-002", 1)
    edited = edited.replace("### TASK-003: task 3 [api]", "### TASK-003:   task 3   [ api ]  ")
    tasks, problems = parse_task_pool(edited, "api", 10)
    # body line 1 is blank; TASK-001 opens on line 11, its stray line is the 8th after it.
    assert [(p.line, p.message) for p in problems] == [(19, "unrecognised line in TASK-001: 'a stray line'")]
    assert [(t.id, t.line, t.title, t.area) for t in tasks] == [
        ("TASK-001", 11, "task 1", "api"), ("TASK-002", 21, "task 2", "api"), ("TASK-003", 30, "task 3", "api")]
    assert tasks[1].depends_on == ["TASK-001"] and tasks[2].scope == ""
    assert [t.model_dump() for t in tasks] == [t.model_dump() for t in parse_task_pool(pool, "api", 10)[0]]


def test_windows_line_breaks_and_fenced_headings_read_as_with_unix_ones() -> None:
    text = synthetic_note(2, 3).replace("## 依赖关系", "```\n## inside a fence\n```\n## 依赖关系")
    unix, windows = parse_note(text), parse_note(text.replace("\n", "\r\n"))
    assert [(s.heading, s.line) for s in unix.sections] == [(s.heading, s.line) for s in windows.sections]
    assert "inside a fence" not in [s.heading for s in unix.sections]
    assert unix.front_matter == windows.front_matter
    unix_tasks, windows_tasks = note_tasks(unix)[0], note_tasks(windows)[0]
    assert [(t.id, t.line, t.depends_on) for t in unix_tasks] == [(t.id, t.line, t.depends_on) for t in windows_tasks]
    assert len(unix_tasks) == 6


def test_tasks_read_from_blocks_as_written_are_the_models_validation_gives() -> None:
    # Blocks as render_task writes them are read without a validation pass; the tasks must not differ from
    # validated ones in anything a caller can see: fields, which fields count as set, equality, copies, dumps.
    tasks = [_task(7, depends_on=["TASK-001", "TASK-002"], conflict_risk="high", scope="-"),
             _task(8, modification_points=[{"file": "b.py", "location": "", "summary": ""},
                                           {"file": "c.py", "location": "g:h", "summary": "two words"}])]
    pool = render_task_pool(tasks)
    read, problems = parse_task_pool(pool, "api", 1)
    assert problems == []
    validated = [NoteTask.model_validate(t.model_dump() | {"line": t.line}) for t in read]
    assert read == validated
    assert [t.model_fields_set for t in read] == [t.model_fields_set for t in validated]
    assert [t.model_dump_json() for t in read] == [t.model_dump_json() for t in validated]
    assert [repr(t) for t in read] == [repr(t) for t in validated]
    assert read[0].model_copy(update={"status": "done"}).status == "done" and read[0].status == "pending"
    assert read[1].modification_points[1].model_dump() == {"file": "c.py", "location": "g:h", "summary": "two words"}
    assert render_task_pool(read) == pool


def test_a_malformed_block_among_thousands_is_reported_at_its_line() -> None:
    text = synthetic_note(20, 100)
    broken = text.replace("**复杂度**: Medium\n**依赖**: TASK-1499", "**复杂度**: Medium\n**依赖** TASK-1499", 1)
    broken = broken.replace("### TASK-1800: step 99 of area-017 [area-017]", "### TASK-1800 step 99", 1)
    tasks, problems = note_tasks(parse_note(broken))
    lines = broken.splitlines()
    bad_field = lines.index("**依赖** TASK-1499") + 1
    bad_header = lines.index("### TASK-1800 step 99") + 1
    assert [(p.line, p.message) for p in problems] == [
        (bad_field, "unrecognised line in TASK-1500: '**依赖** TASK-1499'"),
        (bad_header, "'### TASK-1800 step 99' is not a task header ('### TASK-NNN: title [area]')"),
    ]
    assert len(tasks) == 1999 and "TASK-1800" not in {t.id for t in tasks}
    assert next(t for t in tasks if t.id == "TASK-1500").depends_on == []
