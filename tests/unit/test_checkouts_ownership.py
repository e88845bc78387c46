"""A worker's cache removes only what it made: a cache folder set by mistake to one in use (the current folder,
$HOME) keeps the user's files, and a cache made by an earlier version keeps working."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.unit.test_transport_repo import commit_files
from tests.unit.test_transport_repo import sh as git
from wfqueue.settings import Settings, load_settings
from wfqueue.state import redis_client
from wfqueue.transport.checkouts import CHECKOUTS_DIR, materialise
from wfqueue.transport.repo import pin_repository, publish


def commit_file(repo: Path, name: str, text: str) -> str:
    return commit_files(repo, {name: text}, f"write {name}")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit_file(path, "README.md", "hello\n")
    return path


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis_client(redis_url, 2.0)
    connection.flushdb()
    yield connection
    connection.close()


def files_under(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8") for p in folder.rglob("*") if p.is_file()}


def test_a_cache_set_to_a_folder_in_use_keeps_its_tmp_and_its_checkouts_folder(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    home = tmp_path / "home"  # WFQUEUE_WORKER_CACHE_DIR=$HOME, by mistake
    (home / "tmp" / "important").mkdir(parents=True)
    (home / "tmp" / "important" / "data.txt").write_text("precious\n", encoding="utf-8")
    (home / "tmp" / "notes.txt").write_text("also precious\n", encoding="utf-8")
    (home / CHECKOUTS_DIR / "my-project").mkdir(parents=True)
    (home / CHECKOUTS_DIR / "my-project" / "main.c").write_text("int main;\n", encoding="utf-8")
    before = files_under(home / "tmp"), files_under(home / CHECKOUTS_DIR / "my-project")

    settings = Settings(worker_cache_dir=home, checkout_cache_max=1)
    first = pin_repository(repo).commit
    second = commit_file(repo, "more.txt", "more\n")
    for commit in (first, second):
        publish(client, repo, commit, settings)
        materialise(client, commit, settings)  # builds in its scratch folder, then evicts beyond one checkout

    assert (files_under(home / "tmp"), files_under(home / CHECKOUTS_DIR / "my-project")) == before
    assert sorted(p.name for p in (home / CHECKOUTS_DIR).iterdir()) == sorted(["my-project", second])


def test_a_blank_cache_setting_builds_in_the_default_cache_not_in_the_current_folder(
        repo: Path, client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where_the_worker_runs = tmp_path / "victim"
    (where_the_worker_runs / "tmp").mkdir(parents=True)
    (where_the_worker_runs / "tmp" / "notes.txt").write_text("precious\n", encoding="utf-8")
    monkeypatch.chdir(where_the_worker_runs)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("WFQUEUE_WORKER_CACHE_DIR", "")  # an env file's blank line
    settings = load_settings()
    commit = pin_repository(repo).commit
    publish(client, repo, commit, settings)

    checkout = materialise(client, commit, settings)

    assert checkout == (tmp_path / "xdg" / "wfqueue" / CHECKOUTS_DIR / commit).resolve()
    assert sorted(p.relative_to(where_the_worker_runs).as_posix() for p in where_the_worker_runs.rglob("*")) == [
        "tmp", "tmp/notes.txt"]


def test_a_cache_made_by_an_earlier_version_keeps_its_checkouts_and_is_left_its_tmp(
        repo: Path, client: redis.Redis, tmp_path: Path) -> None:
    settings = Settings(worker_cache_dir=tmp_path / "cache")
    first = pin_repository(repo).commit
    publish(client, repo, first, settings)
    built = materialise(client, first, settings)
    (built / "README.md").write_text("marked\n", encoding="utf-8")  # to see it is not built again
    (tmp_path / "cache" / "wfqueue-tmp").rename(tmp_path / "cache" / "tmp")  # the scratch folder before
    (tmp_path / "cache" / "tmp" / "half-built").mkdir()

    second = commit_file(repo, "more.txt", "more\n")
    publish(client, repo, second, settings)
    assert materialise(client, first, settings) == built
    assert (built / "README.md").read_text(encoding="utf-8") == "marked\n"
    assert (materialise(client, second, settings) / "more.txt").read_text(encoding="utf-8") == "more\n"
    assert [p.name for p in (tmp_path / "cache" / "tmp").iterdir()] == ["half-built"]
