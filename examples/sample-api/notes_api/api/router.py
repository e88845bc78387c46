"""Minimal request routing: Request/Response types and a path-pattern Router."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit


class HTTPError(Exception):
    """An error that maps directly to an HTTP status and JSON error body."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass
class Request:
    """An incoming request. ``user_id`` is set once the caller is authenticated."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    path_params: dict[str, str] = field(default_factory=dict)
    user_id: int | None = None

    @classmethod
    def from_raw(cls, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> Request:
        """Build a request from a raw request target such as ``/notes?page=2``."""
        parts = urlsplit(target)
        return cls(method.upper(), parts.path or "/", dict(headers), dict(parse_qsl(parts.query)), body)

    def header(self, name: str, default: str | None = None) -> str | None:
        """Case-insensitive header lookup."""
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), default)

    def json(self) -> Any:
        """Decode the body as JSON, raising a 400 :class:`HTTPError` if invalid."""
        try:
            return json.loads(self.body or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise HTTPError(400, "request body is not valid JSON") from None


@dataclass
class Response:
    """An outgoing response whose ``body`` is serialised as JSON."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        return cls(status, {"error": message}, dict(headers or {}))

    def to_bytes(self) -> bytes:
        if self.body is None:
            return b""
        return json.dumps(self.body, separators=(",", ":")).encode("utf-8")


Handler = Callable[[Request], Response]
_PARAM = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")


@dataclass(frozen=True)
class Route:
    method: str
    pattern: str
    regex: re.Pattern[str]
    handler: Handler


class Router:
    """Maps ``(method, path pattern)`` pairs to handlers.

    Patterns may contain ``{name}`` placeholders matching one path segment;
    matched values are placed in :attr:`Request.path_params`.
    """

    def __init__(self) -> None:
        self._routes: list[Route] = []

    @property
    def routes(self) -> list[Route]:
        return list(self._routes)

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        regex = re.compile("^" + _PARAM.sub(r"(?P<\1>[^/]+)", pattern.rstrip("/") or "/") + "$")
        self._routes.append(Route(method.upper(), pattern, regex, handler))

    def dispatch(self, request: Request) -> Response:
        """Call the matching handler; 404 for unknown paths, 405 for wrong methods."""
        path = request.path.rstrip("/") or "/"
        allowed: list[str] = []
        for route in self._routes:
            match = route.regex.match(path)
            if match is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            request.path_params = match.groupdict()
            return route.handler(request)
        if allowed:
            raise HTTPError(405, "method not allowed", {"Allow": ", ".join(sorted(set(allowed)))})
        raise HTTPError(404, f"no route for {request.path}")
