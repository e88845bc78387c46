"""The session folder becomes read-only mid-plan: a clear error, no corrupt file, and `wfqueue resume`
finishes the plan once the folder is writable again.

Tests run as root, which ignores permission bits, so the folder is made read-only two ways: immutable
(`chattr -R +i`: writes fail with EPERM; needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs) and a read-only bind
mount of the folder onto itself (writes fail with EROFS, as on a read-only volume; needs CAP_SYS_ADMIN).
The flag is always removed and the mount always unmounted; a mechanism that does not work here is skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults_support import check_collab_session, stop_group, write_report
from support import processes_mentioning, run_cli, wfqueue_env, write_script

from tests.wfs_factory import make_session, task
from wfqueue.collab.note import parse_note

pytestmark = pytest.mark.integration
REQUIREMENT = "Add per-user rate limiting to the API"


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True)


def make_read_only(mechanism: str, folder: Path) -> subprocess.CompletedProcess:
    if mechanism == "immutable":
        return run("chattr", "-R", "+i", str(folder))
    mounted = run("mount", "--bind", str(folder), str(folder))
    if mounted.returncode != 0:
        return mounted
    deadline = time.monotonic() + 10
    while True:  # "mount point is busy" while a file under it is open for writing: wait for it to close
        remounted = run("mount", "-o", "remount,bind,ro", str(folder))
        if remounted.returncode == 0 or "busy" not in remounted.stderr or time.monotonic() > deadline:
            return remounted
        time.sleep(0.1)


def make_writable(mechanism: str, folder: Path) -> None:
    if mechanism == "immutable":
        run("chattr", "-R", "-i", str(folder))
        return
    while run("mountpoint", "-q", str(folder)).returncode == 0:  # also undoes a half-done bind mount
        if run("umount", str(folder)).returncode != 0:
            run("umount", "-l", str(folder))


def require(mechanism: str, where: Path) -> None:
    """Skip unless ``mechanism`` really stops root from creating files under ``where``."""
    tools = ["chattr"] if mechanism == "immutable" else ["mount", "umount", "mountpoint"]
    if any(shutil.which(tool) is None for tool in tools):
        pytest.skip(f"{', '.join(tools)} not installed: cannot make a folder read-only for root")
    probe = where / f"{mechanism}-probe"
    probe.mkdir()
    try:
        done = make_read_only(mechanism, probe)
        if done.returncode != 0:
            pytest.skip(f"{mechanism} does not work here: {done.stderr.strip()}")
        try:
            (probe / "x").write_text("x")
        except OSError:
            return
        pytest.skip(f"{mechanism} did not stop writes on this filesystem")
    finally:
        make_writable(mechanism, probe)
        shutil.rmtree(probe, ignore_errors=True)


def planned(planning: Path) -> set[str]:
    """Areas whose task pool is in plan-note.md: the last thing an agent writes (under the note's lock)."""
    notes = list(planning.glob("*/plan-note.md"))
    if not notes:
        return set()
    note = parse_note(notes[0].read_text(encoding="utf-8"))
    return {s.heading.split(" - ", 1)[1] for s in note.sections
            if s.heading.startswith("任务池 - ") and "TASK-" in s.body}


def freeze_mid_plan(repo: Path, tmp_path: Path, mechanism: str = "immutable"
                    ) -> tuple[subprocess.CompletedProcess, Path]:
    """Run a collab-plan (embedded mode) and make its session folder read-only once api and auth are done while
    storage and notes-api are held mid-plan; they finish (and try to write) after the freeze."""
    require(mechanism, tmp_path)
    release = tmp_path / "release"
    provider = write_script(tmp_path / "script.json",
                            hold={"plan_area:storage": str(release), "plan_area:notes-api": str(release)})
    planning = repo / ".workflow" / ".planning"
    args = [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo", str(repo), "--max-agents",
            "4", "-y", "--provider", provider]
    env = wfqueue_env(WFQUEUE_RETRY_BACKOFF_S="0.1", WFQUEUE_RETRY_BACKOFF_MAX_S="0.3")  # retries, but quick ones
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    folder = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not {"Api", "Auth"} <= planned(planning):
            time.sleep(0.05)
        assert planned(planning) == {"Api", "Auth"}, f"planned before the freeze: {planned(planning)}"
        folder = next(planning.iterdir())
        frozen = make_read_only(mechanism, folder)
        assert frozen.returncode == 0, frozen.stderr
        release.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if folder is not None:
            make_writable(mechanism, folder)
        stop_group(proc)
    assert processes_mentioning(str(repo / ".workflow" / ".queue")) == []
    return subprocess.CompletedProcess(args, proc.returncode, out, err), folder


@pytest.mark.parametrize("mechanism", ["immutable", "ro-mount"])
def test_a_session_folder_made_read_only_mid_plan_fails_clearly_and_leaves_no_corrupt_file(
        mechanism: str, sample_repo: Path, tmp_path: Path) -> None:
    run, folder = freeze_mid_plan(sample_repo, tmp_path, mechanism)
    err = run.stderr
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    failed_agents = [line for line in err.splitlines() if ": failed (" in line]
    # No corrupt file: every JSON file loads, the note parses, no half-written temporary file.
    corrupt = []
    json_files = sorted(folder.rglob("*.json"))
    for path in json_files:
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            corrupt.append(path.name)
    if parse_note((folder / "plan-note.md").read_text(encoding="utf-8")).problems:
        corrupt.append("plan-note.md")
    # A write caught between its temporary file and the rename leaves the hidden temporary file behind (the
    # folder is read-only, it cannot be removed); the file it was meant to replace is intact (checked above).
    orphans = sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))
    write_report(f"read_only_folder_{mechanism}", {
        "mechanism": f"{mechanism} on the session folder after 2 of 4 agents finished",
        "exit_code": run.returncode, "traceback": "Traceback" in err,
        "error": error_lines[-1].replace(str(folder), "<session>") if error_lines else None,
        "agents_failed": len(failed_agents), "json_files_checked": len(json_files), "corrupt_files": corrupt,
        "orphaned_temporary_files": orphans,
    })
    assert corrupt == []
    # A clear error: exit 3 (infrastructure), the folder named, what to do, no traceback.
    assert run.returncode == 3, err[-2000:]
    assert "Traceback" not in err
    assert len(error_lines) == 1 and f"cannot write {folder}/" in error_lines[0], err
    assert "hint: make the session folder writable again, then `wfqueue resume` a plan" in err
    assert failed_agents and all(str(folder) in line for line in failed_agents), failed_agents


