"""lite-plan at a terminal: clarification rounds, Modify by editing tasks.jsonl, Cancel."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import cli_process, run_cli, wfqueue_env, write_script
from test_cli_interaction import read_until

pytestmark = pytest.mark.integration
REQUIREMENT = "Add per-user rate limiting to the API"


def drive(repo: Path, answers: list[tuple[str, str]], env: dict[str, str] | None = None,
          extra: tuple[str, ...] = (), command: tuple[str, ...] = ("lite-plan", REQUIREMENT),
          interrupt_at: str | None = None) -> tuple[int, str]:
    """``command`` at a terminal, each prompt answered in turn; with ``interrupt_at``, Ctrl-C (SIGINT) once that
    text is shown."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "wfqueue.cli.main", *command, "--repo", str(repo), "--json", *extra],
        stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or wfqueue_env(),
    )
    os.close(slave)
    transcript = ""
    try:
        for prompt, answer in answers:
            transcript += read_until(proc.stderr, prompt)
            assert prompt in transcript, transcript
            os.write(master, answer.encode() + b"\n")
        if interrupt_at is not None:
            transcript += read_until(proc.stderr, interrupt_at)
            assert interrupt_at in transcript, transcript
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
    return proc.returncode, out.decode() + transcript + err.decode()


def session(repo: Path) -> Path:
    return next((repo / ".workflow" / ".lite-plan").iterdir())


def test_clarification_answers_feed_the_plan(sample_repo: Path) -> None:
    code, transcript = drive(sample_repo, [
        ("clarification round 1/1", ""),
        ("?", "a new module"),
        ("?", ""),
        ("?", ""),
        ("allow, modify or cancel", "allow"),
    ])
    assert code == 0, transcript
    analysis = json.loads((session(sample_repo) / "requirement-analysis.json").read_text())
    assert [a["answer"] for a in analysis["clarifications"]] == ["a new module"]
    assert "a new module" in (session(sample_repo) / "tasks.jsonl").read_text()


def test_clarification_answers_survive_a_stop_and_feed_the_resumed_plan(sample_repo: Path, tmp_path: Path) -> None:
    """The planning step failed after the user answered (a spent budget, Ctrl-C, an API down): `resume` planned
    without the answers, and asked nothing."""
    script = tmp_path / "script.json"
    provider = write_script(script, fail={"lite_plan": "the model gave up"})
    code, transcript = drive(sample_repo, [("clarification round 1/1", ""), ("?", "a new module"), ("?", ""),
                                           ("?", "")], extra=("--provider", provider))
    assert code == 1 and "the model gave up" in transcript, transcript
    # Failed, saying how to go on: it was left "planning", which `status` showed as a command that was stopped.
    assert f"wfqueue resume {session(sample_repo).name}" in transcript and "plans it again" in transcript
    shown = run_cli("status", session(sample_repo).name, "--repo", str(sample_repo), "--json").json()
    assert shown["status"] == "failed" and "goes on where it stopped" in shown["hint"], shown
    write_script(script)  # answers every step now
    resumed = run_cli("resume", session(sample_repo).name, "--repo", str(sample_repo), "--json")
    assert resumed.code == 0, resumed.stderr
    analysis = json.loads((session(sample_repo) / "requirement-analysis.json").read_text())
    assert [a["answer"] for a in analysis["clarifications"]] == ["a new module"]


def test_modify_applies_a_valid_edit_and_refuses_a_broken_one(sample_repo: Path, tmp_path: Path) -> None:
    editor = tmp_path / "editor.py"
    counter = tmp_path / "count"
    editor.write_text(
        "import json, sys, pathlib\n"
        f"count = pathlib.Path({str(counter)!r})\n"
        "n = int(count.read_text()) if count.exists() else 0\n"
        "count.write_text(str(n + 1))\n"
        "path = pathlib.Path(sys.argv[1])\n"
        "lines = path.read_text().splitlines()\n"
        "if n == 0:\n"
        "    path.write_text('\\n'.join(lines[:-1]) + '\\n')   # drop the last task\n"
        "elif n == 1:\n"
        "    path.write_text(lines[0][:-5] + '\\n')            # truncated JSON\n"
        "else:\n"
        "    path.unlink()                                     # deleted: the command ended, the plan lost\n"
    )
    env = wfqueue_env(EDITOR=f"{sys.executable} {editor}")
    code, transcript = drive(sample_repo, [
        ("clarification round", ""), ("?", ""), ("?", ""), ("?", ""),
        ("allow, modify or cancel", "modify"),
        ("allow, modify or cancel", "modify"),
        ("allow, modify or cancel", "modify"),
        ("allow, modify or cancel", "allow"),
    ], env=env)
    assert code == 0, transcript
    assert transcript.count("edit not applied, tasks.jsonl restored") == 2, transcript
    folder = session(sample_repo)
    tasks = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines()]
    assert json.loads(transcript.splitlines()[0])["tasks"] == len(tasks) == 4
    plan_md = (folder / "plan.md").read_text()
    assert all(t["id"] in plan_md for t in tasks) and "TASK-005" not in plan_md


