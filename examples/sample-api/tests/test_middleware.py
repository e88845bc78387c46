import logging

import pytest

from notes_api.api.middleware import (
    AuthenticationMiddleware,
    ErrorHandlingMiddleware,
    RequestLoggingMiddleware,
    build_chain,
)
from notes_api.api.router import HTTPError, Request, Response
from notes_api.auth.tokens import issue_token
from notes_api.auth.users import UserStore

SECRET = "middleware-secret"


def ok_handler(request: Request) -> Response:
    return Response(200, {"user_id": request.user_id})


@pytest.fixture
def users():
    store = UserStore(iterations=1_000, salt_factory=lambda: b"fixed-salt-bytes")
    store.create_user("alice", "wonderland")
    return store


def auth_request(token: str, path: str = "/notes") -> Request:
    return Request("GET", path, headers={"Authorization": f"Bearer {token}"})


def test_build_chain_runs_middlewares_in_order():
    calls = []

    def recorder(name):
        def middleware(request, next_handler):
            calls.append(f"{name}:before")
            response = next_handler(request)
            calls.append(f"{name}:after")
            return response
        return middleware

    handler = build_chain(ok_handler, [recorder("outer"), recorder("inner")])
    assert handler(Request("GET", "/")).status == 200
    assert calls == ["outer:before", "inner:before", "inner:after", "outer:after"]


def test_error_handling_converts_http_error_to_json():
    def failing(request):
        raise HTTPError(404, "gone", {"X-Reason": "test"})

    response = build_chain(failing, [ErrorHandlingMiddleware()])(Request("GET", "/"))
    assert response.status == 404
    assert response.body == {"error": "gone"}
    assert response.headers == {"X-Reason": "test"}


def test_error_handling_hides_unexpected_exceptions():
    def crashing(request):
        raise RuntimeError("database on fire")

    response = build_chain(crashing, [ErrorHandlingMiddleware()])(Request("GET", "/"))
    assert response.status == 500
    assert "fire" not in response.body["error"]


def test_request_logging_records_status_and_user(caplog):
    ticks = iter([10.0, 10.25])
    log = logging.getLogger("test.requests")
    middleware = RequestLoggingMiddleware(log, clock=lambda: next(ticks))
    request = Request("GET", "/notes", user_id=3)
    with caplog.at_level(logging.INFO, logger="test.requests"):
        middleware(request, ok_handler)
    assert caplog.messages == ["GET /notes -> 200 user=3 250.0ms"]


def test_authentication_accepts_valid_token_and_sets_user(users, clock):
    auth = AuthenticationMiddleware(SECRET, users, clock=clock)
    token = issue_token(1, SECRET, ttl_seconds=60, now=clock())
    response = auth(auth_request(token), ok_handler)
    assert response.body == {"user_id": 1}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer"}])
def test_authentication_rejects_missing_token(users, headers):
    auth = AuthenticationMiddleware(SECRET, users)
    with pytest.raises(HTTPError) as info:
        auth(Request("GET", "/notes", headers=headers), ok_handler)
    assert info.value.status == 401


def test_authentication_rejects_expired_token(users, clock):
    auth = AuthenticationMiddleware(SECRET, users, clock=clock)
    token = issue_token(1, SECRET, ttl_seconds=60, now=clock())
    clock.advance(61)
    with pytest.raises(HTTPError) as info:
        auth(auth_request(token), ok_handler)
    assert "expired" in info.value.message


def test_authentication_rejects_unknown_and_inactive_users(users, clock):
    auth = AuthenticationMiddleware(SECRET, users, clock=clock)
    with pytest.raises(HTTPError):
        auth(auth_request(issue_token(99, SECRET, 60, now=clock())), ok_handler)
    users.deactivate(1)
    with pytest.raises(HTTPError):
        auth(auth_request(issue_token(1, SECRET, 60, now=clock())), ok_handler)


def test_public_paths_skip_authentication(users):
    auth = AuthenticationMiddleware(SECRET, users, public_paths=["/health"])
    assert auth(Request("GET", "/health"), ok_handler).body == {"user_id": None}


def test_full_chain_returns_401_json(users):
    handler = build_chain(ok_handler, [ErrorHandlingMiddleware(), AuthenticationMiddleware(SECRET, users)])
    response = handler(auth_request("garbage"))
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
