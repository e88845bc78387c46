"""Middleware wrapping the router: logging, error handling and authentication.

A middleware is a callable ``(request, next_handler) -> Response``. The chain
built by :func:`build_chain` runs middlewares in list order, so the first one
sees the request first and the response last.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, Sequence

from notes_api.api.router import Handler, HTTPError, Request, Response
from notes_api.auth.tokens import TokenError, verify_token
from notes_api.auth.users import UserStore

Middleware = Callable[[Request, Handler], Response]

logger = logging.getLogger("notes_api.requests")


def build_chain(handler: Handler, middlewares: Sequence[Middleware]) -> Handler:
    """Wrap ``handler`` so that ``middlewares[0]`` is the outermost layer."""
    wrapped = handler
    for middleware in reversed(middlewares):
        wrapped = _bind(middleware, wrapped)
    return wrapped


def _bind(middleware: Middleware, next_handler: Handler) -> Handler:
    return lambda request: middleware(request, next_handler)


class RequestLoggingMiddleware:
    """Logs method, path, status, user and duration of every request."""

    def __init__(self, log: logging.Logger = logger, clock: Callable[[], float] = time.perf_counter) -> None:
        self._log = log
        self._clock = clock

    def __call__(self, request: Request, next_handler: Handler) -> Response:
        started = self._clock()
        response = next_handler(request)
        elapsed_ms = (self._clock() - started) * 1000
        self._log.info(
            "%s %s -> %d user=%s %.1fms",
            request.method, request.path, response.status, request.user_id, elapsed_ms,
        )
        return response


class ErrorHandlingMiddleware:
    """Turns :class:`HTTPError` and unexpected exceptions into JSON responses."""

    def __init__(self, log: logging.Logger = logger) -> None:
        self._log = log

    def __call__(self, request: Request, next_handler: Handler) -> Response:
        try:
            return next_handler(request)
        except HTTPError as exc:
            return Response.error(exc.status, exc.message, exc.headers)
        except Exception:
            self._log.exception("unhandled error for %s %s", request.method, request.path)
            return Response.error(500, "internal server error")


class AuthenticationMiddleware:
    """Requires a valid ``Authorization: Bearer <token>`` header.

    On success ``request.user_id`` is set so later middleware and handlers
    can act per user. Paths in ``public_paths`` skip the check.
    """

    def __init__(
        self,
        secret: str,
        users: UserStore,
        public_paths: Iterable[str] = ("/health",),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._secret = secret
        self._users = users
        self._public_paths = frozenset(public_paths)
        self._clock = clock

    def __call__(self, request: Request, next_handler: Handler) -> Response:
        if request.path in self._public_paths:
            return next_handler(request)
        scheme, _, token = (request.header("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise HTTPError(401, "missing bearer token", {"WWW-Authenticate": "Bearer"})
        try:
            claims = verify_token(token.strip(), self._secret, now=self._clock())
        except TokenError as exc:
            raise HTTPError(401, f"invalid token: {exc}", {"WWW-Authenticate": "Bearer"}) from None
        user = self._users.get_by_id(claims.user_id)
        if user is None or not user.is_active:
            raise HTTPError(401, "unknown or inactive user")
        request.user_id = user.id
        return next_handler(request)
