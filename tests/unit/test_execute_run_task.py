"""One task run in-process (no Celery): the command executor runs tests/executor_program.py in a real worktree,
the task's verification runs through the sandboxed command runner, and the change is committed on its branch."""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.execute_support import (
    BROKEN_SUB,
    EXEC_ID,
    EXECUTOR_COMMAND,
    SUB,
    SUB_TEST,
    cache,
    git,
    init_repo,
    log_entries,
    make_repo,
    payload,
    snapshot,
    task,
    write_edits,
    write_project,
)
from wfqueue.execute.command_executor import CommandExecutor
from wfqueue.execute.merge import leftover_worktrees
from wfqueue.execute.model import TaskFiles, TaskRun
from wfqueue.execute.run_task import attempt_held, record_failure, run_task
from wfqueue.execute.worktree import worktree_path
from wfqueue.memory_state import MemorySessionState
from wfqueue.payloads import ExecuteTask


class Setup:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path | None = None) -> None:
        self.repo = repo or make_repo(tmp_path)
        self.exec_dir = self.repo / ".workflow" / ".execution" / EXEC_ID
        self.edits = tmp_path / "edits.json"
        self.log = tmp_path / "executor.log"
        self.state = MemorySessionState(EXEC_ID)
        monkeypatch.setenv("WFQUEUE_TEST_EDITS", str(self.edits))
        monkeypatch.setenv("WFQUEUE_TEST_EXECUTOR_LOG", str(self.log))
        # The verification's `python` is this interpreter (with pytest), whatever PATH held.
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        self.before = snapshot(self.repo)

    def run(self, edits: dict[str, Any], timeout_s: float = 120.0, **task_fields: Any) -> tuple[TaskRun, ExecuteTask]:
        write_edits(self.edits, edits)
        sent = payload(self.repo, self.exec_dir, task(**task_fields))
        return self.again(sent, timeout_s), sent

    def again(self, sent: ExecuteTask, timeout_s: float = 120.0) -> TaskRun:
        executor = CommandExecutor(EXECUTOR_COMMAND, timeout_s, self.exec_dir / "executor")
        return run_task(sent, executor, self.state, cache=cache(), worker="test-worker")

    def worktree(self, attempt: int = 1) -> Path:
        return worktree_path(self.repo, cache(), EXEC_ID, "T1", attempt)


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    return Setup(tmp_path, monkeypatch)


def test_a_task_is_committed_on_its_branch_after_its_verification_passes(setup: Setup) -> None:
    run, sent = setup.run({"T1": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}})
    assert run.status == "committed", run.error
    assert run.verification == "passed" and "passed" in run.verification_output
    assert run.commit == git(setup.repo, "rev-parse", sent.branch)
    assert git(setup.repo, "rev-parse", f"{run.commit}^") == sent.base
    assert sorted(run.files_changed) == ["calc/ops.py", "tests/test_sub.py"]
    assert git(setup.repo, "show", f"{run.commit}:calc/ops.py") + "\n" == SUB
    assert run.log is not None and "applied 2 edit(s)" in (setup.exec_dir / run.log).read_text(encoding="utf-8")
    assert not setup.worktree().exists()  # no worktree left after success
    assert snapshot(setup.repo) == setup.before  # the user's branch, index and files are untouched
    record = setup.state.agent("T1")
    assert record["state"] == "done" and record["commit"] == run.commit and record["worker"] == "test-worker"
    assert [e["task"] for e in log_entries(setup.log)] == ["T1"]


def test_a_redelivered_task_returns_its_result_without_running_again(setup: Setup) -> None:
    first, sent = setup.run({"T1": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}})
    assert setup.again(sent) == first
    # A run that died after its commit, before its result was kept: the commit is found on the branch.
    setup.state = MemorySessionState(EXEC_ID)
    found = setup.again(sent)
    assert (found.status, found.commit, found.files_changed) == (first.status, first.commit, first.files_changed)
    assert len(log_entries(setup.log)) == 1  # the executor ran once in all
    assert git(setup.repo, "rev-list", "--count", f"{sent.base}..{sent.branch}") == "1"


