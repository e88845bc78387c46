"""Unified task files: every planted defect is caught at the right place with the right code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from wfqueue.cli import validate
from wfqueue.errors import BadInputError
from wfqueue.plan_check import check_plan, validate_path
from wfqueue.tasks_file import (
    LEGACY_VERIFICATION,
    TaskProblem,
    dump_jsonl,
    legacy_to_unified,
    load_task_dir,
    parse_jsonl,
)


def task(tid: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": tid, "title": f"Task {tid}", "description": "Do the thing.", "depends_on": list(deps),
        "convergence": {"criteria": ["it works"], "verification": "pytest -q", "definition_of_done": "merged"},
        **extra,
    }


def jsonl(*objects: Any) -> str:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects)


def codes(problems: list[TaskProblem]) -> list[tuple[str, str | None, str]]:
    return [(p.location, p.task_id, p.code) for p in problems]


def checked(text: str, existing: Any = None) -> list[TaskProblem]:
    tasks, problems = parse_jsonl(text)
    return problems + check_plan(tasks, None, existing)


# -- parsing and writing ---------------------------------------------------------


def test_valid_file_round_trips_with_unknown_fields_kept() -> None:
    text = jsonl(
        task("TASK-001", files=[{"path": "src/a.py", "action": "create"}], status="pending", x_tool={"k": None}),
        task("TASK-002", "TASK-001", title="Ünïcode \u2028 title", executed_at=None, type="fix"),
    )
    tasks, problems = parse_jsonl("\n" + text + "\n\n")  # blank lines are skipped
    assert problems == []
    assert [t.location for t in tasks] == ["tasks.jsonl:2", "tasks.jsonl:3"]
    models = [t.task for t in tasks]
    assert models[0].model_extra == {"status": "pending", "x_tool": {"k": None}}
    written = dump_jsonl(models)
    assert written.endswith("\n") and written.count("\n") == 2
    assert "Ünïcode" in written and '"executed_at":null' in written  # not escaped, null extras kept
    again, problems = parse_jsonl(written)
    assert problems == [] and [t.task for t in again] == models


def test_invalid_json_reports_its_line_and_column() -> None:
    text = jsonl(task("TASK-001")) + "\n" + '{"id": "TASK-002",, }\n' + jsonl(task("TASK-003"))
    tasks, problems = parse_jsonl(text, name="plan.jsonl")
    assert [t.task.id for t in tasks] == ["TASK-001", "TASK-003"]
    assert codes(problems) == [("plan.jsonl:3", None, "invalid_json")]
    assert "column 19" in problems[0].message
    assert str(problems[0]).startswith("plan.jsonl:3: invalid JSON")


@pytest.mark.parametrize(("line", "says"), [
    ('{"id": "TASK-001", "id": "TASK-009"}', "the key 'id' is given twice in one object"),  # another task was blamed
    ('{"id": "TASK-001", "weight": NaN}', "NaN is not JSON"),  # accepted, and written back as NaN
    ('{"id": "TASK-001", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),  # a traceback
    ('{"id": "TASK-001", "n": ' + "9" * 5000 + "}", "Exceeds the limit"),  # a traceback too
], ids=["duplicate-key", "nan", "deep", "long-number"])
def test_json_a_plan_cannot_mean_is_a_located_problem(line: str, says: str, tmp_path: Path) -> None:
    tasks, problems = parse_jsonl(jsonl(task("TASK-002")).rstrip("\n") + "\n" + line + "\n", name="plan.jsonl")
    assert [t.task.id for t in tasks] == ["TASK-002"]
    assert codes(problems) == [("plan.jsonl:2", None, "invalid_json")] and says in problems[0].message
    folder = tmp_path / ".task"
    folder.mkdir()
    (folder / "IMPL-1.json").write_text(line, encoding="utf-8")
    assert [p.code for p in load_task_dir(folder)[1]] == ["invalid_json"]


def test_wrong_types_name_the_field_path() -> None:
    bad = task("TASK-001", files=[{"path": "a.py", "action": "rename"}])
    bad["convergence"]["criteria"] = []
    problems = checked(jsonl(task("TASK-000"), bad))
    assert {(p.location, p.task_id, p.code) for p in problems} == {("tasks.jsonl:2", "TASK-001", "schema")}
    messages = [p.message for p in problems]
    assert any(m.startswith("convergence.criteria: List should have at least 1 item") for m in messages)
    assert any(m.startswith("files[0].action: Input should be") for m in messages)


def test_non_objects_and_empty_files_are_problems() -> None:
    assert codes(parse_jsonl('[1, 2]\n"x"\n')[1]) == [("tasks.jsonl:1", None, "not_an_object"),
                                                      ("tasks.jsonl:2", None, "not_an_object")]
    assert codes(parse_jsonl("\n  \n")[1]) == [("tasks.jsonl", None, "empty")]


# -- the plan as a whole -----------------------------------------------------------


def test_duplicate_unknown_and_self_dependencies() -> None:
    problems = checked(jsonl(task("A"), task("B", "A", "NOPE"), task("A"), task("C", "C")))
    assert codes(problems) == [
        ("tasks.jsonl:3", "A", "duplicate_id"),
        ("tasks.jsonl:2", "B", "unknown_dependency"),
        ("tasks.jsonl:4", "C", "self_dependency"),
    ]
    assert "tasks.jsonl:1" in problems[0].message and "NOPE" in problems[1].message


def test_three_task_cycle_is_reported_once_with_its_path() -> None:
    # T1 lists T2 twice: the same edge must not yield the same cycle twice
    problems = checked(jsonl(task("T0"), task("T2", "T3"), task("T3", "T1", "T0"), task("T1", "T2", "T2")))
    assert codes(problems) == [("tasks.jsonl:4", "T1", "dependency_cycle")]
    assert "T1 -> T2 -> T3 -> T1" in problems[0].message


def test_ten_thousand_task_chain_and_cycle_do_not_recurse() -> None:
    n = 10_000
    chain = [task(f"T{i}", *([f"T{i + 1}"] if i + 1 < n else [])) for i in range(n)]
    assert checked(jsonl(*chain)) == []
    chain[-1]["depends_on"] = ["T0"]
    problems = checked(jsonl(*chain))
    assert [p.code for p in problems] == ["dependency_cycle"]
    assert problems[0].message.count("->") == n


def test_files_to_modify_must_exist_files_to_create_need_not(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "here.py").write_text("")
    files = [
        {"path": "src/here.py"},
        {"path": "./src/../src/here.py", "action": "modify"},
        {"path": "src/new.py", "action": "create"},
        {"path": "src/gone.py", "action": "modify"},
    ]
    tasks, _ = parse_jsonl(jsonl(task("A", files=files)))
    problems = check_plan(tasks, tmp_path)
    assert codes(problems) == [("tasks.jsonl:1", "A", "missing_file")]
    assert "src/gone.py" in problems[0].message
    # the `existing` function is what is asked, not the disk
    asked: list[str] = []
    check_plan(tasks, None, lambda rel: asked.append(rel) or True)
    assert asked == ["src/here.py", "src/here.py", "src/new.py", "src/gone.py"]


def test_a_path_leading_out_through_a_symbolic_link_is_outside_the_repository(tmp_path: Path) -> None:
    """`validate` and the dry run passed `outside/pwned.py` (a committed link to a folder elsewhere); the execution
    refused it late, with a hint to mend `git check-ignore`. The planners' repair drops such an entry too."""
    from wfqueue.plan_check import leaves_repository
    from wfqueue.repair import repair_tasks

    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    (repo / "src").mkdir(parents=True)
    elsewhere.mkdir()
    (repo / "src" / "here.py").write_text("x = 1\n")
    (repo / "outside").symlink_to(elsewhere)
    (repo / "src" / "alias.py").symlink_to(repo / "src" / "here.py")  # a link inside the repository is fine
    files = [{"path": "outside/pwned.py", "action": "create"}, {"path": "src/alias.py", "action": "modify"}]
    tasks, _ = parse_jsonl(jsonl(task("A", files=files)))
    problems = check_plan(tasks, repo)
    assert codes(problems) == [("tasks.jsonl:1", "A", "missing_file")]
    assert "outside/pwned.py is outside the repository (through a symbolic link)" in problems[0].message
    fixed, repairs = repair_tasks([t.task for t in tasks], id_prefix="TASK-", id_range=None,
                                  exists=lambda rel: (repo / rel).exists(), leaves=leaves_repository(repo))
    assert [f.path for f in fixed[0].files] == ["src/alias.py"] and [r.kind for r in repairs][-1] == "dropped_file"


