"""`wfqueue execute --executor claude` end to end: the real CLI in a subprocess with its embedded Redis and workers,
the real SDK in the workers, and the local Messages API server (tests/fake_anthropic.py) in this process, whose
scripted model makes each task's change through the coding tools (read_file, edit_file, write_file, run_command).

The server has a bad day: one task's conversation meets a 429 with retry-after and a stream cut off mid-answer,
and the configured model never stops calling tools on another task, which is capped and fails, so the task
depending on it is skipped while the independent one is merged. Configuring a better model and continuing runs
the failed task again as a new attempt and its dependent after it; the merged task is never sent again. Over both
runs no turn the workers had is asked for twice, and every answered call's usage is recorded once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support import cli_process, parent_of, processes_mentioning, run_cli, wait_until, wfqueue_env
from test_execute_run import lite_plan, lite_task, project, task_commits

from tests.execute_support import git, snapshot
from tests.fake_anthropic import At, ByRequest, FakeAnthropic, Fault, Reply, text, tool_call

pytestmark = [pytest.mark.integration, pytest.mark.long]

MAX_TURNS = 6  # the executor's turn cap (WFQUEUE_EXECUTOR_MAX_TURNS)
STUBBORN = "claude-sonnet-4-6"  # the model configured first: it never stops calling tools on TASK-002
BETTER = "claude-opus-4-5"  # the one configured before --continue
SUB_TEST = "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
TEXT_TEST = "from calc.text import GREETING\n\n\ndef test_greeting():\n    assert GREETING == 'hello from calculator'\n"

# Each task's conversation, one reply per round of tool results: the model reads, edits, runs the check, answers.
SCRIPTS: dict[str, list[Reply]] = {
    "TASK-001": [
        tool_call("read_file", {"path": "calc/ops.py"}),
        tool_call("edit_file", {"path": "calc/ops.py", "old_string": "    return a + b\n",
                                "new_string": "    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"}),
        tool_call("write_file", {"path": "tests/test_sub.py", "content": SUB_TEST}),
        tool_call("run_command", {"command": "python -m pytest -q tests/test_sub.py"}),
        text("Added sub() to calc/ops.py with a test; the test passes."),
    ],
    "TASK-002": [
        tool_call("edit_file", {"path": "calc/text.py", "old_string": "'calc'", "new_string": "'calculator'"}),
        text("Renamed the package to calculator."),
    ],
    "TASK-003": [
        tool_call(("edit_file", {"path": "calc/text.py", "old_string": "NAME = 'calculator'\n",
                                 "new_string": "NAME = 'calculator'\nGREETING = f'hello from {NAME}'\n"}),
                  ("write_file", {"path": "tests/test_text.py", "content": TEXT_TEST})),
        tool_call("run_command", {"command": "python -m pytest -q tests/test_text.py"}),
        text("GREETING names the package; its test passes."),
    ],
}
# The bad day, by conversation and round: each hits the first request of that round only.
FAULTS: dict[tuple[str, int], Fault] = {("TASK-001", 0): Fault("429", retry_after=1),
                                        ("TASK-001", 1): Fault("cut_stream")}


def conversation(body: Mapping[str, Any]) -> tuple[str, int]:
    """The task a request works on (its prompt's ``Task:`` line) and the rounds of tool results it sends."""
    messages = body.get("messages") or []
    first = messages[0]["content"] if messages else ""
    prompt = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
    found = re.search(r"^Task: (\S+)", prompt, re.MULTILINE)
    rounds = sum(1 for m in messages if m["role"] == "user" and isinstance(m["content"], list)
                 and any(b.get("type") == "tool_result" for b in m["content"]))
    return (found.group(1) if found else "?"), rounds


def model(body: dict[str, Any]) -> Reply:
    task_id, rounds = conversation(body)
    if task_id == "TASK-002" and body["model"] == STUBBORN:
        return tool_call("list_dir", {"path": "."})
    script = SCRIPTS.get(task_id)
    if script is None:
        return text(f"no script for {task_id}")
    return script[min(rounds, len(script) - 1)]


class BadDay:
    """Chooses each fault of FAULTS once, for the first request of its conversation's round."""

    def __init__(self) -> None:
        self.hit: set[tuple[str, int]] = set()

    def __call__(self, call: int, body: Mapping[str, Any]) -> Fault | None:
        where = conversation(body)
        if where in FAULTS and where not in self.hit:
            self.hit.add(where)
            return FAULTS[where]
        return None


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(model, faults=ByRequest(BadDay())) as server:
        yield server


def env_for(fake: FakeAnthropic, model_name: str) -> dict[str, str]:
    return wfqueue_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.base_url, NO_PROXY="127.0.0.1,localhost",
                       WFQUEUE_MODEL=model_name, WFQUEUE_EXECUTOR_MAX_TURNS=str(MAX_TURNS),
                       WFQUEUE_RETRY_BACKOFF_S="0.1", WFQUEUE_RETRY_BACKOFF_MAX_S="0.5", WFQUEUE_RATE_LIMIT_RPM="0",
                       # run_command and the verification find this interpreter (and pytest) as `python`
                       PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def requests_of(fake: FakeAnthropic, task_id: str) -> list[dict[str, Any]]:
    return [body for body in fake.requests if conversation(body)[0] == task_id]


def tool_results(fake: FakeAnthropic, task_id: str) -> list[str]:
    return [b["content"] for body in requests_of(fake, task_id) for b in body["messages"][-1]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"]


def recorded_calls(exec_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The usage entries each executor run recorded, from the transcripts kept in the execution folder."""
    return {path.stem: json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["calls"]
            for path in sorted((exec_dir / "transcripts").glob("*.jsonl"))}


def repeated_turns(fake: FakeAnthropic) -> int:
    """Requests that asked the same model again for a conversation it had answered in full (a new attempt of a
    task asks another model for its first turn: that is a new turn, not one paid twice)."""
    answered: set[tuple[str, str]] = set()
    repeated = 0
    for call, body in zip(fake.calls, fake.requests, strict=True):  # both in the order the requests came
        key = (call.fingerprint, body["model"])
        repeated += key in answered
        if call.status == 200 and call.complete:
            answered.add(key)
    return repeated


def check_usage_once(fake: FakeAnthropic, exec_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every call the server answered in full is one usage entry, and no answered turn was asked for again."""
    assert repeated_turns(fake) == 0, "a turn the workers had was sent again"
    recorded = recorded_calls(exec_dir)
    answered = [c for c in fake.calls if c.status == 200 and c.complete]
    assert sum(len(calls) for calls in recorded.values()) == len(answered), recorded
    for calls in recorded.values():
        assert [c["kind"] for c in calls] == [f"turn-{n}" for n in range(1, len(calls) + 1)]
    return recorded


def test_claude_executes_a_plan_on_a_bad_day_then_continue_with_a_better_model(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [
        lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"],
                  verification="python -m pytest -q tests/test_sub.py"),
        lite_task(2, "Rename the package", ["calc/text.py"]),
        lite_task(3, "Greet by name", ["calc/text.py"], ["tests/test_text.py"], depends=[2],
                  verification="python -m pytest -q tests/test_text.py"),
    ])
    before = snapshot(repo)

    run = run_cli("execute", str(tasks_file), "--executor", "claude", "--parallel", "2", "-y", "--json",
                  env=env_for(fake, STUBBORN), timeout=240)

    assert run.code == 1, run.stderr
    result = run.json()
    exec_id, branch, exec_dir = result["exec_id"], result["branch"], Path(result["exec_dir"])
    assert result["status"] == "partial", run.stderr
    assert result["tasks"] == {"completed": ["TASK-001"], "failed": ["TASK-002"], "rejected": [],
                               "skipped": ["TASK-003"], "blocked": [], "pending": []}
    # The bad day happened to TASK-001's conversation, and its change was still made through the tools.
    assert fake.faulted() == {"429": 1, "cut_stream": 1}
    results = tool_results(fake, "TASK-001")
    assert any("def add(a, b)" in r for r in results)  # read_file
    assert any(r.startswith("edited calc/ops.py") for r in results)
    assert any(r.startswith("created tests/test_sub.py") for r in results)
    assert any("exit status 0" in r and "1 passed" in r for r in results)  # run_command of its verification
    # The stubborn model was stopped at the cap; TASK-003, depending on it, never reached the model.
    assert len(requests_of(fake, "TASK-002")) == MAX_TURNS
    assert requests_of(fake, "TASK-003") == []
    status = run_cli("status", exec_id, "--repo", str(repo), "--json", env=env_for(fake, STUBBORN)).json()
    assert "turn cap" in status["tasks"]["TASK-002"]["reason"]
    assert status["tasks"]["TASK-003"]["reason"] == "depends on TASK-002, which is failed"
    recorded = check_usage_once(fake, exec_dir)
    # The 429 and the cut stream were re-sent within their turns: five turns, two re-sends.
    assert len(recorded["execute-TASK-001-1"]) == 5
    assert sum(c["resent"] for c in recorded["execute-TASK-001-1"]) == 2
    assert git(repo, "show", f"{branch}:calc/ops.py").endswith("def sub(a, b):\n    return a - b")
    assert git(repo, "show", f"{branch}:calc/text.py") == "NAME = 'calc'"
    assert len(task_commits(repo, branch, "TASK-001")) == 1
    assert snapshot(repo) == before
    # What the model calls cost is kept as for a plan: usage.json, the report, --json (it was in transcripts only).
    answered = len([c for c in fake.calls if c.status == 200 and c.complete])
    bill = json.loads((exec_dir / "usage.json").read_text())
    # The cut stream had begun its answer (a tool call, no text): billed by the API, so on the bill beside the
    # answered calls, marked broken.
    assert [c["step"] for c in bill["calls"] if c.get("broken")] == ["execute TASK-001#1"]
    assert bill["total"]["calls"] == answered + 1
    assert result["usage"] and "model usage:" in (exec_dir / "execution.md").read_text()
    sent_for_one = len(requests_of(fake, "TASK-001"))

    again = run_cli("execute", "--continue", exec_id, "--repo", str(repo), "--json", env=env_for(fake, BETTER),
                    timeout=240)

    assert again.code == 0, again.stderr
    final = again.json()
    assert final["status"] == "completed"
    assert final["tasks"] == {"completed": ["TASK-001", "TASK-002", "TASK-003"], "failed": [], "rejected": [],
                              "skipped": [], "blocked": [], "pending": []}
    assert len(requests_of(fake, "TASK-001")) == sent_for_one, "the merged task was sent to the model again"
    assert "TASK-002 runs again as attempt 2 (before: failed, " in again.stderr
    recorded = check_usage_once(fake, exec_dir)
    assert len(recorded["execute-TASK-002-2"]) == 2 and len(recorded["execute-TASK-003-1"]) == 3
    for task_id in ("TASK-001", "TASK-002", "TASK-003"):
        assert len(task_commits(repo, branch, task_id)) == 1, task_id
    (second,) = task_commits(repo, branch, "TASK-002")
    assert "Attempt: 2" in git(repo, "show", "-s", "--format=%B", second)
    assert git(repo, "show", f"{branch}:calc/text.py") == "NAME = 'calculator'\nGREETING = f'hello from {NAME}'"
    assert git(repo, "show", f"{branch}:tests/test_text.py") == TEXT_TEST.strip()
    assert git(repo, "log", "--merges", "--format=%s", branch, "--not", "main").count("\n") == 2  # three merges
    assert snapshot(repo) == before
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert processes_mentioning(str(repo / ".workflow" / ".queue")) == []


def test_a_budget_stops_the_claude_executor_at_its_next_call(tmp_path: Path, fake: FakeAnthropic) -> None:
    """`execute` had no --budget: a model that never stops calling tools ran to the turn cap on every task."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(2, "Rename the package", ["calc/text.py"])])
    refused = run_cli("execute", str(tasks_file), "--executor", "command", "--budget", "1k", "-y",
                      env={**env_for(fake, STUBBORN), "WFQUEUE_EXECUTOR_COMMAND": "agent-cli {prompt_file}"})
    assert refused.code == 2 and "--budget caps the claude executor's model calls" in refused.stderr
    run = run_cli("execute", str(tasks_file), "--executor", "claude", "--budget", "1k", "-y", "--json",
                  env=env_for(fake, STUBBORN), timeout=240)
    assert run.code == 1, run.stderr
    result = run.json()
    assert result["tasks"]["failed"] == ["TASK-002"]
    assert 1 <= len(requests_of(fake, "TASK-002")) < MAX_TURNS  # stopped once the budget was seen spent
    status = run_cli("status", result["exec_id"], "--repo", str(repo), "--json", env=env_for(fake, STUBBORN)).json()
    assert "budget exhausted" in status["tasks"]["TASK-002"]["reason"]
    usage = json.loads((Path(result["exec_dir"]) / "usage.json").read_text())
    assert usage["budget_exhausted"] is True and usage["budget"] == {"dollars": None, "tokens": 1000}
    # Its hint, and a --continue without a larger budget (it ran again, failed at its first call on the spent
    # cap, and used up an attempt), both say to give a larger one.
    assert f"wfqueue execute --continue {result['exec_id']} --repo {repo} --budget LARGER" in result["hint"]
    sent = len(fake.requests)
    again = run_cli("execute", "--continue", result["exec_id"], "--repo", str(repo), env=env_for(fake, STUBBORN))
    assert again.code == 2 and "its budget stopped TASK-002, and is spent" in again.stderr, again.stderr
    assert "--budget LARGER" in again.stderr and len(fake.requests) == sent


def test_a_task_waiting_out_a_long_retry_after_says_so_beside_it(tmp_path: Path) -> None:
    """The API asked for most of an hour: the task goes back to the queue until then, and the command and
    `wfqueue status` say when it is tried again, rather than "running" all the while."""
    repo = project(tmp_path)
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"], ["tests/test_sub.py"])])
    with FakeAnthropic(model, faults=At({1: Fault("429", retry_after=3000)})) as server:
        err = tmp_path / "execute.err"
        with err.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "wfqueue.cli.main", "execute", str(tasks_file), "-y"],
                                    env=env_for(server, BETTER), stdout=subprocess.DEVNULL, stderr=out,
                                    start_new_session=True)
        try:
            waiting = re.compile(r"agent TASK-001: queued \(.*429.*; tried again in 30\d\ds \(at [\d:]+; try 2 of")
            wait_until(lambda: waiting.search(err.read_text(encoding="utf-8")), 120, "the wait said beside the task")
            exec_id = next((repo / ".workflow" / ".execution").iterdir()).name
            status = run_cli("status", exec_id, "--repo", str(repo), env=env_for(server, BETTER))
            shown = " ".join(status.stdout.split())
            assert "TASK-001: " in shown and "tried again in 30" in shown, status.stdout
            assert "It runs now; should its command stop, `wfqueue execute --continue" in shown, status.stdout
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        assert len(server.requests) == 1  # nothing was sent before the time the API asked for


def test_a_worker_killed_during_a_turns_test_run_does_not_apply_its_edit_twice(tmp_path: Path) -> None:
    """One reply edits (inserting after an anchor, which stays) and runs a slow test; the worker's pool process is
    SIGKILLed during the test. The redelivered task ran the whole turn again: `sub` was inserted twice, the gate
    passed and the duplicate was merged."""
    repo = project(tmp_path)
    mark = tmp_path / "slow-test-started"
    (repo / "tests" / "test_slow.py").write_text(
        "import os\nimport pathlib\nimport time\n\n\ndef test_slow():\n"
        f"    mark = pathlib.Path({str(mark)!r})\n"
        "    if not mark.exists():  # slow the first time only: the worker is killed meanwhile\n"
        "        mark.write_text(str(os.getpid()))\n        time.sleep(60)\n", encoding="utf-8")
    git(repo, "add", "tests/test_slow.py")
    git(repo, "commit", "-q", "-m", "a slow test")
    tasks_file = lite_plan(repo, [lite_task(1, "Add sub", ["calc/ops.py"])])
    insert = {"path": "calc/ops.py", "old_string": "    return a + b\n",
              "new_string": "    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"}

    def edits_then_tests(body: dict[str, Any]) -> Reply:
        rounds = conversation(body)[1]
        if rounds == 0:
            return tool_call(("edit_file", insert), ("run_command", {"command": "python -m pytest -q tests"}))
        return text("Added sub(); the tests pass.")

    with FakeAnthropic(edits_then_tests) as server:
        with cli_process("execute", str(tasks_file), "-y", "--json", env=env_for(server, BETTER)) as proc:
            test_run = int(wait_until(lambda: mark.is_file() and mark.read_text(), 120, "the slow test running"))
            os.kill(parent_of(parent_of(test_run)), signal.SIGKILL)  # its worker's pool process (above its guard)
            out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert repeated_turns(server) == 0
    branch = json.loads(out)["branch"]
    merged = git(repo, "show", f"{branch}:calc/ops.py")
    assert merged.count("def sub") == 1, merged