def test_a_failing_verification_gets_one_more_run_with_its_output(setup: Setup) -> None:
    run, _ = setup.run({"T1": {"edits": {"calc/ops.py": BROKEN_SUB, "tests/test_sub.py": SUB_TEST},
                               "fix_edits": {"calc/ops.py": SUB}}})
    assert run.status == "committed", run.error
    assert run.verification == "passed"
    assert [e["fix"] for e in log_entries(setup.log)] == [False, True]
    fix_prompt = (setup.exec_dir / "executor" / "T1-1.2.prompt.md").read_text(encoding="utf-8")
    assert "## Verification failed" in fix_prompt and "assert 8 == 2" in fix_prompt


def test_a_verification_still_failing_fails_the_task_and_keeps_its_work(setup: Setup) -> None:
    run, sent = setup.run({"T1": {"calc/ops.py": BROKEN_SUB, "tests/test_sub.py": SUB_TEST}})
    assert run.status == "failed" and run.commit is None
    assert run.verification == "failed" and "assert 8 == 2" in run.verification_output
    assert run.error is not None and "still fails after 2 executor runs" in run.error
    assert len(log_entries(setup.log)) == 2
    kept = setup.worktree()
    assert str(kept) in run.error  # never deleted silently: kept and named
    assert (kept / "calc" / "ops.py").read_text(encoding="utf-8") == BROKEN_SUB
    assert git(setup.repo, "rev-parse", sent.branch) == sent.base  # no commit of it on the branch
    assert setup.state.agent("T1")["state"] == "failed"
    assert snapshot(setup.repo) == setup.before


def test_a_worktree_kept_on_a_worker_without_the_coordinators_disk_names_the_worker(setup: Setup) -> None:
    """Read on the coordinator's machine, the path alone sent the user looking for a folder that is not there."""
    from wfqueue.transport.models import Transport

    write_edits(setup.edits, {"T1": {"calc/ops.py": BROKEN_SUB, "tests/test_sub.py": SUB_TEST}})
    sent = payload(setup.repo, setup.exec_dir, task())
    remote = sent.model_copy(update={"transport": Transport(commit=sent.base, session_id=EXEC_ID,
                                                            session_root=str(setup.exec_dir))})
    run = setup.again(remote)
    assert run.status == "failed" and run.error is not None
    assert f"its uncommitted changes are kept in {setup.worktree()} on worker test-worker" in run.error


def test_an_executor_exiting_non_zero_fails_the_task(setup: Setup) -> None:
    run, _ = setup.run({"T1": {"edits": {}, "exit": 3}})
    assert run.status == "failed" and run.error is not None
    assert "exited with status 3" in run.error and run.verification == "not_run"
    assert not setup.worktree().exists()  # it changed nothing: nothing to keep


def test_an_executor_past_its_timeout_is_stopped(setup: Setup) -> None:
    run, _ = setup.run({"T1": {"edits": {"calc/ops.py": SUB}, "sleep": 60}}, timeout_s=1.0)
    assert run.status == "failed" and run.error is not None
    assert "did not finish within 1s" in run.error
    assert log_entries(setup.log) == []  # killed before it edited anything
    assert not setup.worktree().exists()


def test_an_executor_that_changes_nothing_fails_the_task(setup: Setup) -> None:
    run, _ = setup.run({"T1": {}})
    assert run.status == "failed" and run.error == "the executor changed nothing"
    assert run.verification == "not_run"


def test_a_task_without_a_runnable_verification_is_committed_unverified(setup: Setup) -> None:
    run, _ = setup.run({"T1": {"calc/ops.py": SUB}}, verification="manual: read the diff")
    assert run.status == "committed" and run.verification == "not_run"
    assert run.files_changed == ["calc/ops.py"]



def test_a_plan_for_a_project_inside_a_larger_repository_runs_in_that_project(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outer = tmp_path / "mono"
    write_project(outer / "proj")
    init_repo(outer)
    setup = Setup(tmp_path, monkeypatch, repo=outer / "proj")
    run, _ = setup.run({"T1": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}})
    assert run.status == "committed", run.error
    assert run.verification == "passed"  # run inside the project, where `tests` is
    assert sorted(run.files_changed) == ["calc/ops.py", "tests/test_sub.py"]
    assert git(outer, "show", f"{run.commit}:proj/calc/ops.py") + "\n" == SUB


def test_commits_the_executor_made_itself_become_the_tasks_one_commit(setup: Setup) -> None:
    run, sent = setup.run({"T1": {"edits": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}, "git_commit": True}})
    assert run.status == "committed", run.error
    assert git(setup.repo, "rev-list", "--count", f"{sent.base}..{sent.branch}") == "1"
    assert git(setup.repo, "log", "-1", "--format=%an %s", sent.branch) == "Repo Owner feat(calc): Add subtraction"
    assert sorted(run.files_changed) == ["calc/ops.py", "tests/test_sub.py"]