def test_cancel_marks_the_plan_cancelled(sample_repo: Path) -> None:
    code, transcript = drive(sample_repo, [
        ("clarification round", ""), ("?", ""), ("?", ""), ("?", ""),
        ("allow, modify or cancel", "cancel"),
    ])
    assert code == 0, transcript
    assert '"status": "cancelled"' in transcript
    # Later, from its files: still cancelled (it read as completed), and nothing to resume.
    (session,) = (sample_repo / ".workflow" / ".lite-plan").iterdir()
    shown = run_cli("status", session.name, "--repo", str(sample_repo), "--json")
    assert shown.json()["status"] == "cancelled", shown.stdout
    resumed = run_cli("resume", session.name, "--repo", str(sample_repo))
    assert resumed.code == 2 and "was cancelled when its plan was shown" in resumed.stderr, resumed.stderr
    executed = run_cli("execute", session.name, "--repo", str(sample_repo), "--dry-run")  # it has a tasks.jsonl
    assert executed.code == 2 and "its tasks were never accepted" in executed.stderr, executed.stderr


def test_a_plan_stopped_at_its_acceptance_question_is_not_taken_as_accepted(sample_repo: Path) -> None:
    """Ctrl-C at "allow, modify or cancel" left a plan that `status` called completed and `execute` ran, though
    nobody had accepted it; `resume` finished it without asking."""
    clarified = [("clarification round", ""), ("?", ""), ("?", ""), ("?", "")]
    code, transcript = drive(sample_repo, clarified, interrupt_at="allow, modify or cancel")
    assert code == 130, transcript
    (folder,) = (sample_repo / ".workflow" / ".lite-plan").iterdir()
    shown = run_cli("status", folder.name, "--repo", str(sample_repo), "--json")
    assert shown.json()["status"] == "interrupted", shown.stdout
    assert f"wfqueue resume {folder.name}" in shown.json()["hint"], shown.stdout
    executed = run_cli("execute", folder.name, "--repo", str(sample_repo), "--dry-run")
    assert executed.code == 2 and "is not accepted yet" in executed.stderr, executed.stderr
    # The resume asks the question again, and the answer counts.
    code, transcript = drive(sample_repo, [("allow, modify or cancel", "cancel")], command=("resume", folder.name))
    assert code == 0 and '"status": "cancelled"' in transcript, transcript
    assert run_cli("status", folder.name, "--repo", str(sample_repo), "--json").json()["status"] == "cancelled"


def test_a_plan_stopped_while_it_was_planned_is_asked_about_by_its_resume(sample_repo: Path, tmp_path: Path) -> None:
    """Ctrl-C as planning began (the step takes longer than the workers' stop grace, so no plan.md is written):
    the resume planned it and took it as accepted, though the user, who gave no -y, had never seen it."""
    provider = write_script(tmp_path / "slow.json", latency_s=8.0)
    with cli_process("lite-plan", REQUIREMENT, "--repo", str(sample_repo), "--provider", provider) as proc:
        seen = read_until(proc.stderr, "left unanswered", timeout=90)  # no terminal: planning starts now
        assert "left unanswered" in seen, seen
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    (folder,) = (sample_repo / ".workflow" / ".lite-plan").iterdir()
    assert not (folder / "plan.md").exists()  # the step was stopped before it wrote anything
    assert run_cli("status", folder.name, "--repo", str(sample_repo), "--json").json()["status"] == "interrupted"
    code, transcript = drive(sample_repo, [("allow, modify or cancel", "cancel")], command=("resume", folder.name))
    assert code == 0 and '"status": "cancelled"' in transcript, transcript


def test_brackets_in_the_users_text_and_paths_are_printed_as_written(sample_repo: Path, tmp_path: Path) -> None:
    """Text was printed as rich markup: `[/notes]` in a requirement crashed the command (MarkupError) before the
    plan was accepted, `[v2]` vanished from a printed path, and `[id]` from a Next.js route in a table."""
    requirement = "Fix the [/notes] handler returning deleted notes"
    run = run_cli("lite-plan", requirement, "--repo", str(sample_repo))  # no terminal: accepted as planned
    assert run.code == 0, run.stderr
    assert "MarkupError" not in run.stderr and "[/notes]" in " ".join(run.stderr.split())
    missing = run_cli("lite-plan", "notes[/draft].md", "--repo", str(sample_repo))  # a requirement file, missing
    assert missing.code == 2 and "notes[/draft].md" in missing.stderr, missing.stderr
    moved = tmp_path / "proj[v2]"
    sample_repo.rename(moved)
    again = run_cli("lite-plan", "Add per-user rate limiting to the API", "--repo", str(moved), "-y")
    assert again.code == 0, again.stderr
    shown = next(line for line in again.stdout.splitlines() if line.startswith("plan:"))
    assert Path(shown.split(None, 1)[1]).is_file(), shown