@pytest.mark.long
def test_resume_after_the_folder_is_writable_again_loses_no_section(sample_repo: Path, tmp_path: Path) -> None:
    run, folder = freeze_mid_plan(sample_repo, tmp_path)
    assert run.returncode == 3, run.stderr[-2000:]
    resume = run_cli("resume", folder.name, "--repo", str(sample_repo), "--json")
    assert resume.code == 0, resume.stderr
    check = check_collab_session(folder)
    assert check.sections_lost == [], f"sections lost after resume: {check.sections_lost}"
    assert check.duplicate_tasks == [] and check.problems == [], check
    assert resume.json()["status"] == "completed"


def test_a_repository_on_a_read_only_volume_is_refused_by_name_before_anything_starts(
        sample_repo: Path, tmp_path: Path) -> None:
    """Every planning command on a repository mounted read-only ended in a traceback (exit 1) from the embedded
    Redis's first write, or, for replan, from its lock file after the change was shown."""
    require("ro-mount", tmp_path)
    make_session(sample_repo, "Add per-user rate limiting", [task(1, "limits", ["notes_api/api/middleware.py"])])
    (session,) = (sample_repo / ".workflow" / "active").iterdir()
    before = {str(p): p.stat().st_mtime_ns for p in sample_repo.rglob("*")}
    workflow = sample_repo / ".workflow"
    commands = [("collab-plan", REQUIREMENT, "-y"), ("lite-plan", REQUIREMENT, "-y"), ("plan", REQUIREMENT, "-y"),
                ("resume", session.name), ("replan", "IMPL-1", "also log refusals", "-y")]
    frozen = make_read_only("ro-mount", sample_repo)
    try:
        assert frozen.returncode == 0, frozen.stderr
        runs = {command[0]: run_cli(*command, "--repo", str(sample_repo), timeout=60) for command in commands}
    finally:
        make_writable("ro-mount", sample_repo)
    for name, done in runs.items():
        assert done.code == 3 and "Traceback" not in done.stderr, f"{name}: exit {done.code}\n{done.stderr[-1500:]}"
        error = next(line for line in done.stderr.splitlines() if line.startswith("error:"))
        assert "read-only file system" in error, f"{name}: {error}"
        if name == "replan":  # writes the session only: the file it could not create is named
            assert f"cannot write {session}/" in error, error
        else:
            assert error == f"error: cannot write {workflow}: read-only file system", error
            assert "make the repository writable" in done.stderr
    assert processes_mentioning(str(workflow / ".queue")) == []
    assert {str(p): p.stat().st_mtime_ns for p in sample_repo.rglob("*")} == before


def test_an_execution_whose_plan_folder_refused_its_states_writes_them_on_continue(tmp_path: Path) -> None:
    """All tasks merged, then writing their states into a read-only plan folder failed (exit 3, "then `wfqueue
    resume`"); `--continue` and `resume` answered "already completed" and the plan never got its states."""
    from test_execute_run import env_for, lite_plan, lite_task, project

    require("ro-mount", tmp_path)
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Rename the package", ["calc/text.py"])])
    env = env_for(tmp_path, {"TASK-001": {"calc/text.py": "NAME = 'calculator'\n"}})
    frozen = make_read_only("ro-mount", tasks_file.parent)
    try:
        assert frozen.returncode == 0, frozen.stderr
        first = run_cli("execute", str(tasks_file), "-y", env=env, timeout=180)
    finally:
        make_writable("ro-mount", tasks_file.parent)
    assert first.code == 3 and "Traceback" not in first.stderr, first.stderr[-2000:]
    assert f"cannot write {tasks_file}" in first.stderr, first.stderr
    assert "_execution" not in tasks_file.read_text(encoding="utf-8")
    (exec_dir,) = (repo / ".workflow" / ".execution").iterdir()

    again = run_cli("execute", "--continue", exec_dir.name, "--repo", str(repo), "--json", env=env, timeout=180)
    assert again.code == 0 and again.json()["status"] == "completed", again.stderr
    (line,) = tasks_file.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["_execution"]["status"] == "completed", line
