"""Request handlers for the notes endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from notes_api.api.router import HTTPError, Request, Response, Router
from notes_api.config import Settings
from notes_api.storage.cache import TTLCache
from notes_api.storage.db import Note, NoteRepository

MAX_TITLE_LENGTH = 200


@dataclass
class NoteServices:
    """Dependencies shared by the note handlers."""

    repository: NoteRepository
    cache: TTLCache[int, Note]
    settings: Settings


def _require_user(request: Request) -> int:
    if request.user_id is None:
        raise HTTPError(401, "authentication required")
    return request.user_id


def _parse_int(raw: str | None, name: str, default: int, minimum: int = 1) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPError(400, f"{name} must be an integer") from None
    if value < minimum:
        raise HTTPError(400, f"{name} must be >= {minimum}")
    return value


def health(request: Request, services: NoteServices) -> Response:
    """Liveness probe; does not require authentication."""
    return Response(200, {"status": "ok"})


def list_notes(request: Request, services: NoteServices) -> Response:
    user_id = _require_user(request)
    settings = services.settings
    page = _parse_int(request.query.get("page"), "page", 1)
    page_size = _parse_int(request.query.get("page_size"), "page_size", settings.page_size)
    page_size = min(page_size, settings.max_page_size)
    result = services.repository.list_for_owner(user_id, page, page_size)
    return Response(200, {
        "items": [note.to_dict() for note in result.items],
        "page": result.page,
        "page_size": result.page_size,
        "total": result.total,
        "has_next": result.has_next,
    })


def create_note(request: Request, services: NoteServices) -> Response:
    user_id = _require_user(request)
    data = request.json()
    if not isinstance(data, dict):
        raise HTTPError(400, "expected a JSON object")
    title, body = data.get("title"), data.get("body", "")
    if not isinstance(title, str) or not title.strip():
        raise HTTPError(400, "title is required")
    if len(title) > MAX_TITLE_LENGTH or not isinstance(body, str):
        raise HTTPError(400, "title too long or body is not a string")
    if services.repository.count_for_owner(user_id) >= services.settings.max_notes_per_user:
        raise HTTPError(403, "note limit reached")
    note = services.repository.create(user_id, title.strip(), body)
    services.cache.set(note.id, note)
    return Response(201, note.to_dict(), {"Location": f"/notes/{note.id}"})


def _load_owned_note(request: Request, services: NoteServices) -> Note:
    """Fetch a note through the cache; other users' notes look like 404s."""
    user_id = _require_user(request)
    note_id = _parse_int(request.path_params.get("note_id"), "note_id", 0)
    note = services.cache.get(note_id)
    if note is None:
        note = services.repository.get(note_id)
        if note is not None:
            services.cache.set(note_id, note)
    if note is None or note.owner_id != user_id:
        raise HTTPError(404, "note not found")
    return note


def get_note(request: Request, services: NoteServices) -> Response:
    return Response(200, _load_owned_note(request, services).to_dict())


def delete_note(request: Request, services: NoteServices) -> Response:
    note = _load_owned_note(request, services)
    services.cache.invalidate(note.id)
    if not services.repository.delete(note.id, note.owner_id):
        raise HTTPError(404, "note not found")
    return Response(204)


def register_routes(router: Router, services: NoteServices) -> None:
    """Attach every note endpoint to ``router``."""
    router.add("GET", "/health", partial(health, services=services))
    router.add("GET", "/notes", partial(list_notes, services=services))
    router.add("POST", "/notes", partial(create_note, services=services))
    router.add("GET", "/notes/{note_id}", partial(get_note, services=services))
    router.add("DELETE", "/notes/{note_id}", partial(delete_note, services=services))