def test_files_no_task_can_change_as_asked_are_problems(tmp_path: Path) -> None:
    """`validate` passed a task deleting and modifying one file, a folder to modify and `.git/config`; the
    execution refused or misread them only once it ran."""
    (tmp_path / "calc").mkdir()
    (tmp_path / "calc" / "text.py").write_text("")
    files = [
        {"path": "calc/text.py", "action": "delete"},
        {"path": "./calc/text.py", "action": "modify"},
        {"path": "calc", "action": "modify"},
        {"path": ".git/config", "action": "modify"},
        {"path": ".workflow/notes.md", "action": "create"},
    ]
    problems = check_plan(parse_jsonl(jsonl(task("A", files=files)))[0], tmp_path)
    said = {p.message for p in problems if p.code == "bad_path"}
    assert said == {"file ./calc/text.py is both deleted and modified by this task; keep one action for it",
                    "file calc is a folder, not a file; name the files in it the task changes",
                    "file .git/config is inside .git/, which no task may change; name a file of the project",
                    "file .workflow/notes.md is inside .workflow/, which no task may change; name a file of the "
                    "project"}, problems
    assert [p.code for p in problems] == ["bad_path"] * 4  # not also "missing" for what is refused already


def test_a_path_no_file_system_can_hold_is_a_problem_not_a_traceback(run: Any, tmp_path: Path) -> None:
    """A NUL in a path (`"src\\u0000jobs.py"`) or a name over 255 bytes: `validate` and `execute` ended on Python's
    ValueError or OSError (exit 1), and a lite plan's Modify round that wrote one kept it and could not end."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "jobs.py").write_text("X = 1\n")
    plan = tmp_path / "tasks.jsonl"
    plan.write_text(jsonl(task("A", files=[{"path": "src\u0000jobs.py", "action": "modify"}]),
                          task("B", files=[{"path": "src/" + "x" * 300 + ".py", "action": "create"}]),
                          task("C", files=[{"path": "x/" * 2100 + "y.py", "action": "create"}])))
    result = run(plan, "--repo", tmp_path)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert "cannot name a file: it holds a NUL character" in lines[0]
    assert "is longer than a file name may be (255 bytes)" in lines[1]
    assert "more than a path may be (4096)" in lines[2]
    assert lines[-1] == "3 problems in 3 tasks"


def test_a_file_an_earlier_task_creates_may_be_modified_by_a_task_that_depends_on_it() -> None:
    """`validate` refused the plan "A creates src/new.py; B, after A, extends it": the file was looked for on
    disk only. A task that comes after the creator, directly or through another task, may modify or delete it;
    one that does not depend on the creator is told which dependency is missing."""
    def new(tid: str, action: str, *deps: str) -> dict[str, Any]:
        return task(tid, *deps, files=[{"path": "src/new.py", "action": action}])
    on_disk_only = lambda rel: rel == "src/old.py"  # noqa: E731

    assert checked(jsonl(new("A", "create"), new("B", "modify", "A"),
                         task("C", "B", files=[{"path": "./src/new.py", "action": "delete"}])), on_disk_only) == []
    problems = checked(jsonl(new("A", "create"), new("B", "modify"), new("D", "modify", "B")), on_disk_only)
    assert [(p.task_id, p.code, p.message) for p in problems] == [
        ("B", "missing_file", "file src/new.py does not exist until A creates it, and this task does not depend on "
                              "A; add A to depends_on"),
        ("D", "missing_file", "file src/new.py does not exist until A creates it, and this task does not depend on "
                              "A; add A to depends_on"),
    ]
    # A dependency cycle is reported once, and the walk through it ends.
    cyclic = checked(jsonl(new("A", "create"), new("B", "modify", "C"), task("C", "B")), on_disk_only)
    assert [(p.task_id, p.code) for p in cyclic] == [("B", "dependency_cycle"), ("B", "missing_file")]


def test_a_file_the_repository_has_cannot_be_created_unless_an_earlier_task_deletes_it() -> None:
    """A hand-written plan told its agent to "create" src/old.py, which the repository has: `validate` passed it,
    and the agent, told to create it, would write it from scratch and its code would be lost. A task that comes
    after one deleting it may create it again."""
    def old(tid: str, action: str, *deps: str) -> dict[str, Any]:
        return task(tid, *deps, files=[{"path": "src/old.py", "action": action}])
    on_disk_only = lambda rel: rel == "src/old.py"  # noqa: E731

    problems = checked(jsonl(old("A", "create")), on_disk_only)
    assert [(p.task_id, p.code, p.message) for p in problems] == [
        ("A", "bad_path", "file src/old.py is in the repository already but is to be created; use action modify, "
                          "or delete it in a task this one depends on")]
    assert checked(jsonl(old("A", "delete"), task("B", "A"), old("C", "create", "B")), on_disk_only) == []
    assert codes(checked(jsonl(old("A", "delete"), old("C", "create")), on_disk_only)) == [
        ("tasks.jsonl:2", "C", "bad_path")]
    # A task an execution completed made the file: once its branch is merged the repository has it.
    assert checked(jsonl({**old("A", "create"), "status": "completed"},
                         {**old("B", "create"), "_execution": {"status": "completed"}}), on_disk_only) == []
    assert codes(checked(jsonl({**old("A", "create"), "status": "failed"}), on_disk_only)) == [
        ("tasks.jsonl:1", "A", "bad_path")]


def test_a_file_another_task_deletes_is_changed_before_the_delete_or_not_at_all() -> None:
    """"A deletes src/old.py; B modifies it", neither depending on the other, passed `validate`: the execution ran
    them in the plan's line order and B, finding the file gone, failed on every attempt. So did two deletes."""
    def old(tid: str, action: str, *deps: str) -> dict[str, Any]:
        return task(tid, *deps, files=[{"path": "src/old.py", "action": action}])
    on_disk_only = lambda rel: rel == "src/old.py"  # noqa: E731

    problems = checked(jsonl(old("A", "delete"), old("B", "modify")), on_disk_only)
    assert [(p.task_id, p.code, p.message) for p in problems] == [
        ("B", "bad_path", "file src/old.py is deleted by A, and neither task depends on the other: the one run second "
                          "finds what the first did; add B to A's depends_on, so that the change comes before the "
                          "delete")]
    assert [(p.task_id, p.message) for p in checked(jsonl(old("A", "delete"), old("B", "modify", "A")),
                                                    on_disk_only)] == [
        ("B", "file src/old.py is deleted by A, which this task depends on, before this task changes it; drop the "
              "change to it, or move the delete to a task that depends on B")]
    assert codes(checked(jsonl(old("A", "delete"), old("B", "delete")), on_disk_only)) == [
        ("tasks.jsonl:1", "A", "bad_path"), ("tasks.jsonl:2", "B", "bad_path")]
    # The change first, then the delete; or the file created again in between: both fine.
    assert checked(jsonl(old("B", "modify"), old("A", "delete", "B")), on_disk_only) == []
    assert checked(jsonl(old("A", "delete"), old("C", "create", "A"), old("B", "modify", "C")), on_disk_only) == []
    # A task an execution completed has made its change already.
    assert checked(jsonl(old("A", "delete"), {**old("B", "modify"), "status": "completed"}), on_disk_only) == []


