"""Application assembly and the HTTP server entry point."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from notes_api.api.handlers import NoteServices, register_routes
from notes_api.api.middleware import (
    AuthenticationMiddleware,
    ErrorHandlingMiddleware,
    Middleware,
    RequestLoggingMiddleware,
    build_chain,
)
from notes_api.api.router import Handler, Request, Response, Router
from notes_api.auth.tokens import issue_token
from notes_api.auth.users import UserStore
from notes_api.config import Settings, load_settings
from notes_api.storage.cache import TTLCache
from notes_api.storage.db import Database, NoteRepository


@dataclass
class Application:
    """Everything needed to serve requests, independent of the socket layer."""

    settings: Settings
    database: Database
    users: UserStore
    router: Router
    handler: Handler

    def handle(self, request: Request) -> Response:
        return self.handler(request)

    def close(self) -> None:
        self.database.close()


def build_middleware(settings: Settings, users: UserStore) -> list[Middleware]:
    """Return the middleware stack, outermost first.

    Policies that depend on the caller's identity belong after
    ``AuthenticationMiddleware``, where ``request.user_id`` is available.
    """
    stack: list[Middleware] = []
    if settings.log_requests:
        stack.append(RequestLoggingMiddleware())
    stack.append(ErrorHandlingMiddleware())
    stack.append(AuthenticationMiddleware(settings.secret_key, users))
    return stack


def build_app(settings: Settings | None = None) -> Application:
    settings = settings or load_settings()
    database = Database(settings.db_path)
    users = UserStore(database, iterations=settings.password_iterations)
    services = NoteServices(
        repository=NoteRepository(database),
        cache=TTLCache(settings.cache_ttl_seconds, settings.cache_max_entries),
        settings=settings,
    )
    router = Router()
    register_routes(router, services)
    handler = build_chain(router.dispatch, build_middleware(settings, users))
    return Application(settings, database, users, router, handler)


def make_request_handler(app: Application) -> type[BaseHTTPRequestHandler]:
    """Create a ``BaseHTTPRequestHandler`` subclass bound to ``app``."""

    class NotesRequestHandler(BaseHTTPRequestHandler):
        server_version = "notes-api"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > app.settings.max_body_bytes:
                response = Response.error(413, "request body too large")
            else:
                body = self.rfile.read(length) if length else b""
                request = Request.from_raw(self.command, self.path, dict(self.headers.items()), body)
                response = app.handle(request)
            payload = response.to_bytes()
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            if payload:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:
            """Silence the default stderr access log; middleware logs requests."""

    return NotesRequestHandler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="notes-api", description="Run the notes API.")
    sub = parser.add_subparsers(dest="command")
    create = sub.add_parser("create-user", help="create a user and print an access token")
    create.add_argument("username")
    create.add_argument("password")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    app = build_app()
    try:
        if args.command == "create-user":
            user = app.users.create_user(args.username, args.password)
            print(issue_token(user.id, app.settings.secret_key, app.settings.token_ttl_seconds))
            return 0
        server = ThreadingHTTPServer((app.settings.host, app.settings.port), make_request_handler(app))
        logging.getLogger(__name__).info("listening on %s:%d", app.settings.host, app.settings.port)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
    finally:
        app.close()


if __name__ == "__main__":
    raise SystemExit(main())
