import json

import pytest

from notes_api.api.handlers import (
    NoteServices,
    create_note,
    delete_note,
    get_note,
    health,
    list_notes,
    register_routes,
)
from notes_api.api.router import HTTPError, Request, Router
from notes_api.storage.cache import TTLCache
from notes_api.storage.db import Database, NoteRepository


@pytest.fixture
def services(settings, clock):
    repository = NoteRepository(Database(":memory:"), clock=clock)
    return NoteServices(repository, TTLCache(30, clock=clock), settings)


def post(user_id, payload):
    return Request("POST", "/notes", body=json.dumps(payload).encode(), user_id=user_id)


def note_request(method, note_id, user_id=1):
    return Request(method, f"/notes/{note_id}", path_params={"note_id": str(note_id)}, user_id=user_id)


def test_health_is_ok(services):
    assert health(Request("GET", "/health"), services).body == {"status": "ok"}


def test_create_note_returns_201_and_location(services):
    response = create_note(post(1, {"title": " Groceries ", "body": "milk"}), services)
    assert response.status == 201
    assert response.body["title"] == "Groceries"
    assert response.headers["Location"] == f"/notes/{response.body['id']}"


@pytest.mark.parametrize("payload", [{}, {"title": ""}, {"title": 3}, {"title": "x", "body": 1}, []])
def test_create_note_validates_payload(services, payload):
    with pytest.raises(HTTPError) as info:
        create_note(post(1, payload), services)
    assert info.value.status == 400


def test_create_note_enforces_per_user_limit(services):
    for i in range(services.settings.max_notes_per_user):
        create_note(post(1, {"title": f"n{i}"}), services)
    with pytest.raises(HTTPError) as info:
        create_note(post(1, {"title": "one too many"}), services)
    assert info.value.status == 403
    assert create_note(post(2, {"title": "other user"}), services).status == 201


def test_handlers_require_authenticated_user(services):
    with pytest.raises(HTTPError) as info:
        list_notes(Request("GET", "/notes"), services)
    assert info.value.status == 401


def test_list_notes_paginates_with_default_page_size(services):
    for i in range(3):
        create_note(post(1, {"title": f"n{i}"}), services)
    first = list_notes(Request("GET", "/notes", user_id=1), services).body
    assert [n["title"] for n in first["items"]] == ["n0", "n1"]
    assert first["has_next"] is True and first["total"] == 3
    second = list_notes(Request("GET", "/notes", query={"page": "2"}, user_id=1), services).body
    assert [n["title"] for n in second["items"]] == ["n2"]
    assert second["has_next"] is False


def test_list_notes_caps_page_size_and_rejects_bad_values(services):
    body = list_notes(Request("GET", "/notes", query={"page_size": "50"}, user_id=1), services).body
    assert body["page_size"] == services.settings.max_page_size
    with pytest.raises(HTTPError):
        list_notes(Request("GET", "/notes", query={"page": "zero"}, user_id=1), services)


def test_get_note_uses_cache(services):
    note_id = create_note(post(1, {"title": "cached"}), services).body["id"]
    services.cache.clear()
    assert get_note(note_request("GET", note_id), services).body["title"] == "cached"
    assert services.cache.misses == 1
    get_note(note_request("GET", note_id), services)
    assert services.cache.hits == 1


def test_get_note_hides_other_users_notes(services):
    note_id = create_note(post(1, {"title": "private"}), services).body["id"]
    with pytest.raises(HTTPError) as info:
        get_note(note_request("GET", note_id, user_id=2), services)
    assert info.value.status == 404


def test_delete_note_invalidates_cache(services):
    note_id = create_note(post(1, {"title": "temp"}), services).body["id"]
    assert delete_note(note_request("DELETE", note_id), services).status == 204
    assert services.cache.get(note_id) is None
    with pytest.raises(HTTPError) as info:
        get_note(note_request("GET", note_id), services)
    assert info.value.status == 404


def test_register_routes_wires_all_endpoints(services):
    router = Router()
    register_routes(router, services)
    assert {(r.method, r.pattern) for r in router.routes} == {
        ("GET", "/health"),
        ("GET", "/notes"),
        ("POST", "/notes"),
        ("GET", "/notes/{note_id}"),
        ("DELETE", "/notes/{note_id}"),
    }
    response = router.dispatch(post(7, {"title": "via router"}))
    assert response.status == 201
