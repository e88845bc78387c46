"""Real git repositories and tasks for the execution tests, and the test executor program's settings."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from wfqueue.execute.model import ExecTask, PlanContext, TaskFiles
from wfqueue.payloads import ExecuteTask
from wfqueue.settings import Settings
from wfqueue.transport.checkouts import cache_dir

PROJECT = Path(__file__).resolve().parent.parent
EXECUTOR_PROGRAM = PROJECT / "tests" / "executor_program.py"
# Absolute paths: the command runs inside the task's worktree.
EXECUTOR_COMMAND = f"{sys.executable} {EXECUTOR_PROGRAM} {{prompt_file}}"
EXEC_ID = "EXEC-demo-2026-01-01"


def cache() -> Path:
    """The wfqueue cache a worker of this test makes execution worktrees in (tests/conftest.py gives each test its
    own), as a worker with no WFQUEUE_WORKER_CACHE_DIR finds it."""
    return cache_dir(Settings.model_construct(worker_cache_dir=None))


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)
    return done.stdout.strip()


def write_project(folder: Path) -> None:
    """A package, a passing test, and .workflow/ ignored."""
    (folder / "calc").mkdir(parents=True)
    (folder / "calc" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    (folder / "tests").mkdir()
    (folder / "tests" / "test_ops.py").write_text(
        "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n", encoding="utf-8")
    (folder / ".gitignore").write_text(".workflow/\n", encoding="utf-8")


def init_repo(repo: Path) -> Path:
    """``repo`` as a git repository with an identity and everything in it committed."""
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.name", "Repo Owner")
    git(repo, "config", "user.email", "owner@example.invalid")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "initial")
    return repo


def make_repo(root: Path) -> Path:
    """``root/repo``: the project, committed."""
    write_project(root / "repo")
    return init_repo(root / "repo")


def snapshot(repo: Path) -> dict[str, str]:
    """Every file of the working tree outside .git and .workflow (sha256), plus HEAD, its branch and the index."""
    files = {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(repo.rglob("*")) if p.is_file()
             and p.relative_to(repo).parts[0] not in (".git", ".workflow")}
    files["HEAD"] = git(repo, "rev-parse", "HEAD")
    files["branch"] = git(repo, "symbolic-ref", "HEAD")
    index = Path(git(repo, "rev-parse", "--absolute-git-dir")) / "index"
    files["index"] = hashlib.sha256(index.read_bytes()).hexdigest()
    files["status"] = git(repo, "status", "--porcelain", "--untracked-files=all")
    return files


def task(task_id: str = "T1", *, verification: str = "python -m pytest -q tests", **fields: Any) -> ExecTask:
    values: dict[str, Any] = {
        "id": task_id, "title": "Add subtraction", "description": "calc gets a sub function.", "type": "feature",
        "files": TaskFiles(modify=["calc/ops.py"], create=["tests/test_sub.py"]),
        "implementation": ["Write sub(a, b)", "Test it"], "criteria": ["sub(5, 3) == 2"],
        "verification": verification, "definition_of_done": "sub exists and is tested", "location": "tasks.jsonl:1",
    }
    values.update(fields)
    return ExecTask(**values)


def payload(repo: Path, exec_dir: Path, exec_task: ExecTask, *, attempt: int = 1) -> ExecuteTask:
    return ExecuteTask(exec_id=EXEC_ID, exec_dir=str(exec_dir), repo=str(repo), task=exec_task,
                       context=PlanContext(requirement="a calculator that subtracts"), base=git(repo, "rev-parse",
                                                                                                 "HEAD"),
                       branch=f"wfqueue/{EXEC_ID}/{exec_task.id}", attempt=attempt, executor="command")


SUB = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
SUB_TEST = "from calc.ops import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
BROKEN_SUB = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n"


def write_edits(path: Path, edits: dict[str, Any]) -> Path:
    path.write_text(json.dumps(edits), encoding="utf-8")
    return path


def log_entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