def test_tasks_of_one_repository_run_at_once_in_their_own_worktrees(setup: Setup) -> None:
    ids = ["T1", "T2", "T3"]
    write_edits(setup.edits, {t: {"edits": {f"calc/{t.lower()}.py": f"NAME = {t!r}\n"}, "sleep": 1} for t in ids})
    sent = [payload(setup.repo, setup.exec_dir, task(t, verification="manual: none",
                                                     files=TaskFiles(create=[f"calc/{t.lower()}.py"])))
            for t in ids]
    with ThreadPoolExecutor(len(ids)) as pool:
        runs = list(pool.map(setup.again, sent))
    assert [r.status for r in runs] == ["committed"] * 3, [r.error for r in runs]
    assert [r.files_changed for r in runs] == [[f"calc/{t.lower()}.py"] for t in ids]
    entries = log_entries(setup.log)
    assert len({e["cwd"] for e in entries}) == 3
    assert max(e["start"] for e in entries) < min(e["end"] for e in entries)  # all three ran at the same time
    assert snapshot(setup.repo) == setup.before


def test_an_attempt_delivered_again_while_it_runs_waits_for_it_and_runs_no_second_agent(setup: Setup) -> None:
    """The coordinator killed under `wfqueue up` (its worker still running the task), then `execute --continue`:
    the same attempt ran twice at once in one worktree, two agents' edits mixed, and one run failed on what the
    other did ("no changes added to commit", or its worktree removed under it)."""
    write_edits(setup.edits, {"T1": {"edits": {"calc/t1.py": "NAME = 'T1'\n"}, "sleep": 1}})
    sent = payload(setup.repo, setup.exec_dir, task("T1", verification="manual: none",
                                                    files=TaskFiles(create=["calc/t1.py"])))
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(setup.again, [sent, sent])
    assert first.status == second.status == "committed", (first.error, second.error)
    assert first.commit == second.commit
    assert len(log_entries(setup.log)) == 1  # one agent ran


def test_a_delivery_waiting_for_a_run_stopped_at_its_time_limit_gets_its_failure_not_a_half_removed_worktree(
        setup: Setup) -> None:
    """The worker records a failure of its own after run_task returns (its soft time limit): the claim was released
    first, and a waiting delivery started an agent in the worktree that record_failure was removing."""
    from celery.exceptions import SoftTimeLimitExceeded

    write_edits(setup.edits, {"T1": {"edits": {"calc/t1.py": "NAME = 'T1'\n"}, "sleep": 1}})
    sent = payload(setup.repo, setup.exec_dir, task("T1", verification="manual: none",
                                                    files=TaskFiles(create=["calc/t1.py"])))
    started, second_sent = threading.Event(), threading.Event()

    class StoppedAtItsLimit:
        name = "command"

        def run(self, prompt: str, worktree: Path, step: str) -> Any:
            started.set()
            assert second_sent.wait(30)  # the second delivery is on its way to the attempt's claim
            raise SoftTimeLimitExceeded

    def second_delivery() -> TaskRun:
        second_sent.set()
        return setup.again(sent)

    def worker() -> TaskRun:
        with attempt_held(setup.state, sent):
            try:
                return run_task(sent, StoppedAtItsLimit(), setup.state, cache=cache(), worker="w1", held=True)  # type: ignore[arg-type]
            except SoftTimeLimitExceeded:
                return record_failure(sent, setup.state, "stopped at the task's 7s time limit", cache=cache(),
                                      worker="w1")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(worker)
        assert started.wait(30)
        second = pool.submit(second_delivery)
        assert first.result().status == second.result().status == "failed"
    assert second.result().error == "stopped at the task's 7s time limit"
    assert not log_entries(setup.log)  # no second agent ran


