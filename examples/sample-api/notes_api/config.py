"""Application settings loaded from environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Mapping

ENV_PREFIX = "NOTES_"
_TRUE_VALUES = {"1", "true", "yes", "on"}
_FALSE_VALUES = {"0", "false", "no", "off"}


class ConfigError(ValueError):
    """Raised when a setting is missing, malformed or out of range."""


@dataclass(frozen=True)
class Settings:
    """Runtime configuration for the notes API.

    Every field can be overridden with an environment variable named
    ``NOTES_<FIELD_NAME>``, for example ``NOTES_PORT=9000``.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    db_path: str = "notes.db"
    secret_key: str = "change-me-in-production"
    token_ttl_seconds: int = 3600
    page_size: int = 20
    max_page_size: int = 100
    cache_ttl_seconds: float = 30.0
    cache_max_entries: int = 512
    password_iterations: int = 200_000
    max_notes_per_user: int = 1000
    max_body_bytes: int = 64 * 1024
    log_requests: bool = True

    def validate(self) -> None:
        """Raise :class:`ConfigError` if the settings are inconsistent."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port out of range: {self.port}")
        if self.token_ttl_seconds <= 0:
            raise ConfigError("token_ttl_seconds must be positive")
        if not 0 < self.page_size <= self.max_page_size:
            raise ConfigError("page_size must be between 1 and max_page_size")
        if self.max_notes_per_user <= 0:
            raise ConfigError("max_notes_per_user must be positive")
        if not self.secret_key:
            raise ConfigError("secret_key must not be empty")


def _coerce(name: str, raw: str, default: Any) -> Any:
    """Convert the string ``raw`` to the type of ``default``."""
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered in _TRUE_VALUES:
            return True
        if lowered in _FALSE_VALUES:
            return False
        raise ConfigError(f"{name}: expected a boolean, got {raw!r}")
    try:
        return type(default)(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}: cannot parse {raw!r}") from exc


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from ``env`` (defaults to ``os.environ``).

    Unknown ``NOTES_*`` variables are ignored; missing ones keep their
    defaults. The result is validated before being returned.
    """
    source = os.environ if env is None else env
    overrides: dict[str, Any] = {}
    for field in fields(Settings):
        key = ENV_PREFIX + field.name.upper()
        if key in source:
            overrides[field.name] = _coerce(key, source[key], field.default)
    settings = Settings(**overrides)
    settings.validate()
    return settings
