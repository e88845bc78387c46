"""SQLite-backed persistence for notes."""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

NOTES_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id INTEGER NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_notes_owner ON notes (owner_id, id);
"""


class Database:
    """A thread-safe wrapper around a single ``sqlite3`` connection."""

    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.Lock()

    def apply_schema(self, script: str) -> None:
        """Run a (idempotent) DDL script."""
        with self._lock:
            self._conn.executescript(script)
            self._conn.commit()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, int]:
        """Run a write statement and return ``(lastrowid, rowcount)``."""
        with self._lock:
            cursor = self._conn.execute(sql, params)
            self._conn.commit()
            return cursor.lastrowid or 0, cursor.rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read statement and return all rows."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        """Run a read statement and return the first row, if any."""
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass(frozen=True)
class Note:
    """A single stored note."""

    id: int
    owner_id: int
    title: str
    body: str
    created_at: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Page:
    """One page of a paginated listing."""

    items: list[Note]
    page: int
    page_size: int
    total: int

    @property
    def has_next(self) -> bool:
        return self.page * self.page_size < self.total


class NoteRepository:
    """Create, read, list and delete notes stored in SQLite."""

    _COLUMNS = "id, owner_id, title, body, created_at"

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock
        db.apply_schema(NOTES_SCHEMA)

    def create(self, owner_id: int, title: str, body: str = "") -> Note:
        created_at = self._clock()
        note_id, _ = self._db.execute(
            "INSERT INTO notes (owner_id, title, body, created_at) VALUES (?, ?, ?, ?)",
            (owner_id, title, body, created_at),
        )
        return Note(note_id, owner_id, title, body, created_at)

    def get(self, note_id: int) -> Note | None:
        row = self._db.query_one(f"SELECT {self._COLUMNS} FROM notes WHERE id = ?", (note_id,))
        return Note(**dict(row)) if row is not None else None

    def count_for_owner(self, owner_id: int) -> int:
        row = self._db.query_one("SELECT COUNT(*) AS n FROM notes WHERE owner_id = ?", (owner_id,))
        return int(row["n"]) if row is not None else 0

    def list_for_owner(self, owner_id: int, page: int = 1, page_size: int = 20) -> Page:
        """Return the owner's notes, oldest first, split into pages (1-based)."""
        if page < 1 or page_size < 1:
            raise ValueError("page and page_size must be positive")
        rows = self._db.query(
            f"SELECT {self._COLUMNS} FROM notes WHERE owner_id = ? ORDER BY id LIMIT ? OFFSET ?",
            (owner_id, page_size, (page - 1) * page_size),
        )
        items = [Note(**dict(row)) for row in rows]
        return Page(items, page, page_size, self.count_for_owner(owner_id))

    def delete(self, note_id: int, owner_id: int) -> bool:
        """Delete a note if it belongs to ``owner_id``; return whether it existed."""
        _, removed = self._db.execute(
            "DELETE FROM notes WHERE id = ? AND owner_id = ?", (note_id, owner_id)
        )
        return removed > 0
