"""plan-note.md: parse and render are inverses; hand-written notes are read tolerantly."""

from __future__ import annotations

import re
import textwrap

from wfqueue.collab.assemble import AreaArtifacts, allocate
from wfqueue.collab.finalize import build_final_note, owned_sections
from wfqueue.collab.models import NoteTask, ProposedArea, Understanding, UnderstandingDraft
from wfqueue.collab.note import build_template, parse_note, render_note, replace_section, replace_section_bodies
from wfqueue.collab.note_blocks import note_tasks, parse_task_pool, render_task_pool, render_understanding


def analysis_for(areas: list[str]):
    draft = UnderstandingDraft(
        complexity="Medium",
        understanding=Understanding(objectives=["Add OAuth login"], split_strategy="by package"),
        sub_domains=[ProposedArea(focus_area=a, description=f"the {a} part") for a in areas],
    )
    return allocate(draft, "CPLAN-oauth-2026-11-22", "Add OAuth login", max_agents=5)


def template_text(areas: list[str]) -> str:
    analysis = analysis_for(areas)
    return render_note(build_template(analysis, "2026-11-22T08:00:00+00:00",
                                      render_understanding(analysis.understanding)))


def test_template_round_trips_and_preallocates_every_section() -> None:
    text = template_text(["api", "auth-flow"])
    note = parse_note(text)
    assert render_note(note) == text
    assert note.problems == []
    headings = [s.heading for s in note.sections]
    assert headings == [
        "需求理解", "任务池 - Api", "任务池 - Auth Flow", "依赖关系", "冲突标记",
        "上下文证据 - Api", "上下文证据 - Auth Flow",
    ]
    assert note.front_matter["agent_task_id_ranges"] == {"api": [1, 100], "auth-flow": [101, 200]}
    assert note.front_matter["status"] == "planning"


def test_filled_and_finalised_note_round_trips() -> None:
    text = template_text(["api", "auth"])
    tasks = [
        NoteTask(id="TASK-001", title="Add token bucket", area="api", depends_on=["TASK-101"], scope="client",
                 modification_points=[{"file": "src/client.py", "location": "RateLimiter.acquire", "summary": "wait"}],
                 conflict_risk="medium"),
        NoteTask(id="TASK-101", title="Store tokens", area="auth", modification_points=[], conflict_risk="low"),
    ]
    note = parse_note(text)
    note = replace_section(note, "任务池 - Api", render_task_pool(tasks[:1]))
    note = replace_section(note, "任务池 - Auth", render_task_pool(tasks[1:]))
    final = build_final_note(render_note(note), text, analysis_for(["api", "auth"]), {}, {}, ["api", "auth"])
    rendered = render_note(final.note)
    assert render_note(parse_note(rendered)) == rendered
    parsed, problems = note_tasks(parse_note(rendered))
    assert problems == []
    assert [t.model_dump() for t in parsed] == [t.model_dump() for t in tasks]
    assert "TASK-001 [api] → TASK-101 [auth]" in parse_note(rendered).section("依赖关系").body


def test_task_pool_render_parse_are_inverse() -> None:
    tasks = [
        NoteTask(id="TASK-1201", title="Title with [brackets] inside", area="big", complexity="High",
                 depends_on=["TASK-1200", "TASK-003"], scope="multi word scope",
                 modification_points=[{"file": "a/b.py", "location": "C.d", "summary": "s: with colon"},
                                      {"file": "README.md", "location": "", "summary": "docs"}],
                 conflict_risk="high"),
    ]
    body = render_task_pool(tasks)
    parsed, problems = parse_task_pool(body, "big", 1)
    assert problems == []
    assert [t.model_dump() for t in parsed] == [t.model_dump() for t in tasks]
    assert render_task_pool(parsed) == body


SEED_STYLE_NOTE = textwrap.dedent(
    """\
    ---
    session_id: CPLAN-notify-2026-02-01
    original_requirement: Implement real-time notification system
    created_at: 2026-02-01T10:00:00+08:00
    contributors: [backend, frontend]
    sub_domains: [backend, frontend]
    agent_task_id_ranges:
      backend: [1, 100]
      frontend: [101, 200]
    status: planning
    ---

    ## 需求理解
    Push notifications to users in real time.

    ## 任务池 - Backend
    ### TASK-001: WebSocket gateway [backend]
    **状态**: pending
    **复杂度**: High
    **依赖**: -
    **范围**: gateway service
    **修改点**:
    - `server/ws.py:Gateway.accept`: accept connections
    - `server/app.py:create_app`: mount the gateway
    **冲突风险**: medium

    ### TASK-002: Notification store [backend]
    **状态**: pending
    **复杂度**: Low
    **依赖**: TASK-001
    **冲突风险**: low

    ## 任务池 - Frontend
    ### TASK-101: Subscribe in the client [frontend]
    **状态**: pending
    **复杂度**: Medium
    **依赖**: TASK-001, TASK-002
    **修改点**:
    - `web/src/socket.ts:connect`: open the socket
    **冲突风险**: high

    ## 依赖关系
    (auto)

    ## 冲突标记
    (later)

    ## Notes from the review
    Keep this section.

    ## 上下文证据 - Backend
    - server/ws.py
    """
)


