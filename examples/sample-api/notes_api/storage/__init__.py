"""Persistence: SQLite repositories and in-process caching."""