def test_a_worker_cache_missing_an_object_names_the_cache_to_delete(setup: Setup) -> None:
    """Without the shared disk the repository is the worker's cache: git's failure there said to check "the
    repository", and the user checked their own."""
    from wfqueue.transport.models import Transport

    write_edits(setup.edits, {"T1": {"calc/ops.py": SUB}})
    sent = payload(setup.repo, setup.exec_dir, task())
    remote = sent.model_copy(update={"transport": Transport(commit=sent.base, session_id=EXEC_ID,
                                                            session_root=str(setup.exec_dir))})
    blob = git(setup.repo, "rev-parse", f"{sent.base}:calc/ops.py")
    (setup.repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # deleted by hand, or a disk's damage
    run = setup.again(remote)
    assert run.status == "failed" and run.error is not None
    assert f"in worker test-worker's repository cache, {setup.repo}" in run.error
    assert "delete that folder there, which is filled again from Redis" in run.error
    assert log_entries(setup.log) == []  # no executor ran on a checkout that could not be made


# A test standing for a JavaScript project's: it finds the installed dependencies as Node does, in the nearest
# node_modules of the folders above it, and, as Jest does, sees no test file whose path holds /.git/.
NODE_LIKE_TEST = '''import os
from pathlib import Path


def test_finds_its_dependencies_as_node_does():
    here = Path(os.getcwd())
    assert "/.git/" not in f"{here}/", "Jest ignores every file under a .git folder"
    found = [p / "node_modules" / "dep" / "index.js" for p in (here, *here.parents)]
    assert any(p.is_file() for p in found), "no node_modules/dep above the worktree"
    cache = next(p for p in found if p.is_file()).parent.parent / ".cache"  # as Babel or webpack keep theirs
    cache.mkdir(exist_ok=True)
    (cache / "entry").write_text("cached")
'''


@pytest.mark.parametrize("ignored", ["node_modules/", "node_modules/*"])  # the folder, or what is in it
def test_a_tasks_checks_run_outside_the_git_directory_and_find_the_installed_node_modules(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ignored: str) -> None:
    """Task worktrees lived under .git/, where Jest found no test; out of the repository, the ignored node_modules
    Node found by walking up from the worktree must still be found."""
    repo = tmp_path / "repo"
    write_project(repo)
    (repo / ".gitignore").write_text(f".workflow/\n{ignored}\n", encoding="utf-8")
    (repo / "tests" / "test_deps.py").write_text(NODE_LIKE_TEST, encoding="utf-8")
    init_repo(repo)
    (repo / "node_modules" / "dep").mkdir(parents=True)
    (repo / "node_modules" / "dep" / "index.js").write_text("module.exports = 1;\n", encoding="utf-8")
    setup = Setup(tmp_path, monkeypatch, repo)
    run, _ = setup.run({"T1": {"calc/ops.py": SUB}}, verification="python -m pytest -q tests/test_deps.py")
    assert run.status == "committed" and run.verification == "passed", run.verification_output
    assert run.files_changed == ["calc/ops.py"]  # the link is beside the worktree, never part of the change
    folder = setup.worktree().parent.parent
    assert (folder / "node_modules" / "dep").resolve() == (repo / "node_modules" / "dep").resolve()
    # A tool's cache went into the execution's node_modules: a link to the whole folder put it in the user's.
    assert (folder / "node_modules" / ".cache" / "entry").is_file()
    assert sorted(p.name for p in (repo / "node_modules").iterdir()) == ["dep"]
    assert snapshot(setup.repo) == setup.before
    # The execution's end removes its folder, links and caches, and nothing they point to (its links were taken
    # for task folders and the end failed on them).
    assert leftover_worktrees(repo, cache(), EXEC_ID) == []
    assert not folder.exists() and (repo / "node_modules" / "dep" / "index.js").is_file()


@pytest.mark.parametrize(("verification", "makefile"), [
    ("make check", "check:\n\t.venv/bin/python -m pytest -q tests\n"),  # a program the check calls
    ("vendor/bin/phpunit", None),  # the check's own program: Composer's, installed beside the code
])
def test_a_verification_whose_program_is_not_in_the_worktree_fails_without_a_second_paid_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verification: str, makefile: str | None) -> None:
    """The checkout's ignored .venv or vendor/ is not in a worktree: the check could never run there, and the task
    was sent back to its executor (a paid run) to fix what it had not broken."""
    repo = tmp_path / "repo"
    write_project(repo)
    (repo / ".gitignore").write_text(".workflow/\n.venv/\nvendor/\n", encoding="utf-8")
    if makefile:
        (repo / "Makefile").write_text(makefile, encoding="utf-8")
    init_repo(repo)
    for program in (repo / ".venv" / "bin" / "python", repo / "vendor" / "bin" / "phpunit"):
        program.parent.mkdir(parents=True)
        program.symlink_to(sys.executable)  # there in the user's checkout, ignored
    setup = Setup(tmp_path, monkeypatch, repo)
    run, _ = setup.run({"T1": {"calc/ops.py": SUB}}, verification=verification)
    assert run.status == "failed" and run.error is not None
    assert "the verification cannot run" in run.error and "are not in wfqueue's worktrees" in run.error, run.error
    assert len(log_entries(setup.log)) == 1  # no second executor run


