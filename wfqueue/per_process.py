"""One object per key for the life of this process, shared by its threads (a threads pool's tasks).

Tasks build their providers, limiters and file updates afresh, but some things must be made once per
process and key: a client whose connection pool every task reuses, or a lock that every thread of the
process must take for the same thing. ``PerProcess.get(key, make)`` calls ``make`` the first time a key is
asked for, under a lock, so two threads asking at once get the same object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class PerProcess(Generic[K, V]):
    def __init__(self) -> None:
        self._made: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self._lock:
            if key not in self._made:
                self._made[key] = make()
            return self._made[key]