@pytest.mark.parametrize("task_id", ["TASK 1", "../x", "TASK-1.lock", "TASK..1", "TASK~1", "X@{1}", "a/b", ".x"])
def test_an_id_no_git_branch_can_carry_is_a_problem(task_id: str) -> None:
    """`validate` passed ids like "TASK 1": the execution made its integration branch and folder, then every task
    failed ("is not a valid branch name"), and renaming the ids left the execution unable to go on."""
    problems = checked(jsonl(task(task_id), task("TASK-2", task_id)))
    assert codes(problems) == [("tasks.jsonl:1", task_id, "bad_id")]
    assert f"id {task_id!r} cannot name the git branch an execution makes for the task" in problems[0].message
    assert checked(jsonl(task("IMPL-1.2"), task("TÂCHE-1"))) == []


@pytest.mark.parametrize("path", ["../outside.py", "src/../../x.py", "/etc/passwd", "C:\\win.py"])
def test_paths_outside_the_repo_are_problems_even_to_create(path: str) -> None:
    problems = checked(jsonl(task("A", files=[{"path": path, "action": "create"}])), existing=lambda rel: True)
    assert codes(problems) == [("tasks.jsonl:1", "A", "missing_file")]
    assert "outside the repository" in problems[0].message


# -- the 6-field layout --------------------------------------------------------------