def test_hand_written_seed_note_is_parsed() -> None:
    note = parse_note(SEED_STYLE_NOTE)
    assert note.problems == []
    assert render_note(parse_note(render_note(note))) == render_note(note)
    tasks, problems = note_tasks(note)
    assert problems == []
    assert [(t.id, t.area, t.complexity, t.depends_on, t.conflict_risk) for t in tasks] == [
        ("TASK-001", "backend", "High", [], "medium"),
        ("TASK-002", "backend", "Low", ["TASK-001"], "low"),
        ("TASK-101", "frontend", "Medium", ["TASK-001", "TASK-002"], "high"),
    ]
    points = tasks[0].modification_points
    assert [(p.file, p.location, p.summary) for p in points] == [
        ("server/ws.py", "Gateway.accept", "accept connections"),
        ("server/app.py", "create_app", "mount the gateway"),
    ]
    assert note.section("Notes from the review").body == "Keep this section.\n\n"
    assert note.front_matter["agent_task_id_ranges"]["frontend"] == [101, 200]


def test_malformed_shapes_are_reported_with_line_numbers() -> None:
    broken = SEED_STYLE_NOTE.replace("### TASK-002: Notification store [backend]", "### TASK-002: Notification store")
    broken = broken.replace("### TASK-101: Subscribe in the client [frontend]", "### TASK-001: Subscribe [frontend]")
    broken = broken.replace("**复杂度**: Low\n", "**复杂度**: Low\nthis line means nothing\n")
    broken = broken.replace("## 冲突标记\n", "## 冲突标记\n### not a task\n")
    tasks, problems = note_tasks(parse_note(broken))
    messages = {p.line: p.message for p in problems}
    lines = broken.splitlines()
    header_line = lines.index("### TASK-002: Notification store") + 1
    assert "no [area]" in messages[header_line] and "attributed to 'backend'" in messages[header_line]
    assert tasks[1].area == "backend"  # repaired, not dropped
    junk_line = lines.index("this line means nothing") + 1
    assert "unrecognised line" in messages[junk_line]
    duplicate_line = lines.index("### TASK-001: Subscribe [frontend]") + 1
    assert "defined twice" in messages[duplicate_line]


def test_front_matter_problems_carry_line_numbers() -> None:
    no_front = parse_note("## 需求理解\ntext\n")
    assert [p.line for p in no_front.problems] == [1]
    assert no_front.section("需求理解").body == "text\n"
    bad_yaml = parse_note("---\nsession_id: x\nsub_domains: [a, b\n---\n## 需求理解\n")
    assert bad_yaml.problems and "not valid YAML" in bad_yaml.problems[0].message
    assert bad_yaml.problems[0].line >= 3
    unclosed = parse_note("---\nsession_id: x\n")
    assert "never closed" in unclosed.problems[0].message


def test_replace_section_touches_only_its_section_and_recreates_missing_ones() -> None:
    text = template_text(["api", "auth"])
    note = parse_note(text)
    changed = replace_section(note, "任务池 - Auth", "\nnew body\n\n")
    before = {s.heading: s.body for s in note.sections}
    after = {s.heading: s.body for s in changed.sections}
    assert {h for h in before if before[h] != after[h]} == {"任务池 - Auth"}
    without = note.model_copy(update={"sections": [s for s in note.sections if s.heading != "任务池 - Api"]})
    restored = replace_section(without, "任务池 - Api", "\nback\n\n")
    headings = [s.heading for s in restored.sections]
    assert headings.index("任务池 - Api") < headings.index("依赖关系")


def test_an_agent_update_spliced_into_the_text_equals_parsing_and_rendering_it() -> None:
    text = template_text(["api", "auth"])
    bodies = {"任务池 - Auth": "\n### TASK-101: limits [auth]\n**状态**: pending\n\n",
              "上下文证据 - Auth": "\n**相关文件**:\n- `auth/login.py` (relevance 0.90): here\n\n"}
    expected = parse_note(text)
    for heading, body in bodies.items():
        expected = replace_section(expected, heading, body)
    assert replace_section_bodies(text, bodies) == render_note(expected)
    # A fenced "## " line inside a body is not a section: it stays, and so does a later edit by hand.
    fenced = text.replace("## 依赖关系\n", "## 依赖关系\n```\n## 任务池 - Auth\n```\n")
    spliced = replace_section_bodies(fenced, bodies)
    assert spliced is not None and "```\n## 任务池 - Auth\n```" in spliced
    assert parse_note(spliced).section("任务池 - Auth").body == bodies["任务池 - Auth"]


