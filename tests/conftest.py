"""Fixtures shared by every test."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_anthropic import FakeAnthropic
from wfqueue.embedded import EmbeddedRedis

PROJECT = Path(__file__).resolve().parent.parent
SAMPLE_REPO = PROJECT / "examples" / "sample-api"


def write(root: Path, files: dict[str, str]) -> Path:
    """A repository made of ``files`` (relative path -> text) under ``root``; returns ``root``."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def git_in(repo: Path, *args: str) -> None:
    """Git in ``repo`` as a test's author (no identity configured on the machine is needed)."""
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


def commit_in(repo: Path, message: str, files: dict[str, str]) -> None:
    """Write ``files`` into ``repo`` and commit everything as one change."""
    write(repo, files)
    git_in(repo, "add", "-A")
    git_in(repo, "commit", "-qm", message)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees a real API key or the developer's broker and settings, nor writes into their wfqueue cache
    (worker checkouts, execution worktrees): each test has a cache of its own."""
    for name in list(os.environ):
        if name.startswith("WFQUEUE_") or name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    # The test repositories' own checks (a task's verification, the merge gate: `python -m pytest -q tests`) run
    # with this environment's Python, whose pytest would load xdist and pytest-timeout, unused there: 0.2 s of
    # CPU for each of some 160 runs.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """The local Messages API server, answering as the test scripts it (tests/fake_anthropic.py)."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    """A private copy of the sample repository (plans write .workflow/ into it)."""
    target = tmp_path / "sample-api"
    shutil.copytree(SAMPLE_REPO, target, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".workflow"))
    return target


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real embedded Redis (its unix socket URL), one per test module."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis") / "redis")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (15 s or more) run first: with ``pytest -n`` the workers start on them while
    the short ones fill in around them, instead of one long test running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
