"""Worker hosts that cannot see the coordinator's disk: Redis is all they share with it.

Redis runs on this host; each worker runs on a host of its own (a network namespace) with its own mount
namespace, where the repository's path, and with it every session folder under it, is an empty tmpfs. The
coordinator is the real CLI on this host with a broker URL and no WFQUEUE_SHARED_DISK, so the repository
travels as a git bundle through Redis and what the workers write comes back through Redis. A collab-plan, a
lite-plan, a workflow-session plan and an execution complete; their files are on this host only; `wfqueue
status` rebuilds the folder of a coordinator killed mid-plan; a worker host SIGKILLed mid-plan still leaves a
complete plan.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hosts import Hosts, free_port, namespaces_unavailable, network_namespace
from support import run_cli, session_dir, wait_until, wfqueue_env, write_script

from tests.execute_support import EXECUTOR_COMMAND, git, init_repo, write_edits
from tests.reliability.faults_support import check_collab_session, running_agents
from wfqueue import keys
from wfqueue.embedded import EmbeddedRedis
from wfqueue.state import redis_client

pytestmark = [pytest.mark.integration, pytest.mark.long]

# A killed host's tasks go to the survivor this long after it died. An execute task's hard time limit sits one
# second under it (workers/execute.py), and must fit a git bundle each way through Redis on a loaded machine.
VISIBILITY_S = 10
CONFIG_V2 = "# rate limits per user\nRATE_LIMIT_PER_MINUTE = 60\n"


def git_repository(repo: Path) -> Path:
    (repo / ".gitignore").write_text(".workflow/\n__pycache__/\n", encoding="utf-8")
    return init_repo(repo)


def seen_by(pid: int, path: Path) -> list[str]:
    """What process ``pid`` sees at ``path``: read through its own root, so through its mount namespace."""
    return sorted(os.listdir(Path(f"/proc/{pid}/root") / path.relative_to("/")))


def start_plan(requirement: str, repo: Path, provider: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "collab-plan", requirement, "--repo", str(repo),
                             "--max-agents", "4", "-y", "--provider", provider, "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def manifest_paths(folder: Path) -> list[Path]:
    """The files explorations-manifest.json in ``folder`` names, each checked to exist."""
    entries = json.loads((folder / "explorations-manifest.json").read_text())["explorations"]
    paths = sorted(Path(e["path"]) for e in entries)
    assert paths and all(p.is_file() for p in paths), paths
    return paths


def execution_plan(repo: Path) -> Path:
    """A two-task lite plan in the repository (the .workflow folder is ignored, so the tree stays clean)."""
    tasks = [{"id": f"TASK-00{n}", "title": title, "description": f"{title}.", "type": "feature", "depends_on": [],
              "files": [{"path": path, "action": "modify"}],
              "convergence": {"criteria": [f"{title} works"], "verification": f"{sys.executable} -c 'import ast, "
                              f"pathlib; ast.parse(pathlib.Path(\"{path}\").read_text())'",
                              "definition_of_done": f"{title} is done"}}
             for n, (title, path) in enumerate([("Add the rate limit setting", "notes_api/config.py"),
                                                ("Note the cache limit", "notes_api/storage/cache.py")], start=1)]
    tasks_file = repo / ".workflow" / ".lite-plan" / "limits-2026-01-01" / "tasks.jsonl"
    tasks_file.parent.mkdir(parents=True)
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return tasks_file


def test_plans_and_an_execution_complete_on_hosts_that_cannot_see_the_repository(
        sample_repo: Path, tmp_path: Path) -> None:
    reason = namespaces_unavailable()
    if reason is not None:
        pytest.skip(f"namespaces cannot be created here ({reason}), so there are no other hosts")
    repo = git_repository(sample_repo)
    cache_tail = (repo / "notes_api" / "storage" / "cache.py").read_text(encoding="utf-8")
    edits = write_edits(tmp_path / "edits.json", {
        "TASK-001": {"notes_api/config.py": (repo / "notes_api" / "config.py").read_text() + CONFIG_V2},
        "TASK-002": {"notes_api/storage/cache.py": cache_tail + "\n# entries expire after an hour\n"}})
    worker_env = {"WFQUEUE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S), "WFQUEUE_EXECUTOR_COMMAND": EXECUTOR_COMMAND,
                  "WFQUEUE_TEST_EDITS": str(edits),
                  "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    hosts = Hosts(2)
    workers: dict[str, subprocess.Popen[bytes]] = {}
    redis: EmbeddedRedis | None = None

    def start(n: int, name: str) -> None:
        workers[name] = hosts.start_worker(n, name, redis.tcp_url(hosts.gateways[n]), tmp_path / name, [repo],
                                           WFQUEUE_WORKER_CACHE_DIR=str(tmp_path / name / "cache"), **worker_env)

    def ready(name: str) -> bool:
        return " ready." in (tmp_path / name / f"{name}.log").read_text(errors="replace")

    try:
        hosts.create()
        redis = EmbeddedRedis(tmp_path / "redis-host", port=free_port(), password=secrets.token_hex(8),
                              bind=("127.0.0.1", *hosts.gateways))
        redis.start()
        start(0, "host-a")
        start(1, "host-b")
        wait_until(lambda: ready("host-a") and ready("host-b"), 60, "both worker hosts ready")
        for proc in workers.values():  # each worker is on a host of its own, and the repository is not there
            assert network_namespace(proc.pid) != network_namespace(os.getpid())
            assert seen_by(proc.pid, repo) == [], "a worker host sees the coordinator's repository"
        env = wfqueue_env(shared_disk=False, WFQUEUE_BROKER_URL=redis.tcp_url("127.0.0.1"),
                          WFQUEUE_VISIBILITY_TIMEOUT_S=str(VISIBILITY_S))
        provider = write_script(tmp_path / "script.json", latency_s=0.5)

        collab = run_cli("collab-plan", "Add per-user rate limiting to the API", "--repo", str(repo), "--max-agents",
                         "4", "-y", "--provider", provider, "--json", env=env, timeout=240)
        assert collab.code == 0, collab.stderr
        folder = session_dir(collab)
        assert collab.json()["status"] == "completed"
        check = check_collab_session(folder)
        assert not check.sections_lost and not check.problems and check.tasks > 0, check
        assert all((folder / name).is_file() for name in ("plan.md", "conflicts.json", "requirement-analysis.json"))
        # plan.md names the note where the user finds it, not in the worker's cache
        assert f"`{folder}/plan-note.md`" in (folder / "plan.md").read_text(encoding="utf-8")
        pin = json.loads((folder / "repo-pin.json").read_text())
        assert pin["commit"] == pin["head"] == git(repo, "rev-parse", "HEAD") and not pin["snapshot"]
        planned_on = {json.loads(p.read_text())["_metadata"]["worker"].split("@")[0]
                      for p in folder.glob("agents/*/plan.json")}
        assert planned_on == {"host-a", "host-b"}, planned_on

        # Uncommitted work travels as a snapshot commit; the user's branch, index and status stay as they were.
        draft = repo / "notes_api" / "limits_draft.py"
        draft.write_text("PER_USER_LIMIT = 100\n", encoding="utf-8")
        status_before = git(repo, "status", "--porcelain")
        lite = run_cli("lite-plan", "Add per-user rate limiting to the API", "--repo", str(repo), "-y", "--explore",
                       "--json", env=env, timeout=240)
        assert lite.code == 0, lite.stderr
        assert lite.json()["status"] == "completed" and lite.json()["tasks"] > 0
        assert (session_dir(lite) / "tasks.jsonl").is_file() and list(session_dir(lite).glob("exploration-*.md"))
        # What the workers wrote names the files where they are for the user, not in a worker's copy.
        assert {p.parent for p in manifest_paths(session_dir(lite))} == {session_dir(lite)}
        assert f"wfqueue validate {session_dir(lite)}/tasks.jsonl" in (session_dir(lite) / "plan.md").read_text()
        snapshot = json.loads((session_dir(lite) / "repo-pin.json").read_text())
        assert snapshot["snapshot"] and snapshot["head"] == git(repo, "rev-parse", "HEAD")
        assert git(repo, "status", "--porcelain") == status_before and git(repo, "stash", "list") == ""
        assert any((tmp_path / name / "cache" / "checkouts" / snapshot["commit"] / "notes_api" / "limits_draft.py")
                   .is_file() for name in workers), "the workers did not read the uncommitted file"
        draft.unlink()  # an execution needs a clean tree

        wfs = run_cli("plan", "Build JWT auth with refresh tokens", "--repo", str(repo), "-y", "--json", env=env,
                      timeout=240)
        assert wfs.code == 0, wfs.stderr
        assert list((session_dir(wfs) / ".task").glob("IMPL-*.json"))
        process = session_dir(wfs) / ".process"
        assert {p.parent for p in manifest_paths(process)} == {process}

        # Its checks are `python -c` lines with a `;`, which the gate does not run: merged untested, as asked.
        execution = run_cli("execute", str(execution_plan(repo)), "-y", "--no-gate", "--json", timeout=240,
                            env={**env, "WFQUEUE_EXECUTOR_COMMAND": EXECUTOR_COMMAND})
        assert execution.code == 0, execution.stderr
        outcome = execution.json()
        assert outcome["status"] == "completed", outcome
        # The workers' commits came back through Redis and were merged here, on the integration branch only.
        assert "RATE_LIMIT_PER_MINUTE = 60" in git(repo, "show", f"{outcome['branch']}:notes_api/config.py")
        assert "expire after an hour" in git(repo, "show", f"{outcome['branch']}:notes_api/storage/cache.py")
        assert git(repo, "status", "--porcelain") == "" and git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"

        # Every file of every plan is on this host; the worker hosts still see nothing at the repository's path,
        # and read the pinned commit from checkouts in their own caches.
        pinned = git(repo, "rev-parse", "main")
        for name, proc in workers.items():
            assert seen_by(proc.pid, repo) == []
            assert (tmp_path / name / "cache" / "checkouts" / pinned / "notes_api" / "server.py").is_file(), name

        # A coordinator SIGKILLed while its agents plan: the workers finish, and `wfqueue status` brings the files
        # they stored in Redis into the session folder here.
        client = redis_client(redis.tcp_url("127.0.0.1"), 5)
        planning = repo / ".workflow" / ".planning"
        before = {p.name for p in planning.iterdir()}
        lost = start_plan("Add token expiry and refresh to authentication", repo, provider, env)
        session = wait_until(lambda: next((p.name for p in planning.iterdir() if p.name not in before), None), 60,
                             "the killed coordinator's session folder")
        wait_until(lambda: running_agents(client, session), 60, "an agent running for the killed coordinator")
        # Killed once every agent's message is out (the chord's id is recorded after its header was sent): killed
        # half-way through the sending, the rest of the plan would wait for beat's watchdog, which is not here.
        wait_until(lambda: client.hget(f"wfq:{session}:meta", "chord_id"), 60, "the killed coordinator's agents sent")
        lost.kill()
        lost.wait(timeout=30)
        wait_until(lambda: client.exists(f"wfq:{session}:{keys.FINALIZED_AT}"), 120, "the workers finishing the plan")
        assert not (planning / session / "plan.md").exists()
        status = run_cli("status", session, "--repo", str(repo), "--json", env=env)
        assert status.code == 0, status.stderr
        assert (planning / session / "plan.md").is_file() and list((planning / session).glob("agents/*/plan.json"))

        # A coordinator SIGKILLed, then Redis losing the session (a restart without persistence, or the state's
        # TTL), then a commit: the resume publishes the pin the folder records, and the workers plan that. It
        # sent the agents without the repository, and they read the coordinator's paths ("no source code").
        before = {p.name for p in planning.iterdir()}
        forgotten = start_plan("Add tags to notes", repo, provider, env)
        session = wait_until(lambda: next((p.name for p in planning.iterdir() if p.name not in before), None), 60,
                             "the forgotten session's folder")
        wait_until(lambda: client.hget(f"wfq:{session}:meta", "chord_id"), 60, "the forgotten session's agents sent")
        forgotten.kill()
        forgotten.wait(timeout=30)
        wait_until(lambda: client.exists(f"wfq:{session}:{keys.FINALIZED_AT}"), 120, "the workers finishing it")
        pinned_then = (planning / session / "repo-pin.json").read_text(encoding="utf-8")
        client.delete(*client.scan_iter(match=f"wfq:{session}:*"))
        (repo / "NOTES.md").write_text("a commit after the plan began\n", encoding="utf-8")
        git(repo, "add", "NOTES.md")
        git(repo, "commit", "-q", "-m", "after the plan began")
        resumed = run_cli("resume", session, "--repo", str(repo), "--json", env=env, timeout=240)
        assert resumed.code == 0, resumed.stderr
        check = check_collab_session(planning / session)
        assert not check.sections_lost and not check.problems and check.tasks > 0, check
        assert (planning / session / "repo-pin.json").read_text(encoding="utf-8") == pinned_then
        assert json.loads(pinned_then)["commit"] != git(repo, "rev-parse", "HEAD")

        # A worker host SIGKILLed while it plans: the survivor takes its areas over, the plan completes whole.
        before = {p.name for p in planning.iterdir()}
        killed = start_plan("Add audit logging of note changes", repo, provider, env)
        session = wait_until(lambda: next((p.name for p in planning.iterdir() if p.name not in before), None), 60,
                             "the second plan's session folder")
        victim: dict[str, Any] = wait_until(
            lambda: next((a for a in running_agents(client, session) if a["worker"].startswith("host-a@")), None),
            60, "an agent running on host-a")
        os.killpg(workers["host-a"].pid, signal.SIGKILL)
        out, err = killed.communicate(timeout=180)
        assert killed.returncode == 0, err.decode()[-3000:]
        second = Path(json.loads(out)["session_dir"])
        check = check_collab_session(second)
        assert not check.sections_lost and not check.problems, check
        agent = json.loads(client.hget(f"wfq:{session}:agent:{victim['area']}", "worker") or "null")
        assert agent and agent.startswith("host-b@"), f"{victim['area']} was not finished by the survivor: {agent}"
    finally:
        for proc in workers.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if redis is not None:
            redis.stop()
        hosts.remove()
