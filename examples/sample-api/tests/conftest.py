"""Shared fixtures. Puts the project root on ``sys.path`` so tests import ``notes_api``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from notes_api.config import Settings  # noqa: E402


class FakeClock:
    """A manually advanced clock for deterministic expiry tests."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings() -> Settings:
    return Settings(
        db_path=":memory:",
        secret_key="test-secret",
        token_ttl_seconds=60,
        page_size=2,
        max_page_size=5,
        password_iterations=1_000,
        max_notes_per_user=5,
        log_requests=False,
    )
