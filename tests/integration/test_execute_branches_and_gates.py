"""`wfqueue execute` where an earlier run left something behind: a wave merged but not gated when the command
stopped, an old execution's branch whose folder is gone, a branch of the user's in the execution's way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, wait_until
from test_execute_run import SUB, SUB_TEST, env_for, lite_plan, lite_task, project

from tests.execute_support import git, log_entries, snapshot, write_edits

pytestmark = pytest.mark.integration

# Passes in a task's worktree (the task's own check) and fails, slowly, in the integration worktree (the gate).
RED_IN_THE_GATE = ("import os\nimport pathlib\nimport time\n\n\ndef test_gate():\n"
                   "    if os.path.basename(os.getcwd()) == 'integration':\n"
                   "        pathlib.Path(os.environ['GATE_MARK']).write_text(str(os.getpid()))\n"
                   "        time.sleep(4)\n        assert False\n")


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.long
def test_a_wave_merged_before_the_command_stopped_is_gated_on_continue(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"],
                                            ["tests/test_sub.py", "tests/test_gate.py"])])
    mark = tmp_path / "gate-started"
    env = {**env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST,
                                             "tests/test_gate.py": RED_IN_THE_GATE}}), "GATE_MARK": str(mark)}
    proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "execute", str(tasks_file), "-y"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_until(mark.is_file, 120, "the gate running")
    gate_pid = int(wait_until(lambda: mark.read_text(), 10, "the gate's pid"))
    proc.send_signal(signal.SIGINT)  # the wave is merged; its gate has not answered
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not alive(gate_pid), "the gate's test run outlived the command"
    exec_id = next((repo / ".workflow" / ".execution").iterdir()).name

    mark.unlink()
    again = run_cli("execute", "--continue", exec_id, "--repo", str(repo), "--json", env=env, timeout=180)
    assert again.code == 1, again.stderr
    assert again.json()["status"] == "stopped"
    assert "gate after wave 1 is red" in again.stderr, again.stderr
    assert "The gate after wave 1 is red" in again.json()["hint"]  # --json says why, and what to do


def test_a_new_execution_never_builds_on_an_old_executions_branch(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks = [lite_task(1, "Rename the package", ["calc/text.py"])]
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"}})
    first = run_cli("execute", str(lite_plan(repo, tasks)), "-y", "--json", env=env, timeout=180)
    assert first.code == 0, first.stderr
    # `git clean -fdX` (or rm -rf .workflow): the execution's folder is gone, its branch is not.
    git(repo, "clean", "-qfdX")
    (repo / "calc" / "extra.py").write_text("EXTRA = 2\n", encoding="utf-8")
    git(repo, "commit", "-qam", "work of mine after the first execution")
    second = run_cli("execute", str(lite_plan(repo, tasks)), "-y", "--json", env=env, timeout=180)
    assert second.code == 0, second.stderr
    assert second.json()["exec_id"] != first.json()["exec_id"]
    new_branch = second.json()["branch"]
    assert subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", "main", new_branch]).returncode == 0
    assert git(repo, "show", f"{new_branch}:calc/extra.py") == "EXTRA = 2"
    assert git(repo, "rev-parse", first.json()["branch"]) != git(repo, "rev-parse", new_branch)


@pytest.mark.parametrize("name", ["wfqueue", "wfqueue/tasks"])
def test_a_branch_of_the_users_in_the_executions_way_is_refused_before_anything(tmp_path: Path, name: str) -> None:
    repo = project(tmp_path)
    git(repo, "branch", name)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"}})
    before = snapshot(repo)
    refused = run_cli("execute", str(tasks_file), "-y", env=env)
    assert refused.code == 2, refused.stderr
    assert f"the branch {name} keeps git from making the execution's branches" in refused.stderr
    assert f"git branch -m {name}" in refused.stderr
    assert not (repo / ".workflow" / ".execution").exists()
    assert snapshot(repo) == before
    assert os.listdir(repo / ".workflow") == [".lite-plan"]


def test_continue_without_its_integration_branch_is_refused_before_anything_changes(tmp_path: Path) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"]),
                                  lite_task(2, "Raise the extra", ["calc/extra.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"},
                             "TASK-002": {"calc/extra.py": "EXTRA = 3\n", "notes.txt": "not its file\n"}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert run.code == 1 and run.json()["status"] == "partial", run.stderr
    exec_id, branch = run.json()["exec_id"], run.json()["branch"]
    record = repo / ".workflow" / ".execution" / exec_id / "execution.json"
    before = record.read_bytes()

    # "Fix the integration branch": checked out in a checkout of the user's, where git allows no second worktree.
    fixing = tmp_path / "fixing"
    git(repo, "worktree", "add", "-q", str(fixing), branch)
    refused = run_cli("execute", "--continue", exec_id, "--repo", str(repo), env=env)
    assert refused.code == 2, refused.stderr
    assert f"{branch} is checked out in {fixing}" in " ".join(refused.stderr.split()), refused.stderr
    assert record.read_bytes() == before, "the refused continue reopened tasks"

    git(repo, "worktree", "remove", str(fixing))
    git(repo, "branch", "-D", branch)
    gone = run_cli("execute", "--continue", exec_id, "--repo", str(repo), env=env)
    assert gone.code == 2 and f"{branch} is gone" in gone.stderr, gone.stderr
    assert record.read_bytes() == before


def test_continue_runs_the_tasks_in_the_waves_of_the_plan_as_it_is_now(tmp_path: Path) -> None:
    """The stop hints say to fix the plan: a dependency added since is honoured (TASK-002 ran beside TASK-001)."""
    repo = project(tmp_path)
    tasks = [lite_task(1, "Rename the package", ["calc/text.py"]), lite_task(2, "Raise the extra", ["calc/extra.py"])]
    tasks_file = lite_plan(repo, tasks)
    env = env_for(tmp_path, {"TASK-001": {"edits": {"calc/text.py": "NAME = 'calculator'\n"}, "exit": 3},
                             "TASK-002": {"calc/extra.py": "EXTRA = 3\n", "notes.txt": "not its file\n"}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert run.code == 1 and run.json()["status"] == "partial", run.stderr
    exec_id = run.json()["exec_id"]

    tasks[1]["depends_on"] = ["TASK-001"]
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    write_edits(Path(env["WFQUEUE_TEST_EDITS"]), {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"},
                                                  "TASK-002": {"calc/extra.py": "EXTRA = 3\n"}})
    again = run_cli("execute", "--continue", exec_id, "--repo", str(repo), "--json", env=env, timeout=180)
    assert again.code == 0, again.stderr
    assert "its waves are now TASK-001 | TASK-002" in again.stderr, again.stderr
    assert "wave 2: TASK-002 sent" in again.stderr
    runs = [r for r in log_entries(tmp_path / "executor.log")][-2:]
    assert [r["task"] for r in runs] == ["TASK-001", "TASK-002"] and runs[1]["start"] >= runs[0]["end"]


def test_a_test_file_two_tasks_add_unasked_keeps_the_first_ones_tests(tmp_path: Path) -> None:
    """Both add tests/test_shared.py without naming it: the second conflicts, runs again on the new head, and is
    rejected there for changing the first's file, whose tests stay (an agent that only writes its own version
    would drop them)."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"]),
                                  lite_task(2, "Raise the extra", ["calc/extra.py"])])
    env = env_for(tmp_path, {
        "TASK-001": {"edits": {"calc/text.py": "NAME = 'calculator'\n",
                               "tests/test_shared.py": "def test_one():\n    assert True\n"}, "sleep": 0.2},
        "TASK-002": {"edits": {"calc/extra.py": "EXTRA = 3\n",
                               "tests/test_shared.py": "def test_two():\n    assert 1 + 1 == 2\n"}, "sleep": 1.5}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert run.code == 1, run.stderr
    assert "TASK-002 conflict in tests/test_shared.py: running it again" in run.stderr, run.stderr
    assert "TASK-002 rejected, not merged: it changes tests/test_shared.py (changed)" in run.stderr
    assert "test_one" in git(repo, "show", f"{run.json()['branch']}:tests/test_shared.py")


def test_a_later_task_may_not_rewrite_the_tests_an_earlier_one_added(tmp_path: Path) -> None:
    """Only a task's own new test files are free to write: a later task emptying a dependency's tests could turn
    the gate green."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"]),
                                  lite_task(2, "Raise the extra", ["calc/extra.py"], depends=[1])])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST},
                             "TASK-002": {"calc/extra.py": "EXTRA = 3\n",
                                          "tests/test_sub.py": "def test_sub():\n    pass\n"}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert run.code == 1, run.stderr
    assert "TASK-002 rejected, not merged: it changes tests/test_sub.py (changed)" in run.stderr, run.stderr


def test_the_repositorys_git_hooks_do_not_fail_the_executions_own_commits_checkouts_and_merges(
        tmp_path: Path) -> None:
    """A prepare-commit-msg hook that wants a ticket in the branch name failed every task (`--no-verify` does not
    skip it); a post-checkout hook for a tool the worker lacks (git-lfs) ended the execution with exit 3 and left
    its integration worktree behind; a hook failing merges made every task "conflict in unknown files"."""
    repo = project(tmp_path)
    hooks = repo / ".git" / "hooks"
    for name in ("prepare-commit-msg", "post-checkout", "pre-merge-commit", "post-merge"):
        (hooks / name).write_text(f"#!/bin/sh\necho '{name}: refused by the team policy' >&2\nexit 1\n")
        (hooks / name).chmod(0o755)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"]),
                                  lite_task(2, "Rename", ["calc/text.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB, "tests/test_sub.py": SUB_TEST},
                             "TASK-002": {"calc/text.py": "NAME = 'calculator'\n"}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert run.code == 0, run.stderr
    outcome = run.json()
    assert outcome["status"] == "completed" and outcome["tasks"]["completed"] == ["TASK-001", "TASK-002"], outcome
    assert "def sub" in git(repo, "show", f"{outcome['branch']}:calc/ops.py")
    assert "refused by the team policy" not in run.stderr
    worktrees = git(repo, "worktree", "list", "--porcelain")
    assert worktrees.count("worktree ") == 1, worktrees  # the user's checkout only


def test_a_plan_with_no_runnable_check_is_not_merged_untested_unless_asked(tmp_path: Path) -> None:
    """A plan whose verifications wfqueue will not run (a shell script) had no gate: a task that broke the tests
    was merged and the run said "completed", exit 0, with no word of a gate anywhere."""
    repo = project(tmp_path)
    broken = "def add(a, b):\n    return a - b\n"  # tests/test_ops.py fails on it
    tasks_file = lite_plan(repo, [lite_task(1, "Rework add", ["calc/ops.py"], verification="./run_tests.sh")])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": broken}})
    before = snapshot(repo)
    branches = git(repo, "branch", "--list")

    refused = run_cli("execute", str(tasks_file), "-y", env=env, timeout=60)
    assert refused.code == 2, refused.stderr
    assert "error: no test gate" in refused.stderr and "TASK-001: './run_tests.sh' does not start with a known" \
        in refused.stderr, refused.stderr
    assert "--no-gate" in refused.stderr and "WFQUEUE_EXECUTE_TEST_COMMAND" in refused.stderr
    assert not (repo / ".workflow" / ".execution").exists() and git(repo, "branch", "--list") == branches
    assert snapshot(repo) == before

    # The setting is named when the test command it gives would not run: in a dry run too, which shows it.
    unsafe = run_cli("execute", str(tasks_file), "--dry-run",
                     env={**env, "WFQUEUE_EXECUTE_TEST_COMMAND": "bash -c true"})
    assert unsafe.code == 2 and "error: WFQUEUE_EXECUTE_TEST_COMMAND: 'bash -c true'" in unsafe.stderr, unsafe.stderr

    # A dry run with --no-gate says so (it said no task had a runnable check, "or execute with --no-gate").
    shown = run_cli("execute", str(tasks_file), "--dry-run", "--no-gate", env=env)
    assert shown.code == 0 and "gate after each wave: none (--no-gate: nothing tests the merges)" in shown.stdout
    asked = run_cli("execute", str(tasks_file), "-y", "--no-gate", "--json", env=env, timeout=180)
    assert asked.code == 0, asked.stderr
    result = asked.json()
    assert "No test ran on it (--no-gate)" in result["hint"]
    assert git(repo, "show", f"{result['branch']}:calc/ops.py") == broken.strip()
    report = (Path(result["exec_dir"]) / "execution.md").read_text(encoding="utf-8")
    assert "- gate: **none** (--no-gate)" in report and "## Gate" not in report
    (task_log,) = (Path(result["exec_dir"]) / "logs").glob("TASK-001.*.log")
    assert "verification not run: './run_tests.sh' does not start with a known" in task_log.read_text()
    # A continued execution keeps the gate it started with: --no-gate there was taken and ignored.
    again = run_cli("execute", "--continue", result["exec_id"], "--repo", str(repo), "--no-gate", env=env)
    assert again.code == 2 and "a continued one keeps the gate it started with" in again.stderr, again.stderr


def test_status_without_a_session_names_every_kind_of_session(tmp_path: Path) -> None:
    """`wfqueue status` listed collaborative plans only: a repository with a lite plan, a workflow session and
    an execution said "no sessions under .../.planning"."""
    from tests.wfs_factory import make_session, task

    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"}})
    executed = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert executed.code == 0, executed.stderr
    make_session(repo, "Rename the package", [task(1, "rename", ["calc/text.py"])])

    listed = run_cli("status", "--repo", str(repo), env=env, timeout=60)
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert "lite-plan sessions: calc-work-2026-01-01" in lines, listed.stdout
    assert "workflow sessions: WFS-test-session" in lines, listed.stdout
    assert f"execution sessions: {executed.json()['exec_id']}" in lines, listed.stdout
    shown = run_cli("status", executed.json()["exec_id"], "--repo", str(repo), env=env, timeout=60)
    assert shown.code == 0 and "completed" in shown.stdout, shown.stderr  # an id listed is one status reads


@pytest.mark.parametrize("command", ["/nonexistent/agent {prompt_file}", "no-such-agent-cli -p"])
def test_an_executor_program_this_machine_lacks_is_refused_before_anything_is_made(tmp_path: Path,
                                                                                     command: str) -> None:
    """The run made its folder and branches, then every task failed with "could not start"."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    env = {**env_for(tmp_path, {}), "WFQUEUE_EXECUTOR_COMMAND": command}
    branches = git(repo, "branch", "--list")
    refused = run_cli("execute", str(tasks_file), "-y", env=env, timeout=60)
    assert refused.code == 2, refused.stderr
    program = command.split()[0]
    assert f"error: the executor command's program '{program}' is not found or not executable" in refused.stderr
    assert not (repo / ".workflow" / ".execution").exists() and git(repo, "branch", "--list") == branches


def test_a_bare_repository_is_named_as_one(tmp_path: Path) -> None:
    """`--repo` a bare clone said the plan's files did not exist (or, for a plan creating files only, that it was
    no git repository at all)."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    bare = tmp_path / "repo.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    refused = run_cli("execute", str(tasks_file), "--repo", str(bare), "-y", env=env_for(tmp_path, {}), timeout=60)
    assert refused.code == 2, refused.stderr
    assert f"error: {bare} is a bare git repository: execution needs a working tree" in refused.stderr
    assert "does not exist" not in refused.stderr


def test_a_test_file_a_task_added_unasked_is_named_for_review(tmp_path: Path) -> None:
    """A coding agent added a test module its task did not name; imported by pytest, it patched the code under
    test, and the gate went green over a broken `add`. Such files are allowed (agents write their change's
    tests), so the merge is named for review, in the events, execution.md and status."""
    repo = project(tmp_path)
    patching = ("import calc.ops\n\ncalc.ops.add = lambda a, b: a + b  # what the tests will see\n\n\n"
                "def test_setup():\n    pass\n")
    tasks_file = lite_plan(repo, [lite_task(1, "Rework add", ["calc/ops.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": "def add(a, b):\n    return a - b\n",
                                          "tests/test_aaa_setup.py": patching}})
    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)
    assert run.code == 0 and run.json()["status"] == "completed", run.stderr  # the gate cannot tell
    said = "review the tests it added unasked: tests/test_aaa_setup.py"
    exec_dir = Path(run.json()["exec_dir"])
    assert said in (exec_dir / "execution.md").read_text(encoding="utf-8")
    assert "review the tests it added that its task does not name (tests/test_aaa_setup.py)" in \
        (exec_dir / "execution-events.md").read_text(encoding="utf-8")
    status = run_cli("status", run.json()["exec_id"], "--repo", str(repo), env=env)
    assert said in " ".join(status.stdout.split()), status.stdout


# A test that leaves files behind where it runs, as report writers and snapshot tools do: a report beside the
# tests, and a tracked snapshot rewritten.
LEAVES_FILES = ("import pathlib\n\nfrom calc.ops import sub\n\n\ndef test_sub_and_report():\n"
                "    assert sub(5, 3) == 2\n    pathlib.Path('report.xml').write_text('<testsuite/>')\n"
                "    pathlib.Path('tests/snapshot.txt').write_text('rewritten by the test run')\n")


def test_what_a_tasks_check_and_the_gate_write_is_neither_committed_nor_kept(tmp_path: Path) -> None:
    """Only the executor's change is the task's: the report its verification wrote made the task "change a file
    its plan does not name" (rejected), and the gate's left the integration worktree kept as uncommitted work."""
    repo = project(tmp_path)
    (repo / "tests" / "snapshot.txt").write_text("the snapshot\n", encoding="utf-8")
    git(repo, "add", "tests/snapshot.txt")
    git(repo, "commit", "-q", "-m", "a snapshot")
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/ops.py": SUB, "tests/test_sub.py": LEAVES_FILES}})
    before = snapshot(repo)

    run = run_cli("execute", str(tasks_file), "-y", "--json", env=env, timeout=180)

    assert run.code == 0 and run.json()["status"] == "completed", run.stderr
    branch = run.json()["branch"]
    task_commit = git(repo, "log", "--no-merges", "--format=%H", "-1", branch).strip()
    assert sorted(git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", task_commit).split()) == \
        ["calc/ops.py", "tests/test_sub.py"]
    assert "report.xml" not in git(repo, "ls-tree", "-r", "--name-only", branch).split()
    assert git(repo, "show", f"{branch}:tests/snapshot.txt").strip() == "the snapshot"
    assert "kept" not in run.stderr, run.stderr
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert snapshot(repo) == before