LEGACY = {
    "id": "IMPL-2", "title": "Wire the cache", "status": "pending",
    "meta": {"type": "feature", "agent": "@code-developer"},
    "context": {
        "requirements": ["Add a cache", "Invalidate on write"], "focus_paths": ["src"],
        "acceptance": ["cache hit rate logged"], "depends_on": ["IMPL-1"], "artifacts": ["notes.md"],
    },
    "flow_control": {"target_files": ["src/a.py:Foo.bar:10-20", "src/b.py"], "pre_analysis": [{"step": "read"}]},
}


def test_legacy_mapping_follows_the_spec() -> None:
    out = legacy_to_unified(LEGACY)
    assert out["description"] == "Add a cache\nInvalidate on write"
    assert out["implementation"] == ["Add a cache", "Invalidate on write"]
    assert out["convergence"]["criteria"] == ["cache hit rate logged"]
    assert out["convergence"]["verification"] == LEGACY_VERIFICATION
    assert (out["depends_on"], out["focus_paths"], out["type"]) == (["IMPL-1"], ["src"], "feature")
    assert out["files"] == [{"path": "src/a.py", "target": "Foo.bar"}, {"path": "src/b.py"}]
    assert out["meta"] == {"agent": "@code-developer"} and out["status"] == "pending"
    # legacy fields with no unified home are kept, not lost
    assert out["context"] == {"artifacts": ["notes.md"]} and out["flow_control"] == {"pre_analysis": [{"step": "read"}]}


