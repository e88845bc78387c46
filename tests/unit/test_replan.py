"""`wfqueue replan`: request parsing, impact, backup, apply, validation, rollback, restore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.replan_support import cli, read, three_tasks, tree
from tests.wfs_factory import make_session, task
from wfqueue.errors import (
    OutsideSelectionError,
    ReplanCancelledError,
    ReplanRolledBackError,
    UnrecognisedRequestError,
    WfqueueError,
)
from wfqueue.fsio import atomic_write_text
from wfqueue.workflow_session.replan.apply import run_replan
from wfqueue.workflow_session.replan.backup import MANIFEST, Manifest, parse_manifest, render_manifest
from wfqueue.workflow_session.replan.intent import (
    AddTask,
    DeleteTasks,
    EditDependencies,
    UpdateTask,
    parse_execution_intent,
    parse_request,
)
from wfqueue.workflow_session.replan.select import Decision, Question

# -- helpers ----------------------------------------------------------------------------------


class FakeUI:
    """Answers questions from a dict (key -> values) and records what was asked."""

    def __init__(self, answers: dict[str, list[str]] | None = None, decision: Decision = "confirm") -> None:
        self.answers = answers or {}
        self.decision = decision
        self.asked: list[str] = []
        self.messages: list[str] = []
        self.impacts: list[str] = []

    def info(self, message: str) -> None:
        self.messages.append(message)

    def ask(self, question: Question) -> list[str]:
        self.asked.append(question.key)
        return self.answers.get(question.key, [])

    def ask_text(self, prompt: str) -> str:
        return ""

    def show_impact(self, text: str) -> None:
        self.impacts.append(text)

    def confirm(self, text: str) -> Decision:
        return self.decision


# -- parsing (pure) ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "method", "tool"), [
    ("use codex", "cli", "codex"),
    ("Use Codex for execution", "cli", "codex"),
    ("run with claude", "cli", "claude"),
    ("改用 gemini", "cli", "gemini"),
    ("改用gemini执行所有任务", "cli", "gemini"),
    ("使用 Qwen 执行", "cli", "qwen"),
    ("使用 Agent 执行", "agent", None),
    ("switch to an agent", "agent", None),
])
def test_execution_intent_in_english_and_chinese(text: str, method: str, tool: str | None) -> None:
    intent = parse_execution_intent(text)
    assert intent is not None
    assert (intent.method, intent.cli_tool, intent.enable_resume) == (method, tool, method == "cli")


def test_execution_intent_only_for_configured_tools_and_never_inside_a_new_task_title() -> None:
    assert parse_execution_intent("use codex", tools=("gemini",)) is None
    request = parse_request("add a task to use gemini for summaries")
    assert request.intent is None
    assert request.operations == [AddTask(title="Use gemini for summaries", description="use gemini for summaries")]
    with pytest.raises(UnrecognisedRequestError, match="more than one execution tool"):
        parse_request("use codex; 改用 gemini")


def test_session_mode_grammar() -> None:
    request = parse_request("remove IMPL-3 and IMPL-004; 新增任务：审计日志，依赖 IMPL-2\n"
                            "IMPL-2 also depends on impl-1, add a task for audit export that depends on IMPL-1")
    assert request.operations == [
        DeleteTasks(task_ids=["IMPL-3", "IMPL-4"]),
        AddTask(title="审计日志", description="审计日志", depends_on=["IMPL-2"]),
        EditDependencies(task_id="IMPL-2", mode="add", depends_on=["IMPL-1"]),
        AddTask(title="Audit export", description="audit export", depends_on=["IMPL-1"]),
    ]
    assert parse_request("Add 2FA support").operations == [AddTask(title="Add 2FA support",
                                                                   description="Add 2FA support")]
    assert parse_request("IMPL-3 不再依赖 IMPL-2").operations == [
        EditDependencies(task_id="IMPL-3", mode="remove", depends_on=["IMPL-2"])]
    assert parse_request("IMPL-3 has no dependencies").operations == [
        EditDependencies(task_id="IMPL-3", mode="set", depends_on=[])]


def test_unrecognised_session_text_is_refused_with_the_accepted_forms() -> None:
    with pytest.raises(UnrecognisedRequestError) as caught:
        parse_request("make the thing faster")
    assert caught.value.exit_code == 2
    assert "make the thing faster" in caught.value.message
    assert "add a task for TEXT" in caught.value.hint and "删除 IMPL-3" in caught.value.hint


def test_task_mode_grammar() -> None:
    request = parse_request("Update acceptance criteria to include rate limiting\ndepends on IMPL-1\n"
                            "use codex and keep the public API", task_id="IMPL-2")
    assert request.intent is not None and request.intent.cli_tool == "codex"
    assert request.operations == [
        UpdateTask(field="criterion", value="rate limiting"),
        EditDependencies(task_id="IMPL-2", mode="set", depends_on=["IMPL-1"]),
        UpdateTask(field="note", value="keep the public API"),
    ]
    with pytest.raises(UnrecognisedRequestError, match="session-mode change"):
        parse_request("add a task for X", task_id="IMPL-2")



def test_task_mode_takes_each_label_of_the_accepted_form_whatever_separates_them() -> None:
    """The hint's own form, "title: ... | criterion: ... | files: a, b", gave one title holding it all: no
    criterion, no files, and the replan said applied."""
    want = [UpdateTask(field="title", value="Issue JWT tokens"),
            UpdateTask(field="criterion", value="login returns a signed token"),
            UpdateTask(field="files", value="app/api.py, app/auth.py"),
            UpdateTask(field="note", value="keep the old tokens valid")]
    for text in ("title: Issue JWT tokens | criterion: login returns a signed token | files: app/api.py, "
                 "app/auth.py; keep the old tokens valid",
                 "title: Issue JWT tokens, criterion: login returns a signed token; files: app/api.py, app/auth.py\n"
                 "keep the old tokens valid"):
        assert parse_request(text, task_id="IMPL-2").operations == want, text
    # A label without its colon inside a value is the value's: no title "parse_config" nor "needed".
    assert parse_request("step: Move parse() into utils.py, rename it to parse_config", task_id="IMPL-2").operations \
        == [UpdateTask(field="step", value="Move parse() into utils.py, rename it to parse_config")]
    assert parse_request("description: Parse the header, rename as needed", task_id="IMPL-2").operations \
        == [UpdateTask(field="description", value="Parse the header, rename as needed")]
    # Every label form with its colon starts a clause ("acceptance criteria:", "add a step:", "验收标准包含：").
    for text in ("title: Issue JWT tokens, acceptance criteria: login returns a signed token",
                 "title: Issue JWT tokens | add a criterion: login returns a signed token"):
        assert parse_request(text, task_id="IMPL-2").operations == want[:2], text
    assert parse_request("标题：签发令牌，验收标准包含：登录返回令牌", task_id="IMPL-2").operations == [
        UpdateTask(field="title", value="签发令牌"), UpdateTask(field="criterion", value="登录返回令牌")]
    # A "|" inside a value is the value's own.
    piped = parse_request("criterion: `grep -c token app/api.py | wc -l` prints 1", task_id="IMPL-2")
    assert piped.operations == [UpdateTask(field="criterion", value="`grep -c token app/api.py | wc -l` prints 1")]

def test_manifest_round_trips_and_refuses_paths_a_replan_never_writes(tmp_path: Path) -> None:
    manifest = Manifest(session_id="WFS-x", timestamp="2026-11-22T08:00:00+00:00", reason="drop IMPL-3\nnow",
                        scope="task_restructure", mode="session", files=[".task/IMPL-3.json", "TODO_LIST.md"],
                        deleted=[".task/IMPL-3.json"], created=[".task/IMPL-4.json"])
    text = render_manifest(manifest, tmp_path)
    assert parse_manifest(text) == manifest.model_copy(update={"reason": "drop IMPL-3 now", "backup": tmp_path.name})
    with pytest.raises(WfqueueError, match="never writes"):
        parse_manifest(text.replace("`TODO_LIST.md`", "`../../etc/passwd`"))


# -- apply ------------------------------------------------------------------------------------


def test_adding_a_task_backs_up_then_updates_tasks_todo_plan_and_session(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    before = {rel: (folder / rel).read_bytes() for rel in
              ["TODO_LIST.md", "IMPL_PLAN.md", "plan.json", "workflow-session.json"]}
    code, out, _, _ = cli("replan", "add a task for audit logging that depends on IMPL-3",
                          "--repo", str(tmp_path), "-y", "--json")
    assert code == 0
    summary = json.loads(out)
    assert (summary["added"], summary["updated"], summary["deleted"]) == (["IMPL-4"], [], [])
    # The command it names works from any folder (here: not the repository).
    refine = f'wfqueue replan IMPL-4 "criterion: ..." --session WFS-test-session --repo {tmp_path}'
    assert refine in summary["warnings"][0]
    new = read(folder, ".task/IMPL-4.json")
    assert (new["title"], new["depends_on"]) == ("Audit logging", ["IMPL-3"])
    assert "- [ ] **IMPL-4**: Audit logging → [📋](./.task/IMPL-4.json)" in (folder / "TODO_LIST.md").read_text()
    plan_md = (folder / "IMPL_PLAN.md").read_text()
    assert "task_count: 4" in plan_md and "| IMPL-4 | Audit logging |" in plan_md
    assert "IMPL-1 → IMPL-2 → IMPL-3 → IMPL-4" in plan_md  # critical path re-rendered
    assert read(folder, "plan.json")["task_ids"] == ["IMPL-1", "IMPL-2", "IMPL-3", "IMPL-4"]
    assert read(folder, "plan.json")["task_count"] == 4
    session = read(folder, "workflow-session.json")
    [entry] = session["replan_history"]
    assert entry["added"] == ["IMPL-4"] and entry["scope"] == "task_restructure"
    assert entry["reason"] == "add a task for audit logging that depends on IMPL-3"
    assert session["progress"]["last_replan"] == entry["timestamp"]
    assert session["progress"]["current_tasks"] == ["IMPL-1", "IMPL-2", "IMPL-3", "IMPL-4"]
    backup = Path(summary["backup"])
    assert backup.parent == folder / ".process" / "backup" and backup.name.startswith("replan-")
    assert entry["backup"] == backup.relative_to(folder).as_posix()
    for rel, data in before.items():  # the backup holds the files as they were
        assert (backup / rel).read_bytes() == data
    manifest = (backup / MANIFEST).read_text()
    assert "**Reason**: add a task for audit logging" in manifest
    assert f"wfqueue replan --restore {backup} --session WFS-test-session" in manifest
    assert summary["rollback"] == f"wfqueue replan --restore {backup} --session WFS-test-session"


def test_a_replan_that_would_make_eleven_tasks_changes_no_byte(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Ten things", [task(n, f"Thing {n}", [f"src/t{n}.py"]) for n in range(1, 11)])
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "add a task for an eleventh thing", "--repo", str(tmp_path), "-y")
    assert code == 2
    assert "Replan would create 11 tasks (limit: 10)" in error
    assert tree(folder) == snapshot  # the whole folder, backups included: there is none


def test_restore_puts_back_every_byte_including_deleted_and_created_tasks(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    snapshot = tree(folder)
    code, out, _, _ = cli("replan", "remove IMPL-3; add a task for metrics; IMPL-2 depends on nothing; use codex",
                          "--repo", str(tmp_path), "-y", "--json")
    assert code == 0
    summary = json.loads(out)
    assert (summary["added"], summary["deleted"]) == (["IMPL-4"], ["IMPL-3"])
    assert tree(folder, skip_backups=True) != snapshot
    code, out, _, _ = cli("replan", "--restore", summary["backup"], "--session", "WFS-test-session", "--json")
    assert code == 0, out
    assert json.loads(out)["removed"] == [".task/IMPL-4.json"]
    assert tree(folder, skip_backups=True) == snapshot


def test_restore_refuses_a_folder_that_is_not_a_backup_of_that_session(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    other = make_session(tmp_path, "Other", [task(1, "One", ["src/one.py"])], session_id="WFS-other")
    not_backup = folder / ".process"
    code, _, error, _ = cli("replan", "--restore", str(not_backup), "--session", "WFS-test-session")
    assert code == 2 and "no MANIFEST.md" in error
    code, out, _, _ = cli("replan", "add a task for x", "--repo", str(tmp_path), "--session", "WFS-other", "-y",
                          "--json")
    assert code == 0
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "--restore", json.loads(out)["backup"], "--session", "WFS-test-session")
    assert code == 2 and "is kept in the session WFS-other, not in WFS-test-session" in error
    assert tree(folder) == snapshot and (other / ".task/IMPL-2.json").exists()


@pytest.mark.parametrize(("damage", "said"), [
    (lambda f: (f / "plan.json").write_text("{{{"), "plan.json cannot be read"),
    (lambda f: ((f / ".task/IMPL-2.json").unlink(), (f / ".task/IMPL-2.json").mkdir()),
     ".task/IMPL-2.json is not a file"),
    # Ids that are not IMPL-N broke the renumbering with a ValueError or IndexError traceback.
    (lambda f: (f / ".task/IMPL-3.json").write_text((f / ".task/IMPL-3.json").read_text()
                                                    .replace('"IMPL-3"', '"IMPL-3b"')),
     ".task/IMPL-3.json holds the id 'IMPL-3b', not an IMPL-N id"),
    (lambda f: (f / ".task/IMPL-3.json").write_text((f / ".task/IMPL-3.json").read_text()
                                                    .replace('"IMPL-3"', '"setup"')),
     ".task/IMPL-3.json holds the id 'setup'"),
])
def test_a_hand_damaged_session_is_refused_by_name_with_nothing_changed(tmp_path: Path, damage: Any,
                                                                        said: str) -> None:
    folder = three_tasks(tmp_path)
    damage(folder)
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y")
    assert code == 2 and said in error and "nothing was changed" in error and "Traceback" not in error, error
    assert tree(folder) == snapshot


def test_restore_refuses_a_manifest_that_is_not_utf8(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    code, out, _, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0
    backup = Path(json.loads(out)["backup"])
    (backup / MANIFEST).write_bytes(b"\xff\xfe not a manifest")
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "--restore", str(backup), "--session", "WFS-test-session")
    assert code == 2 and "is not UTF-8 text" in error and "nothing was restored" in error, error
    assert tree(folder) == snapshot


def test_delete_moves_the_task_into_the_backup(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    original = (folder / ".task/IMPL-3.json").read_bytes()
    code, out, _, _ = cli("replan", "删除 IMPL-3", "--repo", str(tmp_path), "-y", "--json")
    assert code == 0
    backup = Path(json.loads(out)["backup"])
    assert not (folder / ".task/IMPL-3.json").exists()
    assert (backup / "IMPL-3.json").read_bytes() == original
    assert "- `.task/IMPL-3.json` (deleted by this replan)" in (backup / MANIFEST).read_text()
    assert "IMPL-3" not in (folder / "TODO_LIST.md").read_text()
    assert read(folder, "workflow-session.json")["replan_history"][0]["deleted"] == ["IMPL-3"]


def test_deleting_a_task_others_depend_on_keeps_dependencies_unless_the_user_says_yes(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "remove IMPL-2", "--repo", str(tmp_path), "-y")
    assert code == 2 and "IMPL-3 depends on IMPL-2, which this replan deletes" in error
    assert tree(folder) == snapshot
    ui = FakeUI({"scope": ["task_restructure"], "task_changes": ["add_remove"], "dependency_changes": ["yes"]})
    summary = run_replan(tmp_path, "remove IMPL-2", ui, interactive=True)
    assert ui.asked == ["scope", "modules", "task_changes", "dependency_changes"]
    assert summary.deleted == ["IMPL-2"] and summary.updated == ["IMPL-3"]
    assert read(folder, ".task/IMPL-3.json")["depends_on"] == ["IMPL-1"]  # re-wired to what IMPL-2 waited for


def test_task_mode_updates_one_task_and_reports_its_dependents(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    others = {rel: (folder / rel).read_bytes() for rel in [".task/IMPL-1.json", ".task/IMPL-3.json"]}
    code, out, _, _ = cli("replan", "IMPL-2", "criterion: requests above the limit get HTTP 429",
                          "--repo", str(tmp_path), "-y", "--json")
    assert code == 0
    summary = json.loads(out)
    assert (summary["mode"], summary["updated"], summary["added"], summary["deleted"]) == ("task", ["IMPL-2"], [], [])
    assert summary["dependents"] == {"IMPL-2": ["IMPL-3"]}
    assert read(folder, ".task/IMPL-2.json")["convergence"]["criteria"][-1] == "requests above the limit get HTTP 429"
    assert {rel: (folder / rel).read_bytes() for rel in others} == others
    assert "- [IMPL-2] requests above the limit get HTTP 429" in (folder / "IMPL_PLAN.md").read_text()


def test_task_mode_execution_intent_sets_meta_execution_config(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    code, _, _, _ = cli("replan", "IMPL-1", "改用 gemini", "--repo", str(tmp_path), "-y")
    assert code == 0
    assert read(folder, ".task/IMPL-1.json")["meta"]["execution_config"] == {
        "method": "cli", "cli_tool": "gemini", "enable_resume": True}
    code, _, _, _ = cli("replan", "IMPL-1", "使用 Agent 执行", "--repo", str(tmp_path), "-y")
    assert code == 0
    assert read(folder, ".task/IMPL-1.json")["meta"]["execution_config"] == {
        "method": "agent", "cli_tool": None, "enable_resume": False}
    assert "execution_config" not in read(folder, ".task/IMPL-2.json").get("meta", {})


def test_missing_session_or_task_lists_what_exists(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    make_session(tmp_path, "Other", [task(1, "One", ["src/one.py"])], session_id="WFS-other")
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "use codex", "--repo", str(tmp_path), "--session", "WFS-nope", "-y")
    assert code == 2 and "WFS-nope not found" in error and "WFS-other, WFS-test-session" in error
    code, _, error, _ = cli("replan", "IMPL-9", "use codex", "--repo", str(tmp_path), "-y",
                            "--session", "WFS-test-session")
    assert code == 2 and "Task IMPL-9 not found" in error and "available tasks: IMPL-1, IMPL-2, IMPL-3" in error
    code, _, error, _ = cli("replan", "remove IMPL-7", "--repo", str(tmp_path), "-y", "--session", "WFS-test-session")
    assert code == 2 and "IMPL-7 not found" in error and "IMPL-1, IMPL-2, IMPL-3" in error
    # The tasks named before it in the same request are still the session's.
    code, _, error, _ = cli("replan", "remove IMPL-1, IMPL-2, IMPL-7", "--repo", str(tmp_path), "-y", "--session",
                            "WFS-test-session")
    assert code == 2 and "IMPL-7 not found" in error and "the session's tasks: IMPL-1, IMPL-2, IMPL-3" in error
    assert tree(folder) == snapshot


def test_a_session_whose_file_cannot_be_read_is_named_not_called_missing(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    (folder / "workflow-session.json").write_text("{not json", encoding="utf-8")
    code, _, error, _ = cli("replan", "add a task for metrics", "--repo", str(tmp_path), "-y")
    assert code == 2 and "workflow-session.json cannot be read in WFS-test-session" in error, error


def test_a_cycle_in_the_request_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    snapshot = tree(folder)
    code, _, error, _ = cli("replan", "IMPL-1 depends on IMPL-3", "--repo", str(tmp_path), "-y")
    assert code == 2 and "dependency cycle IMPL-1 -> IMPL-3 -> IMPL-2 -> IMPL-1" in error
    assert tree(folder) == snapshot


def test_failed_validation_after_applying_restores_the_backup(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    snapshot = tree(folder)

    def write_with_a_cycle(path: Path, text: str) -> object:
        # What a concurrent edit or a faulty writer could do: IMPL-1 ends up depending on IMPL-3.
        if path.name == "IMPL-1.json":
            text = json.dumps({**json.loads(text), "depends_on": ["IMPL-3"]}, indent=2)
        return atomic_write_text(path, text)

    with pytest.raises(ReplanRolledBackError) as caught:
        run_replan(tmp_path, "title: Config loader", FakeUI(), task_id="IMPL-1", write=write_with_a_cycle)
    assert caught.value.exit_code == 2
    assert "dependency cycle" in caught.value.message and "backup was restored" in caught.value.message
    assert tree(folder, skip_backups=True) == snapshot
    [backup] = (folder / ".process" / "backup").iterdir()
    assert (backup / MANIFEST).is_file()


def test_a_write_that_fails_half_way_is_rolled_back(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    snapshot = tree(folder)

    def failing_write(path: Path, text: str) -> object:
        if path.name == "TODO_LIST.md":
            raise OSError("disk full")
        return atomic_write_text(path, text)

    with pytest.raises(WfqueueError, match="disk full"):
        run_replan(tmp_path, "add a task for metrics", FakeUI(), write=failing_write)
    assert tree(folder, skip_backups=True) == snapshot


# -- clarification --------------------------------------------------------------------------


def test_interactive_answers_bound_the_request(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    snapshot = tree(folder)
    with pytest.raises(OutsideSelectionError, match="adds or deletes tasks"):
        run_replan(tmp_path, "add a task for metrics", FakeUI({"scope": ["tasks_only"]}), interactive=True)
    ui = FakeUI(decision="cancel")
    with pytest.raises(ReplanCancelledError):
        run_replan(tmp_path, "add a task for metrics", ui, interactive=True)
    assert ui.asked == ["scope", "modules", "task_changes", "dependency_changes"]  # defaults fit the request
    assert "Create: IMPL-4" in ui.impacts[0]
    assert tree(folder) == snapshot


def test_task_mode_questions_and_ripple_to_dependents(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    ui = FakeUI({"update_types": ["requirements"], "ripple": ["yes"]})
    summary = run_replan(tmp_path, "the limiter must also cover websocket calls", ui, task_id="IMPL-2",
                         interactive=True)
    assert ui.asked == ["update_types", "ripple"]
    assert summary.updated == ["IMPL-2", "IMPL-3"]
    assert "Upstream IMPL-2 changed" in read(folder, ".task/IMPL-3.json")["description"]
    with pytest.raises(OutsideSelectionError, match="depends_on"):
        run_replan(tmp_path, "depends on nothing", FakeUI({"update_types": ["requirements"]}), task_id="IMPL-2",
                   interactive=True)


def test_without_a_terminal_the_safe_defaults_apply_and_the_user_is_told(tmp_path: Path) -> None:
    folder = three_tasks(tmp_path)
    code, out, err, _ = cli("replan", "IMPL-3", "keep retries idempotent", "--repo", str(tmp_path))
    assert code == 0
    assert "stdin is not a terminal" in err and "safe defaults" in err
    assert "## Replan Complete" in out and "Rollback:  wfqueue replan --restore" in out
    entry = read(folder, "workflow-session.json")["replan_history"][0]
    assert (entry["scope"], entry["updated"]) == ("tasks_only", ["IMPL-3"])
    assert read(folder, ".task/IMPL-3.json")["description"].endswith("keep retries idempotent")


def test_sessions_lists_id_status_tasks_created_and_last_replan(tmp_path: Path) -> None:
    three_tasks(tmp_path)
    make_session(tmp_path, "Other", [task(1, "One", ["src/one.py"])], session_id="WFS-other")
    (tmp_path / ".workflow/active/WFS-broken").mkdir()
    (tmp_path / ".workflow/active/WFS-broken/workflow-session.json").write_text("{", encoding="utf-8")
    (tmp_path / ".workflow/active/WFS-lost/.task").mkdir(parents=True)  # its record deleted: it was left out
    (tmp_path / ".workflow/active/WFS-lost/.task/IMPL-1.json").write_text("{}", encoding="utf-8")
    (tmp_path / ".workflow/active/notes").mkdir()  # not a session
    assert cli("replan", "use codex", "--repo", str(tmp_path), "--session", "WFS-other", "-y")[0] == 0
    code, out, _, _ = cli("sessions", "--repo", str(tmp_path), "--json")
    assert code == 0
    rows = {r["session_id"]: r for r in json.loads(out)["sessions"]}
    assert rows["WFS-test-session"]["tasks"] == 3 and rows["WFS-test-session"]["last_replan"] is None
    assert rows["WFS-other"]["last_replan"] is not None and rows["WFS-other"]["replans"] == 1
    assert rows["WFS-test-session"]["created_at"] == "2026-11-22T08:00:00+00:00"
    assert rows["WFS-broken"]["status"] == "damaged"
    assert rows["WFS-lost"]["status"] == "damaged" and rows["WFS-lost"]["error"] == "workflow-session.json is missing"
    assert rows["WFS-lost"]["tasks"] == 1 and "notes" not in rows


def test_the_sessions_table_keeps_long_ids_whole_when_piped(tmp_path: Path) -> None:
    long_id = "WFS-add-a-subtract-operation-to-calc-ops-with-tests-and-docs"
    make_session(tmp_path, "Subtract", [task(1, "One", ["src/one.py"])], session_id=long_id)
    code, out, _, _ = cli("sessions", "--repo", str(tmp_path))  # not a terminal: 80 columns
    assert code == 0 and long_id in out, out


def test_chosen_modules_limit_a_session_wide_change(tmp_path: Path) -> None:
    folder = make_session(tmp_path, "Auth and users", [
        task(1, "Login", ["src/auth/login.py"]), task(2, "Profile", ["src/user/profile.py"]),
        task(3, "Tokens", ["src/auth/tokens.py"], [1])])
    ui = FakeUI({"scope": ["plan_update"], "modules": ["src/auth"], "dependency_changes": ["no"]})
    summary = run_replan(tmp_path, "run with claude", ui, interactive=True)
    assert ui.asked == ["scope", "modules", "dependency_changes"]
    assert summary.updated == ["IMPL-1", "IMPL-3"] and summary.scope == "plan_update"
    assert "meta" not in read(folder, ".task/IMPL-2.json")
    snapshot = tree(folder)
    ui = FakeUI({"scope": ["comprehensive"], "modules": ["src/auth"], "task_changes": ["add_remove"]})
    with pytest.raises(WfqueueError, match="IMPL-2 is outside the chosen modules"):
        run_replan(tmp_path, "remove IMPL-2", ui, interactive=True)
    assert tree(folder) == snapshot


def test_quotes_and_backticks_that_belong_to_the_text_are_kept(tmp_path: Path) -> None:
    """A criterion `` `python -m pytest -q tests/test_limits.py` passes`` was stored with its first backtick cut
    off, one ending in `status "429"` lost its last quote: only quotes around all of a value are not its own."""
    folder = three_tasks(tmp_path)
    for request, kept in (('criterion: `python -m pytest -q tests/test_limits.py` passes',
                           "`python -m pytest -q tests/test_limits.py` passes"),
                          ('criterion: over the limit the API returns status "429"',
                           'over the limit the API returns status "429"'),
                          ('criterion: "requests above the limit get HTTP 429"',
                           "requests above the limit get HTTP 429")):
        code, _, err, _ = cli("replan", "IMPL-2", request, "--repo", str(tmp_path), "-y")
        assert code == 0, err
        assert read(folder, ".task/IMPL-2.json")["convergence"]["criteria"][-1] == kept


@pytest.mark.parametrize(("rel", "content", "advice"), [
    ("plan.json", "[]", "restore the session from a backup"),
    ("plan.json", '{"summary": 5, "approach": "x", "task_ids": [], "task_count": 0}', "restore the session"),
    (".process/context-package.json", "[]", "move it out of the session folder"),
])
def test_a_hand_edited_plan_file_is_refused_by_name_not_with_a_traceback(tmp_path: Path, rel: str, content: str,
                                                                         advice: str) -> None:
    """plan.json edited to `[]` ended the replan in a TypeError traceback (exit 1), `"summary": 5` in pydantic's;
    a damaged .process/ file was refused with advice to restore a backup, which never holds .process/ files."""
    folder = three_tasks(tmp_path)
    (folder / rel).write_text(content, encoding="utf-8")
    before = tree(folder)
    code, _, err, _ = cli("replan", "IMPL-2", "title: Limiter", "--repo", str(tmp_path), "-y")
    assert code == 2, err
    assert f"{rel} cannot be read" in err and "nothing was changed" in err and advice in err, err
    assert tree(folder) == before


def test_a_folder_where_the_todo_list_goes_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """TODO_LIST.md replaced by a folder: the replan's write failed, then its rollback, which said it had failed
    (exit 3) though nothing had changed."""
    folder = three_tasks(tmp_path)
    (folder / "TODO_LIST.md").unlink()
    (folder / "TODO_LIST.md").mkdir()
    before = tree(folder)
    code, _, err, _ = cli("replan", "IMPL-2", "title: Limiter", "--repo", str(tmp_path), "-y")
    assert code == 2 and "TODO_LIST.md is not a file; nothing was changed" in err, err
    assert tree(folder) == before and (folder / "TODO_LIST.md").is_dir()
