"""One object per key for the life of this process, shared by its threads (a threads pool's tasks).

Tasks build their providers, limiters and file updates afresh, but some things must be made once per
process and key: a client whose connection pool every task reuses, or a lock that every thread of the
process must take for the same thing. ``PerProcess.get(key, make)`` calls ``make`` the first time a key is
asked for, under a lock, so two threads asking at once get the same object. With ``keep``, only the last
``keep`` keys made are kept (for values of one session or commit, which a long-lived worker would otherwise
pile up).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class PerProcess(Generic[K, V]):
    def __init__(self, keep: int | None = None) -> None:
        if keep is not None and keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self._made: dict[K, V] = {}
        self._lock = threading.Lock()
        self._keep = keep

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self._lock:
            if key not in self._made:
                self._made[key] = make()
                if self._keep is not None and len(self._made) > self._keep:
                    del self._made[next(iter(self._made))]  # the oldest made
            return self._made[key]
