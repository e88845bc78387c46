"""A small in-process cache with per-entry expiry."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """Least-recently-used cache whose entries expire after ``ttl_seconds``.

    ``clock`` must be monotonic; tests inject a fake one to control expiry.
    """

    def __init__(
        self,
        ttl_seconds: float,
        max_entries: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0 or max_entries <= 0:
            raise ValueError("ttl_seconds and max_entries must be positive")
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: K, default: V | None = None) -> V | None:
        """Return the cached value, or ``default`` if missing or expired."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] <= self._clock():
                if entry is not None:
                    del self._entries[key]
                self.misses += 1
                return default
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def set(self, key: K, value: V) -> None:
        """Store ``value``, evicting the least recently used entry if full."""
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl_seconds, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def invalidate(self, key: K) -> bool:
        """Drop ``key``; return whether it was present."""
        with self._lock:
            return self._entries.pop(key, None) is not None

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def purge_expired(self) -> int:
        """Remove every expired entry and return how many were removed."""
        with self._lock:
            now = self._clock()
            expired = [key for key, (expires, _) in self._entries.items() if expires <= now]
            for key in expired:
                del self._entries[key]
            return len(expired)

    def __len__(self) -> int:
        self.purge_expired()
        return len(self._entries)