def test_legacy_task_folder_is_mapped_and_validated(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    session = repo / ".workflow" / "active" / "WFS-cache"
    (session / ".task").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("")
    (session / ".task" / "IMPL-1.json").write_text(json.dumps(task("IMPL-1")))
    (session / ".task" / "IMPL-2.json").write_text(json.dumps(LEGACY, indent=2))
    (session / ".task" / "IMPL-3.json").write_text('{\n  "id": "IMPL-3",\n  oops\n}')

    tasks, problems = validate_path(session, None)  # repo found from .workflow/
    assert [(t.task.id, t.location, t.legacy) for t in tasks] == [
        ("IMPL-1", ".task/IMPL-1.json", False), ("IMPL-2", ".task/IMPL-2.json", True)]
    assert codes(problems) == [(".task/IMPL-3.json", None, "invalid_json"),
                               (".task/IMPL-2.json", "IMPL-2", "missing_file")]
    assert "line 3 column 3" in problems[0].message and "src/b.py" in problems[1].message


def test_loading_an_empty_task_folder_is_a_problem(tmp_path: Path) -> None:
    assert codes(load_task_dir(tmp_path)[1]) == [(f"{tmp_path.name}/", None, "empty")]


def test_missing_path_and_unsupported_file_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        validate_path(tmp_path / "nope.jsonl", tmp_path)
    (tmp_path / "plan.md").write_text("# plan")
    with pytest.raises(BadInputError, match="unsupported") as caught:
        validate_path(tmp_path / "plan.md", tmp_path)
    assert "tasks.jsonl" in caught.value.hint


# -- the command ------------------------------------------------------------------------


@pytest.fixture
def run() -> Any:
    app = typer.Typer()
    validate.register(app)
    return lambda *args: CliRunner().invoke(app, [str(a) for a in args])


# A file the CLI tests' tasks change.
CHANGES = [{"path": "app.py", "action": "modify"}]


def test_cli_exits_0_on_a_clean_plan(run: Any, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("")
    (tmp_path / "tasks.jsonl").write_text(jsonl(task("A", files=CHANGES), task("B", "A", files=CHANGES)))
    result = run(tmp_path, "--repo", tmp_path)  # a session folder holding tasks.jsonl
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "2 tasks, 0 problems"


def test_cli_exits_2_and_lists_problems(run: Any, tmp_path: Path) -> None:
    plan = tmp_path / "tasks.jsonl"
    (tmp_path / "app.py").write_text("")
    plan.write_text(jsonl(task("A", "B", files=CHANGES), task("B", "A", files=CHANGES),
                          task("C", files=[{"path": "missing.py"}])))
    result = run(plan, "--repo", tmp_path)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("tasks.jsonl:1  A  dependency cycle A -> B -> A")
    assert lines[1].startswith("tasks.jsonl:3  C  file missing.py does not exist")
    assert lines[-1] == "2 problems in 3 tasks"



def test_cli_counts_entries_it_could_not_read_among_the_tasks(run: Any, tmp_path: Path) -> None:
    """Five lines failing the schema were "5 problems in 0 tasks"."""
    plan = tmp_path / "tasks.jsonl"
    (tmp_path / "app.py").write_text("")
    plan.write_text(jsonl(task("A", files=CHANGES)) + "{not json\n" + json.dumps({"id": "C"}) + "\n")
    result = run(plan, "--repo", tmp_path)
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == "4 problems in 3 tasks (2 could not be read)"
    shown = json.loads(run(plan, "--repo", tmp_path, "--json").output)
    assert (shown["tasks"], shown["unread"], len(shown["problems"])) == (1, 2, 4)

def test_cli_json_output(run: Any, tmp_path: Path) -> None:
    plan = tmp_path / "tasks.jsonl"
    plan.write_text(jsonl(task("A", "GHOST"), task("B", files=CHANGES)))
    (tmp_path / "app.py").write_text("")
    result = run(plan, "--repo", tmp_path, "--json")
    assert result.exit_code == 2
    payload = json.loads(result.output)
    assert payload["path"] == str(plan) and payload["tasks"] == 2
    assert payload["problems"] == [{
        "location": "tasks.jsonl:1", "task_id": "A", "code": "unknown_dependency",
        "message": "depends on GHOST, which no task in this plan has; fix the id or remove it",
    }]


def test_a_file_git_tracks_outside_a_sparse_checkouts_cone_is_there_to_change(tmp_path: Path) -> None:
    """`git sparse-checkout set src` leaves docs/guide.md out of the folder; an execution's worktrees have it,
    and validate said it "does not exist"."""
    import subprocess

    from wfqueue.plan_check import validate_path

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=a", "-c", "user.email=a@b.c", *args],
                       check=True, capture_output=True)

    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "src" / "app.py").write_text("X = 1\n", encoding="utf-8")
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "init")
    git("sparse-checkout", "set", "src")
    assert not (tmp_path / "docs").exists()
    plan = tmp_path / "tasks.jsonl"
    plan.write_text(jsonl(task("A", files=[{"path": "docs/guide.md", "action": "modify"},
                                           {"path": "docs/missing.md", "action": "modify"}])), encoding="utf-8")
    _, problems = validate_path(plan, tmp_path)
    assert [p.message for p in problems] == [
        "file docs/missing.md does not exist but is to be modified; fix the path or use action create"]


def test_a_tracked_file_whose_name_is_not_utf8_does_not_stop_validate(run: Any, tmp_path: Path) -> None:
    """git may track any bytes as a name: validate, execute and plan read git's list of files, and stopped there
    with a UnicodeDecodeError."""
    from tests.conftest import commit_in

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    commit_in(tmp_path, "init", {"app.py": "X = 1\n"})
    (tmp_path / os.fsdecode(b"latin\xe9.py")).write_text("Y = 2\n", encoding="utf-8")
    commit_in(tmp_path, "a Latin-1 name", {})
    plan = tmp_path / "tasks.jsonl"
    plan.write_text(jsonl(task("A", files=CHANGES)), encoding="utf-8")
    result = run(plan, "--repo", tmp_path)
    assert (result.exit_code, result.output.strip()) == (0, "1 task, 0 problems")
