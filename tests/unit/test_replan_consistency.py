"""What a replan leaves agrees with the repository (new files are created), with the session's history (ids are
never reused) and with itself (IMPL_PLAN.md and plan.json count the tasks the replan left)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import commit_in, git_in
from tests.replan_support import cli, read, three_tasks, tree
from wfqueue.fsio import atomic_write_json
from wfqueue.workflow_session.replan.apply import validate_session


def _with_sources(repo: Path, *names: str) -> None:
    (repo / "src").mkdir(exist_ok=True)
    for name in names:
        (repo / "src" / name).write_text("", encoding="utf-8")


def test_a_file_the_repository_lacks_is_created_and_a_kept_file_keeps_its_action(tmp_path: Path) -> None:
    """`files: a.py, new.py` wrote new.py as "modify": the check after writing failed, the replan was rolled back
    (exit 2) and its backup left behind, with no request able to say "create"."""
    folder = three_tasks(tmp_path)
    _with_sources(tmp_path, "config.py", "limiter.py", "client.py")
    kept = read(folder, ".task/IMPL-2.json")["files"][0]
    code, _, err, _ = cli("replan", "IMPL-2", "files: src/limiter.py, src/config.py, src/limiter_redis.py",
                          "--repo", str(tmp_path), "-y")
    assert code == 0, err
    files = read(folder, ".task/IMPL-2.json")["files"]
    assert files[0] == kept  # the task's own entry, action and all
    assert [(f["path"], f["action"]) for f in files] == [
        ("src/limiter.py", "modify"), ("src/config.py", "modify"), ("src/limiter_redis.py", "create")]
    assert validate_session(folder, tmp_path) == []  # what `wfqueue validate` and `execute` check


def test_a_replan_the_check_after_writing_would_undo_is_refused_before_writing(tmp_path: Path) -> None:
    """A task repaired by a replan (here: its missing criterion) that modifies a file the repository lacks: the
    file check ran only after writing, so the replan was rolled back and left a backup for a change never made."""
    folder = three_tasks(tmp_path)
    _with_sources(tmp_path, "config.py", "client.py")  # src/limiter.py, which IMPL-2 modifies, is gone
    broken = read(folder, ".task/IMPL-2.json")
    broken["convergence"]["criteria"] = []
    atomic_write_json(folder / ".task/IMPL-2.json", broken)
    before = tree(folder)
    code, _, err, _ = cli("replan", "IMPL-2", "criterion: requests above the limit get HTTP 429",
                          "--repo", str(tmp_path), "-y")
    assert code == 2 and "replan refused, nothing was changed" in err, err
    assert "file src/limiter.py does not exist but is to be modified" in err
    assert tree(folder) == before  # no backup folder, no lock file: nothing was written


def test_a_tracked_file_a_sparse_checkout_leaves_out_of_the_folder_is_there_to_modify(tmp_path: Path) -> None:
    """As validate and execute judge it: the file is in every task's worktree. The replan judged the folder
    alone and refused, though the plan it would write passes both."""
    git_in(tmp_path, "init", "-q")
    commit_in(tmp_path, "sources", {"src/config.py": "", "src/limiter.py": "", "src/client.py": ""})
    git_in(tmp_path, "update-index", "--skip-worktree", "src/limiter.py")  # what a sparse checkout does to it
    (tmp_path / "src/limiter.py").unlink()
    folder = three_tasks(tmp_path)
    broken = read(folder, ".task/IMPL-2.json")
    broken["convergence"]["criteria"] = []
    atomic_write_json(folder / ".task/IMPL-2.json", broken)
    code, _, err, _ = cli("replan", "IMPL-2", "criterion: requests above the limit get HTTP 429",
                          "--repo", str(tmp_path), "-y")
    assert code == 0, err
    assert read(folder, ".task/IMPL-2.json")["convergence"]["criteria"] == ["requests above the limit get HTTP 429"]
    assert validate_session(folder, tmp_path) == []


def test_an_id_a_replan_deleted_is_never_given_to_another_task(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    assert cli("replan", "remove IMPL-3", "--repo", str(tmp_path), "-y")[0] == 0
    code, out, err, _ = cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0, err
    assert json.loads(out)["added"] == ["IMPL-4"]
    assert not (folder / ".task/IMPL-3.json").exists()
    history = read(folder, "workflow-session.json")["replan_history"]
    assert [(h["deleted"], h["added"]) for h in history] == [(["IMPL-3"], []), ([], ["IMPL-4"])]
    assert read(folder, "plan.json")["task_ids"] == ["IMPL-1", "IMPL-2", "IMPL-4"]


def test_impl_plan_summary_and_strategy_count_the_tasks_after_the_replan(tmp_path: Path) -> None:
    """IMPL_PLAN.md said `task_count: 2` in its front matter and "3 task(s)", "over 3 file(s)" below it."""
    folder = three_tasks(tmp_path)
    plan = read(folder, "plan.json")
    atomic_write_json(folder / "plan.json", {  # as wfqueue's planner words them
        **plan, "summary": "Add rate limiting: 3 task(s), Medium complexity",
        "approach": "Sequential execution over 3 file(s); scope: the files named by the tasks"})
    code, _, err, _ = cli("replan", "remove IMPL-3; IMPL-2 depends on nothing", "--repo", str(tmp_path), "-y")
    assert code == 0, err
    text = (folder / "IMPL_PLAN.md").read_text(encoding="utf-8")
    assert "task_count: 2" in text and "execution_strategy: Parallel" in text and "**Execution**: Parallel" in text
    assert "Add rate limiting: 2 task(s), Medium complexity" in text
    assert "Parallel execution over 2 file(s); scope: the files named by the tasks" in text
    assert "3 task(s)" not in text and "3 file(s)" not in text
    plan = read(folder, "plan.json")
    assert (plan["summary"], plan["recommended_execution"]) == (
        "Add rate limiting: 2 task(s), Medium complexity", "Parallel")
    assert plan["approach"].startswith("Parallel execution over 2 file(s);")


def test_a_byte_order_mark_an_editor_added_does_not_break_a_replan(tmp_path: Path) -> None:
    """`verify` read a task file with a BOM, the check after a replan's writes did not: every replan adding a
    task was rolled back with "task_ids/task_count do not match", naming neither the file nor the mark; a BOM in
    plan.json was a traceback."""
    folder = three_tasks(tmp_path)
    for rel in (".task/IMPL-2.json", "plan.json"):
        (folder / rel).write_bytes(b"\xef\xbb\xbf" + (folder / rel).read_bytes())
    assert validate_session(folder) == []
    code, out, err, _ = cli("replan", "add a task for audit logging", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0, err
    assert json.loads(out)["added"] == ["IMPL-4"] and validate_session(folder) == []
    (folder / "plan.json").write_text("{cut", encoding="utf-8")
    assert [p.split(" (")[0] for p in validate_session(folder)] == ["plan.json: invalid JSON"]


def test_a_request_that_says_both_that_a_task_depends_on_another_and_not_is_refused(tmp_path: Path) -> None:
    """Applied clause by clause, "IMPL-3 depends on IMPL-1; IMPL-3 no longer depends on IMPL-1" set IMPL-3's
    dependencies to IMPL-1 and then removed it: IMPL-3 depended on nothing, with no warning, exit 0."""
    folder = three_tasks(tmp_path)
    before = tree(folder)
    code, _, err, _ = cli("replan", "IMPL-3 depends on IMPL-1; IMPL-3 no longer depends on IMPL-1",
                          "--repo", str(tmp_path), "-y")
    assert code == 2 and "says both that IMPL-3 depends on IMPL-1 and that it does not" in err, err
    assert tree(folder) == before
    code, _, err, _ = cli("replan", "IMPL-3 also depends on IMPL-1; IMPL-2 no longer depends on IMPL-1",
                          "--repo", str(tmp_path), "-y", "--json")  # two tasks: no contradiction
    assert code == 0, err
    assert read(folder, ".task/IMPL-3.json")["depends_on"] == ["IMPL-2", "IMPL-1"]


def test_a_problem_the_plan_already_had_does_not_refuse_an_unrelated_replan(tmp_path: Path) -> None:
    """A dependency cycle the model wrote (verify reports it HIGH and says to replan): every replan but the one that
    fixes it was refused, with "change the request so the plan stays consistent", which blamed the request."""
    folder = three_tasks(tmp_path)
    _with_sources(tmp_path, "config.py", "limiter.py", "client.py")
    cyclic = read(folder, ".task/IMPL-1.json") | {"depends_on": ["IMPL-3"]}
    atomic_write_json(folder / ".task" / "IMPL-1.json", cyclic)
    had = validate_session(folder, tmp_path)
    assert any("cycle" in str(p) for p in had), had
    code, out, err, _ = cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    assert code == 0, err
    assert read(folder, ".task/IMPL-2.json")["title"] == "Limiter settings"
    assert "the plan had this before and still has it" in out and "cycle" in out, out
    # A problem the replan brings itself is still refused.
    code, _, err, _ = cli("replan", "IMPL-2", "depends on IMPL-9", "--repo", str(tmp_path), "-y")
    assert code == 2 and "replan refused" in err, err


def test_a_task_file_the_session_had_broken_does_not_stop_a_replan_of_another(tmp_path: Path) -> None:
    """IMPL-1.json edited by hand into no valid task (a number for its title): a replan of IMPL-2 failed with
    "wfqueue failed unexpectedly: ValidationError" while rendering the task list; the check itself had called it a
    problem the plan had before, which does not refuse a replan. The documents listing every task are left as
    they were until IMPL-1 is mended, and a replan of IMPL-1 mends it."""
    folder = three_tasks(tmp_path)
    _with_sources(tmp_path, "config.py", "limiter.py", "client.py")
    atomic_write_json(folder / ".task" / "IMPL-1.json", read(folder, ".task/IMPL-1.json") | {"title": 5})
    broken = (folder / ".task" / "IMPL-1.json").read_bytes()
    documents = {name: (folder / name).read_bytes() for name in ("IMPL_PLAN.md", "TODO_LIST.md")}
    code, out, err, _ = cli("replan", "IMPL-2", "title: Limiter settings", "--repo", str(tmp_path), "-y")
    assert code == 0, err
    assert read(folder, ".task/IMPL-2.json")["title"] == "Limiter settings"
    assert "the plan had this before and still has it" in out and "IMPL-1" in out, out
    said = " ".join((out + err).split())
    assert "IMPL_PLAN.md and TODO_LIST.md will not be re-rendered while IMPL-1 is not a valid task" in said, said
    assert {name: (folder / name).read_bytes() for name in documents} == documents
    assert (folder / ".task" / "IMPL-1.json").read_bytes() == broken
    code, _, err, _ = cli("replan", "IMPL-1", "title: Config", "--repo", str(tmp_path), "-y")
    assert code == 0, err
    assert "Config" in (folder / "TODO_LIST.md").read_text(encoding="utf-8")
    assert "Limiter settings" in (folder / "TODO_LIST.md").read_text(encoding="utf-8")


def test_an_id_with_a_leading_zero_is_refused_naming_the_id_a_request_would_use(tmp_path: Path) -> None:
    """IMPL-1 renamed IMPL-01 by hand passed `validate` and `verify`, then every replan naming it said "Task IMPL-1
    not found; available tasks: IMPL-01, IMPL-2" (a request's ids are read as numbers), and "IMPL-2 no longer
    depends on IMPL-01" answered "IMPL-2 did not depend on IMPL-1"."""
    folder = three_tasks(tmp_path)
    _with_sources(tmp_path, "config.py", "limiter.py", "client.py")
    (folder / ".task" / "IMPL-1.json").unlink()
    atomic_write_json(folder / ".task" / "IMPL-01.json", read(folder, ".task/IMPL-2.json") | {
        "id": "IMPL-01", "title": "Config", "depends_on": []})
    atomic_write_json(folder / ".task" / "IMPL-2.json", read(folder, ".task/IMPL-2.json") | {"depends_on": ["IMPL-01"]})
    before = tree(folder)
    for request in (["IMPL-01", "title: x"], ["IMPL-2 no longer depends on IMPL-01"], ["add a task for docs"]):
        code, _, err, _ = cli("replan", *request, "--repo", str(tmp_path), "-y")
        said = " ".join(err.split())
        assert code == 2, said
        assert ".task/IMPL-01.json holds the id IMPL-01, which a replan request names IMPL-1" in said, said
        assert "rename the task IMPL-1" in said
    assert tree(folder) == before


def test_a_files_request_keeps_each_path_once_and_every_entry_a_kept_path_had(tmp_path: Path) -> None:
    """`files: a.py, a.py` stored the path twice; a path the task named once per symbol (``target``) kept one of
    its entries and lost the others."""
    folder = three_tasks(tmp_path)
    _with_sources(tmp_path, "config.py", "limiter.py", "client.py")
    per_symbol = [{"path": "src/limiter.py", "action": "modify", "target": name, "conflict_risk": "low"}
                  for name in ("Limiter", "Limiter.allow")]
    atomic_write_json(folder / ".task" / "IMPL-2.json", read(folder, ".task/IMPL-2.json") | {"files": per_symbol})
    code, _, err, _ = cli("replan", "IMPL-2", "files: src/limiter.py, src/config.py, src/config.py",
                          "--repo", str(tmp_path), "-y")
    assert code == 0, err
    task = read(folder, ".task/IMPL-2.json")
    assert [(f["path"], f.get("target")) for f in task["files"]] == [
        ("src/limiter.py", "Limiter"), ("src/limiter.py", "Limiter.allow"), ("src/config.py", None)]
    assert task["focus_paths"] == ["src/limiter.py", "src/config.py"]