def test_a_src_layout_project_imported_from_the_users_checkout_is_verified_from_the_worktree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install (`pip install -e .`, or PYTHONPATH set to the checkout's src/) points Python at the user's
    checkout: the task's verification imported the unchanged code there, passed, and a change that broke `add` was
    committed."""
    repo = tmp_path / "repo"
    write_project(repo)
    (repo / "src").mkdir()
    (repo / "calc").rename(repo / "src" / "calc")
    init_repo(repo)
    setup = Setup(tmp_path, monkeypatch, repo)
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))  # where an editable install points
    broken_add = "def add(a, b):\n    return a - b\n"
    run, _ = setup.run({"T1": {"src/calc/ops.py": broken_add}}, verification="python -m pytest -q tests")
    assert run.status == "failed" and run.verification == "failed", run.verification_output
    assert "assert -1 == 5" in run.verification_output


def test_stash_entries_and_branches_an_executor_makes_leave_the_users_repository(setup: Setup) -> None:
    """A worktree shares its repository's refs: an agent's `git checkout -b` and `git stash` in a task's worktree left
    a branch in the user's repository and an entry on their own stash list (a `git stash pop` in their checkout
    applied the agent's scratch edit there). The user's own stash entry and a branch made meanwhile stay."""
    git(setup.repo, "checkout", "-q", "-b", "users-topic")
    (setup.repo / "calc" / "ops.py").write_text("# the user's own\n" + SUB, encoding="utf-8")
    git(setup.repo, "stash", "push", "-q", "-m", "users own work")
    git(setup.repo, "checkout", "-q", "main")
    setup.before = snapshot(setup.repo)
    users_stash = git(setup.repo, "rev-parse", "stash@{0}")
    run, _ = setup.run({"T1": {"git_before": [["checkout", "-q", "-b", "agent-scratch"]],
                               "edits": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}, "git_commit": True,
                               "after_edits": {"calc/scratch.py": "EXPERIMENT = 1\n"},
                               "git_after": [["stash", "push", "-q", "--include-untracked"]]}})
    assert run.status == "committed", run.error
    assert sorted(run.files_changed) == ["calc/ops.py", "tests/test_sub.py"]
    assert git(setup.repo, "stash", "list", "--format=%H") == users_stash  # the agent's entry gone, the user's kept
    branches = git(setup.repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    assert "agent-scratch" not in branches and "users-topic" in branches
    said = (setup.exec_dir / run.log).read_text(encoding="utf-8") if run.log else ""
    assert "deleted the branch agent-scratch" in said and "dropped the stash entry the executor made" in said
    assert snapshot(setup.repo) == setup.before


def test_the_planning_documents_a_prompt_lists_are_files_the_executor_can_open(setup: Setup) -> None:
    """The prompt listed the session's documents relative to the repository (`.workflow/.lite-plan/...`): the
    executor works in the task's worktree, where no session file is, so every listed document pointed at
    nothing there."""
    session = setup.repo / ".workflow" / ".lite-plan" / "add-sub"
    session.mkdir(parents=True)
    (session / "plan.json").write_text("{}", encoding="utf-8")
    write_edits(setup.edits, {"T1": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST}})
    sent = payload(setup.repo, setup.exec_dir, task())
    listed = [".workflow/.lite-plan/add-sub/plan.json", ".workflow/.lite-plan/add-sub/notes.md"]  # notes: gone
    sent = sent.model_copy(update={"context": sent.context.model_copy(update={"documents": listed})})
    run = setup.again(sent)
    assert run.status == "committed", run.error
    prompt = (setup.exec_dir / "executor" / "T1-1.prompt.md").read_text(encoding="utf-8")
    documents = prompt.split("Planning documents you may read for more detail:\n", 1)[1].split("\n\n", 1)[0]
    assert documents.splitlines() == [f"- {session / 'plan.json'}"], documents
    assert Path(documents[2:]).is_absolute() and Path(documents[2:]).is_file()
