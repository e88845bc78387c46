"""An execution's node_modules: links to each package the user installed, made once, whatever runs beside.

Two tasks of a threads pool (one process) made their links at once under one temporary name: one removed the
other's half-made folder, both raised, and a half-filled node_modules could stay for the whole execution. A folder
of links left by a process killed while it made them was taken for a task's folder at the execution's end, which
failed on its links ("Cannot call rmtree on a symbolic link") and never finished."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from wfqueue.execute.dependency_links import link_dependencies, remove_execution_folder
from wfqueue.execute.merge import leftover_worktrees
from wfqueue.execute.worktree import execution_folder
from wfqueue.settings import Settings
from wfqueue.transport.checkouts import cache_dir


def _repo(tmp_path: Path, packages: int) -> Path:
    repo = tmp_path / "repo"
    (repo / "node_modules" / ".bin").mkdir(parents=True)
    for n in range(packages):
        (repo / "node_modules" / f"pkg{n}").mkdir()
        (repo / "node_modules" / f"pkg{n}" / "index.js").write_text("module.exports = 1;\n")
    (repo / ".gitignore").write_text("node_modules/\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_tasks_linking_at_once_make_one_whole_node_modules(tmp_path: Path) -> None:
    repo = _repo(tmp_path, 1500)
    for trial in range(5):
        folder = tmp_path / f"exec-{trial}"
        errors: list[BaseException] = []

        def link(folder: Path = folder, errors: list[BaseException] = errors) -> None:
            try:
                link_dependencies(repo, folder)
            except BaseException as exc:  # noqa: BLE001 - collected, asserted below
                errors.append(exc)

        threads = [threading.Thread(target=link) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert sorted(p.name for p in folder.iterdir()) == ["node_modules"]  # no folder of links left beside it
        assert len(list((folder / "node_modules").iterdir())) == 1501


def test_the_end_of_an_execution_removes_links_a_killed_process_left(tmp_path: Path) -> None:
    repo = _repo(tmp_path, 3)
    settings = Settings.model_construct(worker_cache_dir=tmp_path / "cache")
    folder = execution_folder(repo, cache_dir(settings), "EXEC-x")
    link_dependencies(repo, folder)
    left = folder / ".node_modules.abc123.links"  # what a process killed half-way through leaves
    left.mkdir()
    (left / "pkg0").symlink_to(repo / "node_modules" / "pkg0", target_is_directory=True)
    assert leftover_worktrees(repo, cache_dir(settings), "EXEC-x") == []
    assert not folder.exists()
    assert sorted(p.name for p in (repo / "node_modules").iterdir()) == [".bin", "pkg0", "pkg1", "pkg2"]
    remove_execution_folder(folder)  # and again, on nothing: nothing to do
