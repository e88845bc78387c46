"""User accounts, password hashing and lookup."""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable

from notes_api.storage.db import Database

DEFAULT_ITERATIONS = 200_000

USERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    salt TEXT NOT NULL,
    is_active INTEGER NOT NULL DEFAULT 1
);
"""


class UserError(ValueError):
    """Raised for invalid or duplicate user data."""


@dataclass(frozen=True)
class User:
    """A registered account. ``salt`` and ``password_hash`` are hex strings."""

    id: int
    username: str
    password_hash: str
    salt: str
    is_active: bool = True

    def to_public_dict(self) -> dict[str, Any]:
        return {"id": self.id, "username": self.username, "is_active": self.is_active}


def hash_password(password: str, salt: bytes, iterations: int = DEFAULT_ITERATIONS) -> str:
    """Derive a hex PBKDF2-HMAC-SHA256 hash of ``password``."""
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations).hex()


def generate_salt() -> bytes:
    return os.urandom(16)


class UserStore:
    """Stores users in memory, or in SQLite when a :class:`Database` is given."""

    def __init__(
        self,
        db: Database | None = None,
        iterations: int = DEFAULT_ITERATIONS,
        salt_factory: Callable[[], bytes] = generate_salt,
    ) -> None:
        self._db = db
        self._iterations = iterations
        self._salt_factory = salt_factory
        self._users: dict[int, User] = {}
        self._lock = threading.Lock()
        if db is not None:
            db.apply_schema(USERS_SCHEMA)

    def create_user(self, username: str, password: str) -> User:
        username = username.strip()
        if not username or not password:
            raise UserError("username and password are required")
        if self.get_by_name(username) is not None:
            raise UserError(f"username already taken: {username}")
        salt = self._salt_factory()
        pw_hash = hash_password(password, salt, self._iterations)
        if self._db is not None:
            user_id, _ = self._db.execute(
                "INSERT INTO users (username, password_hash, salt) VALUES (?, ?, ?)",
                (username, pw_hash, salt.hex()),
            )
            return User(user_id, username, pw_hash, salt.hex())
        with self._lock:
            user = User(len(self._users) + 1, username, pw_hash, salt.hex())
            self._users[user.id] = user
            return user

    def _find(self, column: str, value: Any) -> User | None:
        if self._db is not None:
            row = self._db.query_one(
                f"SELECT id, username, password_hash, salt, is_active FROM users WHERE {column} = ?",
                (value,),
            )
            return None if row is None else User(**{**dict(row), "is_active": bool(row["is_active"])})
        return next((u for u in self._users.values() if getattr(u, column) == value), None)

    def get_by_id(self, user_id: int) -> User | None:
        return self._find("id", user_id)

    def get_by_name(self, username: str) -> User | None:
        return self._find("username", username)

    def authenticate(self, username: str, password: str) -> User | None:
        """Return the active user matching the credentials, or ``None``."""
        user = self.get_by_name(username)
        if user is None or not user.is_active:
            return None
        candidate = hash_password(password, bytes.fromhex(user.salt), self._iterations)
        return user if hmac.compare_digest(candidate, user.password_hash) else None

    def deactivate(self, user_id: int) -> bool:
        """Disable an account; its tokens stop being accepted."""
        if self._db is not None:
            _, changed = self._db.execute("UPDATE users SET is_active = 0 WHERE id = ?", (user_id,))
            return changed > 0
        with self._lock:
            user = self._users.get(user_id)
            if user is not None:
                self._users[user_id] = replace(user, is_active=False)
            return user is not None
