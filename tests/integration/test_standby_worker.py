"""The ``wfqueue`` command starts its embedded worker as a standby before loading its own code
(wfqueue.prestart): a plan runs on that very process, and a standby nobody uses is gone when the command ends,
however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import FOUR_AREAS, QuietUI, run_cli, wait_until, wfqueue_env, write_script

from wfqueue import prestart
from wfqueue.runtime import broker_runtime
from wfqueue.settings import load_settings

pytestmark = pytest.mark.integration


class WorkerWatch:
    """Every ``workers.serve`` process seen while the block runs (sampled from /proc every 10 ms): pid ->
    (parent pid, command line). A prefork pool's children show their parent's command line."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, str]] = {}
        self._stop = threading.Event()

    def sample(self) -> None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in self.seen:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace").strip()
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if "workers.serve" in cmdline:
                self.seen[int(entry.name)] = (ppid, cmdline)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.sample()

    @contextmanager
    def watching(self) -> Iterator[WorkerWatch]:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def children_of(self, pid: int) -> dict[int, str]:
        return {child: cmdline for child, (ppid, cmdline) in self.seen.items() if ppid == pid}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wfqueue(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.Popen[str]:
    """The ``wfqueue`` command as installed (``python -m wfqueue`` runs the same entry point)."""
    return subprocess.Popen([sys.executable, "-m", "wfqueue", *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def folder_with_its_own_workers_package(tmp_path: Path) -> Path:
    """A current folder holding a ``workers`` package of its own, as many repositories do."""
    folder = tmp_path / "user-project"
    (folder / "workers").mkdir(parents=True)
    (folder / "workers" / "__init__.py").write_text('raise ImportError("the project\'s own workers package")\n')
    return folder


def test_a_plan_runs_on_the_standby_started_before_the_command_loaded(sample_repo: Path, tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", latency_s=0.3)  # the agents overlap: several pool children
    with WorkerWatch().watching() as watch:
        # Run from a folder with a ``workers`` package of its own: the worker still imports wfqueue's.
        cli = wfqueue("collab-plan", FOUR_AREAS, "--repo", str(sample_repo), "--max-agents", "4", "-y",
                      "--provider", provider, "--json", env=wfqueue_env(),
                      cwd=folder_with_its_own_workers_package(tmp_path))
        out, err = cli.communicate(timeout=180)
    assert cli.returncode == 0, err
    started = watch.children_of(cli.pid)
    assert len(started) == 1, f"the command started more than its standby: {started}"
    [(standby, cmdline)] = started.items()
    assert cmdline.endswith("workers.serve --standby")
    folder = Path(json.loads(out)["session_dir"])
    agent_pids = {json.loads(plan.read_text())["_metadata"]["pid"] for plan in folder.glob("agents/*/plan.json")}
    assert len(agent_pids) >= 2
    assert {watch.seen[pid][0] for pid in agent_pids} == {standby}, "the agents ran in the standby's pool"
    # The command SIGKILLs the pool's process group on its way out; the kernel ends them a moment later. Only
    # this command's: the watch also saw the workers of tests running beside this one.
    ours = {standby, *watch.children_of(standby)}
    wait_until(lambda: not [pid for pid in ours if alive(pid)], 30, "every worker process of the command ended")


def test_a_command_that_needs_no_worker_ends_its_standby(tmp_path: Path) -> None:
    with WorkerWatch().watching() as watch:
        cli = wfqueue("collab-plan", "add login", "--repo", str(tmp_path / "no-such-repo"), "-y", env=wfqueue_env())
        _, err = cli.communicate(timeout=120)
    assert cli.returncode == 2, err
    assert "no-such-repo" in err
    [standby] = watch.children_of(cli.pid)
    assert not alive(standby), "the unused standby outlived the command"


def test_a_killed_command_leaves_no_standby_behind(sample_repo: Path) -> None:
    """SIGKILL runs no exit handler; the standby's stdin closes with the command, and it leaves by itself."""
    with WorkerWatch().watching() as watch:
        cli = wfqueue("collab-plan", "add login", "--repo", str(sample_repo), "-y", env=wfqueue_env())
        [standby] = wait_until(lambda: watch.children_of(cli.pid), 60, "the standby worker started")
        os.kill(cli.pid, signal.SIGKILL)  # still loading its own code: no Redis or worker orders yet
        cli.communicate(timeout=60)
        wait_until(lambda: not alive(standby), 120, "the standby left after the command was killed")
    assert not (sample_repo / ".workflow" / ".queue" / "worker.stderr").exists(), "it was given orders"


def test_a_plan_run_from_a_project_with_its_own_workers_package_uses_wfqueues(sample_repo: Path,
                                                                              tmp_path: Path) -> None:
    """Without the standby too (``python -m wfqueue.cli.main``): the worker node is started without the current
    folder on its module path."""
    run = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(sample_repo), "-y",
                  "--json", cwd=folder_with_its_own_workers_package(tmp_path))
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed"


def standbys_of(pid: int) -> list[int]:
    """Live standby workers that ``pid`` started."""
    watch = WorkerWatch()
    watch.sample()
    return [child for child, cmdline in watch.children_of(pid).items()
            if cmdline.endswith("workers.serve --standby") and alive(child)]


def test_a_standby_the_settings_overrule_is_ended_as_the_runtime_starts(redis_url: str, sample_repo: Path,
                                                                         tmp_path: Path) -> None:
    """The entry point guessed an embedded cluster (nothing it reads names a broker), but the command's
    settings name one: the standby is killed when the runtime starts, not left idle for the whole command."""
    nothing = tmp_path / "empty.toml"
    nothing.write_text("")
    prestart.begin(["execute", "plan.json"], {"WFQUEUE_CONFIG_FILE": str(nothing)})
    try:
        # Until its exec the child still shows this process's command line: waited for, not sampled once.
        [standby] = wait_until(lambda: standbys_of(os.getpid()), 60, "the standby worker started")
        with broker_runtime(load_settings(broker_url=redis_url), sample_repo, 1, QuietUI()) as runtime:
            assert runtime.client.ping()
            assert not alive(standby), "the standby was kept while the command used another broker"
    finally:
        prestart.discard()


def test_a_node_restarted_by_sighup_starts_again_as_it_was_started(redis_url: str, tmp_path: Path) -> None:
    """Celery restarts a node on SIGHUP by running its ``sys.argv`` again: ``python -P -m workers.serve``, not
    the module's file as a script (which would put workers/ first on the module path)."""
    log = tmp_path / "node.log"
    node = subprocess.Popen([sys.executable, *prestart.WORKER_MODULE, "--queues", "control", "--concurrency", "1",
                             "--pool", "threads", "--logfile", str(log)], env=wfqueue_env(WFQUEUE_BROKER_URL=redis_url),
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        def readies() -> int:
            return log.read_text().count(" ready.") if log.exists() else 0

        wait_until(lambda: readies() == 1, 60, "the node is ready")
        os.kill(node.pid, signal.SIGHUP)
        wait_until(lambda: readies() == 2, 60, "the node restarted and is ready again")
        assert node.poll() is None
        cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes().split(b"\x00")
        assert cmdline[1:4] == [b"-P", b"-m", b"workers.serve"], cmdline
    finally:
        node.terminate()
        node.wait(60)
