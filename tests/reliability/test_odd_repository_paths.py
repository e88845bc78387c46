"""A repository whose path a URL, a socket or Celery's log naming dislikes is planned and executed like any other.

The embedded Redis listens on a unix socket under the repository's `.workflow/.queue/redis/`, named in a
``redis+socket://`` URL, and the worker logs to `.workflow/.queue/worker.log`, a name Celery expands (%n, %h).
A path with URL syntax (# ? % ;) sent Celery, kombu and redis-py to some other socket; one over the socket
limit in bytes though not in characters (ö takes two) was cut short by redis-server, which left a stray socket
in the repository's parent folder; a % in the path stopped the worker before it logged anything.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import run_cli, wfqueue_env

from tests.execute_support import EXECUTOR_COMMAND, SUB, git, init_repo, write_edits, write_project
from wfqueue.embedded import SOCKET_PATH_LIMIT, socket_path_fits

pytestmark = pytest.mark.integration

SOCKET_TAIL = Path(".workflow") / ".queue" / "redis" / "redis.sock"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A folder with a short path (pytest's own are too long to leave room under the socket limit)."""
    folder = Path(tempfile.mkdtemp(prefix="odd-path-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def odd_folder(parent: Path, kind: str) -> Path:
    if kind == "url-syntax":
        return parent / "100% done #1; why?"
    # At the limit in characters, far over it in bytes: the socket path a character count let through.
    return parent / ("ö" * (SOCKET_PATH_LIMIT - len(str(parent / SOCKET_TAIL)) - 1))


@pytest.mark.parametrize("kind", ["url-syntax", "multibyte"])
def test_a_repository_at_an_odd_path_is_planned_and_executed(short_tmp: Path, tmp_path: Path, kind: str) -> None:
    repo = odd_folder(short_tmp, kind)
    socket = repo / SOCKET_TAIL
    if kind == "multibyte":
        # Beyond the ~107 bytes redis-server can bind, not merely beyond our margin.
        assert len(str(socket)) <= SOCKET_PATH_LIMIT and len(str(socket).encode()) > 120, "not the case tested"
    assert not socket_path_fits(socket)
    write_project(repo)
    init_repo(repo)
    env = wfqueue_env(WFQUEUE_EXECUTOR_COMMAND=EXECUTOR_COMMAND,
                      WFQUEUE_TEST_EDITS=str(write_edits(tmp_path / "edits.json", {"TASK-001": {"calc/ops.py": SUB}})))

    plan = run_cli("lite-plan", "Add a sub function to calc/ops.py", "--repo", str(repo), "-y", "--json", env=env)
    assert plan.code == 0, plan.stderr
    assert plan.json()["status"] == "completed" and plan.json()["tasks"] > 0

    tasks_file = repo / ".workflow" / ".lite-plan" / "sub-2026-01-01" / "tasks.jsonl"
    task = {"id": "TASK-001", "title": "Add sub", "description": "Add sub.", "type": "feature", "depends_on": [],
            "files": [{"path": "calc/ops.py", "action": "modify"}],
            "convergence": {"criteria": ["sub works"], "definition_of_done": "sub is there",
                            "verification": f"{sys.executable} -c 'import calc.ops as o; assert o.sub(5, 3) == 2'"}}
    tasks_file.parent.mkdir(parents=True)
    tasks_file.write_text(json.dumps(task) + "\n", encoding="utf-8")
    run = run_cli("execute", str(tasks_file), "-y", "--no-gate", "--json", env=env)  # a check the gate cannot run
    assert run.code == 0, run.stderr
    assert run.json()["status"] == "completed", run.stderr
    assert "def sub" in git(repo, "show", f"{run.json()['branch']}:calc/ops.py")

    # The worker logged where the docs say, and nothing landed beside the repository.
    assert " ready." in (repo / ".workflow" / ".queue" / "worker.log").read_text(encoding="utf-8")
    assert [p.name for p in repo.parent.iterdir()] == [repo.name]


@pytest.mark.parametrize(("path", "fits"), [
    ("/home/ann/project/.workflow/.queue/redis/redis.sock", True),
    ("/home/ann/my project [v2] @work+1/redis.sock", True),  # characters a URL path carries as they are
    ("/home/ann/ü✓/redis.sock", True),
    ("/home/ann/" + "a" * (SOCKET_PATH_LIMIT - 10), True),
    ("/home/ann/" + "a" * (SOCKET_PATH_LIMIT - 9), False),
    ("/home/ann/" + "ö" * 50, False),  # 60 characters, 110 bytes
    ("/home/ann/a#b/redis.sock", False), ("/home/ann/a?b/redis.sock", False),
    ("/home/ann/100%/redis.sock", False), ("/home/ann/a;b/redis.sock", False),
    ("/home/ann/a\tb/redis.sock", False), ("/home/ann/a\x7fb/redis.sock", False),
    ("/home/ann/\udcff/redis.sock", False),  # a name that is not UTF-8, as Python decodes it
])
def test_which_socket_paths_redis_and_a_url_can_carry(path: str, fits: bool) -> None:
    assert socket_path_fits(Path(path)) is fits
