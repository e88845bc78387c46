"""collab-plan end to end in embedded mode: real Redis, real Celery worker processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import (
    FOUR_AREAS,
    processes_mentioning,
    run_cli,
    run_cli_in_process,
    session_dir,
    wfqueue_env,
    write_script,
)

from wfqueue.collab.note import parse_note, render_note
from wfqueue.collab.note_blocks import note_tasks

pytestmark = pytest.mark.integration
# Four packages named: the offline planner sizes a plan by what the requirement touches, so four agents
# need a requirement that spans four packages.
REQUIREMENT = FOUR_AREAS
AREAS = ["api", "auth", "notes-api", "storage"]  # what the offline planner picks for 4 agents


def test_plan_completes_on_several_worker_processes(sample_repo: Path, tmp_path: Path) -> None:
    # A little provider latency makes the four agents overlap, so each pool process takes one.
    provider = write_script(tmp_path / "script.json", latency_s=0.5)
    run = run_cli("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "4", "-y",
                  "--provider", provider, "--json")
    assert run.code == 0, run.stderr
    payload = run.json()
    assert set(payload) == {"session_id", "session_dir", "status", "tasks", "conflicts", "failures"}
    assert payload["failures"] == {}
    assert payload["status"] == "completed" and payload["tasks"] >= 4
    folder = session_dir(run)
    assert folder.parent == sample_repo / ".workflow" / ".planning"
    assert folder.name.startswith("CPLAN-add-per-user-rate-limiting-to-")
    for name in ("requirement-analysis.json", "plan-note.md", "conflicts.json", "plan.md"):
        assert (folder / name).is_file(), name
    analysis = json.loads((folder / "requirement-analysis.json").read_text())
    assert [s["focus_area"] for s in analysis["sub_domains"]] == AREAS
    pids, workers = set(), set()
    for area in AREAS:
        plan = json.loads((folder / "agents" / area / "plan.json").read_text())
        assert plan["task_count"] == len(plan["task_ids"]) == len(plan["tasks"]) > 0
        assert (folder / "agents" / area / "planning-context.md").read_text().startswith("# Planning Context")
        pids.add(plan["_metadata"]["pid"])
        workers.add(plan["_metadata"]["worker"])
    assert len(pids) >= 2, f"all sections came from one process: {pids}"
    assert all(w.startswith("wfq-") for w in workers)
    text = (folder / "plan-note.md").read_text()
    note = parse_note(text)
    assert render_note(note) == text
    assert note.front_matter["status"] == "completed"
    assert sorted(note.front_matter["contributors"]) == sorted(AREAS)
    tasks, problems = note_tasks(note)
    assert problems == [] and len(tasks) == payload["tasks"]
    assert {t.area for t in tasks} == set(AREAS)
    assert note.section("冲突标记").body.strip() == "✅ 无冲突检测到"
    plan_md = (folder / "plan.md").read_text()
    assert "```mermaid" in plan_md and "subgraph api" in plan_md
    # status reads what the workers recorded
    status = run_cli("status", folder.name, "--repo", str(sample_repo), "--json")
    assert status.code == 0, status.stderr
    agents = {a["focus_area"]: a for a in json.loads(status.stdout)["agents"]}
    assert {a["state"] for a in agents.values()} == {"done"}
    assert {a["pid"] for a in agents.values()} == pids
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


def test_failed_agent_gives_partial_plan_with_other_sections_intact(sample_repo: Path, tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", fail={"plan_area:auth": "injected: auth planner is down"})
    run = run_cli("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "4", "-y",
                  "--provider", provider, "--json")
    assert run.code == 1, run.stderr
    assert run.json()["status"] == "partial"
    folder = session_dir(run)
    note = parse_note((folder / "plan-note.md").read_text())
    assert note.front_matter["status"] == "partial"
    assert "auth" not in note.front_matter["contributors"]
    assert "injected: auth planner is down" in note.section("任务池 - Auth").body
    tasks, _ = note_tasks(note)
    assert {t.area for t in tasks} == {"api", "storage", "notes-api"}
    for area in ("api", "storage", "notes-api"):
        assert (folder / "agents" / area / "plan.json").is_file()
        assert "**相关文件**" in note.section(f"上下文证据 - {area.replace('-', ' ').title()}").body
    assert not (folder / "agents" / "auth" / "plan.json").exists()
    plan_md = (folder / "plan.md").read_text()
    assert "Partial plan" in plan_md and "`auth`: injected: auth planner is down" in plan_md
    # a task depending on the failed area's work is flagged, not silently kept
    conflicts = json.loads((folder / "conflicts.json").read_text())["conflicts"]
    assert all(c["type"] == "dangling_dependency" for c in conflicts)
    status = json.loads(run_cli("status", folder.name, "--repo", str(sample_repo), "--json").stdout)
    failed = [a for a in status["agents"] if a["state"] == "failed"]
    assert [a["focus_area"] for a in failed] == ["auth"] and "auth planner is down" in failed[0]["error"]
    assert processes_mentioning(str(sample_repo / ".workflow" / ".queue")) == []


def test_timed_out_agent_is_a_failure_record_not_a_broken_chord(sample_repo: Path, tmp_path: Path) -> None:
    provider = write_script(tmp_path / "script.json", hang={"plan_area:storage": 30})
    env = wfqueue_env(WFQUEUE_AGENT_SOFT_TIME_LIMIT_S="3", WFQUEUE_AGENT_TIME_LIMIT_S="10")
    run = run_cli("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "4", "-y",
                  "--provider", provider, "--json", env=env)
    assert run.code == 1, run.stderr
    folder = session_dir(run)
    # The soft limit's own message: the agent was stopped at 3 s, not killed by the hard limit (10 s) nor
    # waited out (30 s); how long the whole command took depends on the machine, so it is not asserted.
    assert "timed out after the 3s soft time limit" in (folder / "plan.md").read_text()


@pytest.mark.parametrize(("sig", "code", "said"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated"),
                                                   (signal.SIGHUP, 129, "hung up")])
def test_ctrl_c_or_sigterm_leaves_no_process_behind(sig: signal.Signals, code: int, said: str, sample_repo: Path,
                                                   tmp_path: Path) -> None:
    """SIGTERM (kill, a service manager, a container stop) and SIGHUP (the terminal closed) unwind like
    Ctrl-C: embedded Redis and the local workers are stopped, not orphaned."""
    provider = write_script(tmp_path / "script.json", hang={f"plan_area:{a}": 60 for a in AREAS})
    proc = subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", "collab-plan", REQUIREMENT, "--repo", str(sample_repo),
         "--max-agents", "4", "-y", "--provider", provider, "--json"],
        env=wfqueue_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )
    marker = str(sample_repo / ".workflow" / ".queue")
    deadline = time.monotonic() + 60
    log = sample_repo / ".workflow" / ".queue" / "worker.log"
    while time.monotonic() < deadline:
        if log.is_file() and "plan_area" in log.read_text(errors="replace"):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("agents never started")
    assert processes_mentioning(marker), "redis and workers should be running mid-plan"
    proc.send_signal(sig)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        pytest.fail(f"still running 60 s after {sig.name}; it said:\n{stderr[-6000:]}")
    assert proc.returncode == code, stderr
    *_, hint, last = stderr.strip().splitlines()
    assert last == said
    # How to finish it, runnable from where the command ran (elsewhere than the repository: so with --repo).
    session = next((sample_repo / ".workflow" / ".planning").iterdir()).name
    finish = f"finish the plan with `wfqueue resume {session} --repo {sample_repo}`"
    assert hint.endswith(finish), stderr
    # --json: the script reading stdout gets one object saying so (it got nothing), the session and the hint in it.
    assert json.loads(stdout) == {"status": "interrupted", "exit_code": code, "error": said, "hint": finish,
                                  "session_id": session}
    assert processes_mentioning(marker) == []
    # Later, with nothing running: status says the plan and its agents were interrupted, and how to finish it
    # (it said planning, every agent pending, and no hint).
    shown = run_cli("status", session, "--repo", str(sample_repo), "--json")
    assert shown.json()["status"] == "interrupted", shown.stdout
    assert {a["state"] for a in shown.json()["agents"]} == {"interrupted"}
    assert f"wfqueue resume {session}" in shown.json()["hint"]
    # and so does the listing of the repository's plans (it said planning)
    listed = run_cli("status", "--repo", str(sample_repo), "--json").json()
    assert [(row["session_id"], row["status"]) for row in listed] == [(session, "interrupted")], listed


def test_bad_input_exits_2_and_writes_nothing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                              sample_repo: Path, tmp_path: Path) -> None:
    """In-process: refused before Redis or a worker starts (tests/reliability/test_bad_input_matrix.py sends such
    inputs through a CLI process too)."""
    binary = tmp_path / "req.md"
    binary.write_bytes(b"\x00\x01\x02")
    cases = [
        (["collab-plan", "", "--repo", str(sample_repo)], "empty"),
        (["collab-plan", "x", "--repo", str(tmp_path / "missing")], "no such directory"),
        (["collab-plan", "x", "--repo", str(sample_repo / "README.md")], "is a file"),
        (["collab-plan", "x", "--repo", str(sample_repo), "--max-agents", "101"], "out of range"),
        (["collab-plan", "x", "--repo", str(sample_repo), "--max-agents", "1"], "out of range"),
        (["collab-plan", str(binary), "--repo", str(sample_repo)], "binary"),
        (["collab-plan", "x", "--repo", str(sample_repo), "--provider", "gpt"], "unknown provider"),
        (["status", "../../etc", "--repo", str(sample_repo)], "invalid session id"),
    ]
    for args, message in cases:
        run = run_cli_in_process(capsys, monkeypatch, *args)
        assert run.code == 2, (args, run.stderr)
        assert message in run.stderr, (args, run.stderr)
        assert "Traceback" not in run.stderr
    assert not (sample_repo / ".workflow").exists()


def test_unreachable_broker_exits_3_with_masked_url(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch, sample_repo: Path) -> None:
    """In-process, as above (test_bad_input_matrix.py runs an unreachable broker through a CLI process)."""
    env = {"WFQUEUE_BROKER_URL": "redis://:hunter2@127.0.0.1:1/0", "WFQUEUE_BROKER_CONNECT_TIMEOUT_S": "2"}
    run = run_cli_in_process(capsys, monkeypatch, "collab-plan", REQUIREMENT, "--repo", str(sample_repo), "-y",
                             env=env)
    assert run.code == 3, run.stderr
    assert run.seconds < 10
    assert "redis://:***@127.0.0.1:1/0" in run.stderr and "hunter2" not in run.stderr
    assert not (sample_repo / ".workflow").exists()


@pytest.mark.parametrize("command", ["collab-plan", "lite-plan", "plan"])
def test_a_repository_with_nothing_to_plan_is_refused_and_leaves_nothing(command: str, tmp_path: Path) -> None:
    """Bad input writes nothing: a repository with no code is refused before a session, an embedded Redis or
    an index cache is made (they were, under .workflow/, for a plan the first step then refused)."""
    repo = tmp_path / "docs-only"
    (repo / "notes").mkdir(parents=True)
    (repo / "README.md").write_text("# Notes, and no code\n", encoding="utf-8")
    (repo / "notes" / "setup.sh").write_text("echo a script, not code to plan against\n", encoding="utf-8")
    (repo / "node_modules" / "left-pad").mkdir(parents=True)  # a dependency's code is not the project's
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n", encoding="utf-8")
    run = run_cli(command, "Add per-user rate limiting", "--repo", str(repo), "-y", "--json")
    assert run.code == 2 and "has no source code to plan against" in run.stderr, run.stderr
    assert not (repo / ".workflow").exists()
    status = run_cli("status", "--repo", str(repo))
    assert "no collaborative plans" in status.stdout + status.stderr and "sessions:" not in status.stdout, \
        status.stdout
    # Code only in a file the index leaves out (over WFQUEUE_INDEX_MAX_FILE_BYTES): it was "no source code",
    # said by the first step, after the embedded Redis and workers had started and left a folder behind.
    big = tmp_path / "one-big-module"
    big.mkdir()
    (big / "retry.py").write_text("def retry(job):\n    return job.run()\n" * 40, encoding="utf-8")
    run = run_cli(command, "Fix the race in job retries", "--repo", str(big), "-y", "--json",
                  env=wfqueue_env(WFQUEUE_INDEX_MAX_FILE_BYTES="1000"))
    said = " ".join(run.stderr.split())
    assert run.code == 2 and "its code files are all larger than 1000 bytes" in said, said
    assert "WFQUEUE_INDEX_MAX_FILE_BYTES" in said and not (big / ".workflow").exists()
    # A bare clone of a project with code: "no source code" too, where it has no working tree at all.
    for args in (["init", "-q", str(big)], ["-C", str(big), "add", "-A"],
                 ["-C", str(big), "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "i"],
                 ["clone", "-q", "--bare", str(big), str(tmp_path / "bare.git")]):
        subprocess.run(["git", *args], check=True, capture_output=True)
    run = run_cli(command, "Fix the race in job retries", "--repo", str(tmp_path / "bare.git"), "-y")
    assert run.code == 2 and "is a bare git repository: it has no working tree to plan against" in run.stderr, \
        run.stderr
    assert not (tmp_path / "bare.git" / ".workflow").exists()


def test_status_during_an_embedded_plan_shows_its_agents_live(sample_repo: Path, tmp_path: Path) -> None:
    """`wfqueue status SESSION` in another terminal read only the files while an embedded plan ran: its running
    agents were `pending`, with no worker, no wait and no usage."""
    from support import cli_process, wait_until

    release = tmp_path / "release"  # the agents are held until it appears: seen running however slow the machine
    provider = write_script(tmp_path / "held.json", hold={"plan_area:*": str(release)})
    with cli_process("collab-plan", REQUIREMENT, "--repo", str(sample_repo), "--max-agents", "2", "-y",
                     "--provider", provider, "--json") as plan:
        planning = sample_repo / ".workflow" / ".planning"

        def running_agents() -> list[dict[str, object]]:
            folders = list(planning.iterdir()) if planning.is_dir() else []
            if not folders:
                return []
            shown = run_cli("status", folders[0].name, "--repo", str(sample_repo), "--json")
            return [a for a in shown.json().get("agents", []) if a["state"] == "running"] if shown.code == 0 else []

        agents = wait_until(running_agents, 90, "an agent shown running while the plan runs")
        assert all(a["worker"] for a in agents), agents
        release.touch()
        _, err = plan.communicate(timeout=180)
    assert plan.returncode == 0, err


def test_a_session_file_that_does_not_read_is_named_by_status_and_the_listing_goes_on(
        sample_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut requirement-analysis.json made `status` say "interrupted ... finish it: wfqueue resume", exit 0, and
    the resume then refused the file; a cut agent plan.json was a traceback in `status` and in the listing."""
    run = run_cli("collab-plan", "Add tags to notes", "--repo", str(sample_repo), "--max-agents", "2", "-y", "--json")
    assert run.code == 0, run.stderr
    folder = session_dir(run)
    analysis = folder / "requirement-analysis.json"
    plan = next(folder.glob("agents/*/plan.json"))
    for damaged in (analysis, plan):
        kept = damaged.read_bytes()
        damaged.write_bytes(kept[: len(kept) // 2])
        single = run_cli_in_process(capsys, monkeypatch, "status", folder.name, "--repo", str(sample_repo),
                                    env={"COLUMNS": "1000"})
        assert single.code == 2, single.stderr
        assert f"{damaged.relative_to(folder)} is not valid JSON" in single.stderr and "resume" not in single.stdout
        listing = run_cli_in_process(capsys, monkeypatch, "status", "--repo", str(sample_repo),
                                     env={"COLUMNS": "1000"})
        assert listing.code == 0 and "Traceback" not in listing.stderr, listing.stderr
        assert "damaged" in listing.stdout if damaged == analysis else folder.name in listing.stdout
        damaged.write_bytes(kept)
    assert run_cli_in_process(capsys, monkeypatch, "status", folder.name, "--repo", str(sample_repo)).code == 0


def test_an_understanding_the_model_failed_ends_the_plan_failed_and_resume_runs_it_again(
        sample_repo: Path, tmp_path: Path) -> None:
    """It escaped as an error: `--json` printed nothing, and `status` called the plan interrupted."""
    script = tmp_path / "script.json"
    provider = write_script(script, fail={"understand": "the model gave up"})
    run = run_cli("collab-plan", "Add per-user rate limiting", "--repo", str(sample_repo), "-y", "--provider",
                  provider, "--json")
    assert run.code == 1 and run.json()["status"] == "failed", run.stderr
    assert "the understanding step stopped: the model gave up" in run.stderr and "runs it again" in run.stderr
    session = run.json()["session_id"]
    shown = run_cli("status", session, "--repo", str(sample_repo), "--json").json()
    assert shown["status"] == "failed" and "wfqueue resume" in shown["hint"], shown
    listed = run_cli("status", "--repo", str(sample_repo), "--json").json()
    assert [row["status"] for row in listed] == ["failed"]
    failing_again = run_cli("resume", session, "--repo", str(sample_repo), "--json")  # said as the first time
    assert failing_again.code == 1 and failing_again.json()["status"] == "failed", failing_again.stderr
    write_script(script)  # answers every step now
    again = run_cli("resume", session, "--repo", str(sample_repo), "--json")
    assert again.code == 0 and again.json()["tasks"] >= 1, again.stderr


def test_a_plan_whose_agents_planned_no_task_is_failed_and_says_so(sample_repo: Path, tmp_path: Path) -> None:
    """Every agent answered with no task: the plan said "completed" (exit 0), `execute` refused it ("finish or
    resume the plan first") and a resume had nothing to run: the user went round in a loop."""
    empty = {"summary": "nothing to do here", "approach": "none", "tasks": [], "evidence": {},
             "understanding": "the area needs no change"}
    provider = write_script(tmp_path / "script.json", replies={"plan_area:*": empty})
    run = run_cli("collab-plan", "Add per-user rate limiting", "--repo", str(sample_repo), "-y", "--provider",
                  provider, "--json")
    assert run.code == 1 and run.json()["status"] == "failed" and run.json()["tasks"] == 0, run.stdout
    session = run.json()["session_id"]
    folder = Path(run.json()["session_dir"])
    assert "no agent planned a task" in (folder / "plan.md").read_text()
    shown = run_cli("status", session, "--repo", str(sample_repo), "--json").json()
    assert shown["status"] == "failed" and "no agent planned a task" in shown["hint"], shown
    said = run_cli("collab-plan", "Add per-user rate limiting", "--repo", str(sample_repo), "-y", "--provider",
                   provider)
    assert said.code == 1 and "no agent planned a task" in said.stdout, said.stdout
    refused = run_cli("execute", session, "--repo", str(sample_repo), "--dry-run")
    assert refused.code == 2 and "no agent planned a task; plan the requirement again" in refused.stderr, \
        refused.stderr
    assert "resume" not in refused.stderr  # it sent the user to a resume with nothing to do
