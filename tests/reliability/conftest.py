"""The reliability suite reuses the integration helpers (tests/integration/support.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
INTEGRATION = HERE.parent / "integration"
if str(INTEGRATION) not in sys.path:
    sys.path.insert(0, str(INTEGRATION))

# Longest first: pytest-xdist hands tests out in collection order, so the ~80 s fault run starts early.
FIRST = ["test_worker_kills.py", "test_redis_restart.py", "test_read_only_folder.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Reorder this folder's tests among the places they already hold; other tests keep theirs."""
    slots = [n for n, item in enumerate(items) if item.path.parent == HERE]
    ours = sorted((items[n] for n in slots),
                  key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else len(FIRST))
    for n, item in zip(slots, ours):
        items[n] = item
