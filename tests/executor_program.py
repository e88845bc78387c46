"""A stand-in coding agent for tests, used as ``WFQUEUE_EXECUTOR_COMMAND="{python} {this file} {prompt_file}"``
(absolute paths: the command runs inside the task's worktree).

It reads the prompt (from the file named by its argument, else stdin), finds the task id on its ``Task: ID``
line, and applies the edits a test wrote for that task in the JSON file named by ``WFQUEUE_TEST_EDITS``::

    {"T1": {"edits": {"path": "new content", "other": {"replace": ["old", "new"]}, "gone": null},
            "sleep": 0.5, "exit": 3, "fix_edits": {...}, "git_commit": true,
            "git_before": [["checkout", "-q", "-b", "mine"]], "git_after": [["stash", "push", "-q"]],
            "after_edits": {"scratch.py": "x"}}}

A task entry may also be just the ``edits`` mapping (``null`` deletes a file). ``fix_edits`` are applied instead
of ``edits`` when the prompt reports a failing verification (the run that fixes it). ``sleep`` waits before
editing, ``wait_for`` until the file it names exists; ``exit`` ends with that status after editing;
``git_commit`` commits the edits, as some agent CLIs do; ``git_before`` and ``git_after`` are git commands run
before the edits and after them (and their commit), ``after_edits`` edits made just before ``git_after``.
With ``WFQUEUE_TEST_EXECUTOR_LOG`` set, one JSON line per run is appended: ``{task, pid, ppid, cwd, start, end,
fix, ancestors}`` (``ancestors``: [pid, command line] of its parent and grandparent, on Linux), so tests can prove
which process ran a task, and when (overlap or not).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def _edit(root: Path, path: str, change: object) -> None:
    target = root / path
    if isinstance(change, str):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(change, encoding="utf-8")
    elif isinstance(change, dict) and "replace" in change:
        old, new = change["replace"]
        target.write_text(target.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    elif change is None:
        target.unlink(missing_ok=True)
    else:
        raise SystemExit(f"executor_program: cannot apply {change!r} to {path}")


def _ancestors(count: int) -> list[tuple[int, str]]:
    """The pids and command lines of this process's parent, grandparent, ... (as many as ``count``; fewer off
    Linux)."""
    found, pid = [], os.getppid()
    for _ in range(count):
        try:
            found.append((pid, (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()))
            pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def main() -> int:
    prompt = Path(sys.argv[1]).read_text(encoding="utf-8") if len(sys.argv) > 1 else sys.stdin.read()
    found = re.search(r"^Task: (\S+)", prompt, re.MULTILINE)
    if found is None:
        print("executor_program: no task id in the prompt", file=sys.stderr)
        return 2
    task_id = found.group(1)
    fixing = "## Verification failed" in prompt
    started = time.time()
    plan = json.loads(Path(os.environ["WFQUEUE_TEST_EDITS"]).read_text(encoding="utf-8")).get(task_id, {})
    if "edits" not in plan and not {"sleep", "exit", "fix_edits", "git_commit", "wait_for", "git_before",
                                    "git_after"} & set(plan):
        plan = {"edits": plan}
    time.sleep(float(plan.get("sleep", 0)))
    if plan.get("wait_for"):  # held until a test creates that file (two minutes at most)
        deadline = time.monotonic() + 120
        while not Path(plan["wait_for"]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    for args in plan.get("git_before", []):
        subprocess.run(["git", *args], check=True)
    edits = plan.get("fix_edits", plan.get("edits", {})) if fixing else plan.get("edits", {})
    for path, change in edits.items():
        _edit(Path.cwd(), path, change)
    if plan.get("git_commit"):  # an agent CLI that commits its own edits
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-qm",
                        "wip"], check=True)
    for path, change in plan.get("after_edits", {}).items():
        _edit(Path.cwd(), path, change)
    for args in plan.get("git_after", []):
        subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=agent@example.invalid", *args], check=True)
    log = os.environ.get("WFQUEUE_TEST_EXECUTOR_LOG")
    if log:
        entry = {"task": task_id, "pid": os.getpid(), "ppid": os.getppid(), "cwd": str(Path.cwd()),
                 "start": started, "end": time.time(), "fix": fixing, "ancestors": _ancestors(2)}
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")
    print(f"executor_program: {task_id} applied {len(edits)} edit(s)")
    return int(plan.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