def test_the_splice_declines_what_only_a_full_parse_handles() -> None:
    text = template_text(["api", "auth"])
    body = {"任务池 - Auth": "\nnew\n\n"}
    assert replace_section_bodies(text.replace("\n", "\r\n"), body) is None  # other line breaks
    assert replace_section_bodies(text.replace("## 任务池 - Auth\n", ""), body) is None  # missing: recreated by parse
    assert replace_section_bodies(text + "## 任务池 - Auth\nagain\n", body) is None  # repeated: a problem to report
    assert replace_section_bodies(text.split("---\n", 2)[2], body) is None  # no front matter


def test_a_finished_area_whose_sections_never_reached_redis_keeps_them_from_its_result() -> None:
    analysis = analysis_for(["api", "auth"])
    pool = render_task_pool([NoteTask(id="TASK-001", title="Add token bucket", area="api", conflict_risk="low")])
    results = {"api": AreaArtifacts(focus_area="api", plan={}, planning_context="", task_pool=pool, evidence="seen")}
    sections = owned_sections(analysis, results)
    assert sections == {"任务池 - Api": pool, "上下文证据 - Api": "seen"}
    text = template_text(["api", "auth"])
    final = build_final_note(text, text, analysis, sections, {"auth": "boom"}, ["api"])
    assert [t.id for t in final.tasks] == ["TASK-001"]
    assert final.note.section("上下文证据 - Api").body.strip() == "seen"


def test_a_plan_where_no_agent_planned_anything_is_failed_not_partial() -> None:
    from wfqueue.collab.coordinator import PlanResult
    from wfqueue.collab.models import AgentOutcome
    from wfqueue.collab.summary import PlanSummaryInput, render_plan_md

    analysis = analysis_for(["api", "auth"])
    text = template_text(["api", "auth"])
    failures = {"api": "plan_area:api: Anthropic API answered 529: overloaded", "auth": "plan_area:auth: timed out"}
    final = build_final_note(text, text, analysis, {}, failures, [])
    assert final.status == "failed" and final.note.front_matter["status"] == "failed"
    outcomes = [AgentOutcome(focus_area=a, status="failed", error=e) for a, e in failures.items()]
    plan_md = render_plan_md(PlanSummaryInput(analysis=analysis, created_at="t", requirement_body="", tasks=[],
                                              conflicts=[], outcomes=outcomes, status=final.status), "/s")
    assert "- **Status**: failed" in plan_md and "**Failed plan**: no agent produced tasks" in plan_md
    assert "`api`: plan_area:api: Anthropic API answered 529: overloaded" in plan_md
    assert "`auth`: plan_area:auth: timed out" in plan_md
    assert PlanResult(session_id="s", session_dir="/s", status="failed", tasks=0, conflicts=0).exit_code == 1
    # One area planned: partial, and its failed neighbour is still named.
    pool = render_task_pool([NoteTask(id="TASK-001", title="Add token bucket", area="api")])
    partial = build_final_note(text, text, analysis, {"任务池 - Api": pool}, {"auth": "timed out"}, ["api"])
    assert partial.status == "partial"


def test_pipes_in_titles_descriptions_and_conflicts_stay_inside_their_plan_md_cells() -> None:
    """A requirement such as `tag:a|tag:b` put a raw `|` into plan.md's tables: every such row had a cell too many."""
    from wfqueue.collab.models import Conflict
    from wfqueue.collab.summary import PlanSummaryInput, render_plan_md

    analysis = analysis_for(["api", "auth"])
    analysis.sub_domains[0].description = "Parse OR filters like tag:a|tag:b"
    tasks = [NoteTask(id="TASK-001", title="Support tag:a|tag:b filters", area="api"),
             NoteTask(id="TASK-101", title="Check a|b tokens", area="auth")]
    conflicts = [Conflict(id="C-1", type="file_conflict", severity="medium", tasks_involved=["TASK-001", "TASK-101"],
                          agents_involved=["api", "auth"], description="both edit search.py (a|b parsing)",
                          suggested_resolution="sequence them")]
    plan_md = render_plan_md(PlanSummaryInput(analysis=analysis, created_at="t", requirement_body="", tasks=tasks,
                                              conflicts=conflicts, outcomes=[], status="conflicts_detected"), "/s")
    tables: dict[int, list[str]] = {}
    for number, block in enumerate(plan_md.split("\n\n")):
        tables[number] = [line for line in block.splitlines() if line.startswith("|")]
    for rows in (r for r in tables.values() if r):
        columns = {len(re.split(r"(?<!\\)\|", row)) for row in rows}
        assert len(columns) == 1, rows  # every row of a table has as many cells as its header
    assert "tag:a\\|tag:b" in plan_md and "(a\\|b parsing)" in plan_md
    # how to carry the plan out, not only how to read it
    assert f"`wfqueue execute {analysis.session_id} --dry-run`" in plan_md
