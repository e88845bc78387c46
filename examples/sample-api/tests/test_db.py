import pytest

from notes_api.storage.db import Database, Note, NoteRepository


@pytest.fixture
def repo(clock):
    return NoteRepository(Database(":memory:"), clock=clock)


def test_create_and_get(repo, clock):
    note = repo.create(1, "Title", "Body")
    assert note == Note(note.id, 1, "Title", "Body", clock.now)
    assert repo.get(note.id) == note
    assert repo.get(12345) is None


def test_list_for_owner_paginates_in_creation_order(repo, clock):
    for i in range(5):
        repo.create(1, f"note {i}")
        clock.advance(1)
    repo.create(2, "someone else's")
    page = repo.list_for_owner(1, page=2, page_size=2)
    assert [n.title for n in page.items] == ["note 2", "note 3"]
    assert page.total == 5
    assert page.has_next is True
    last = repo.list_for_owner(1, page=3, page_size=2)
    assert [n.title for n in last.items] == ["note 4"]
    assert last.has_next is False


def test_list_rejects_invalid_page(repo):
    with pytest.raises(ValueError):
        repo.list_for_owner(1, page=0)


def test_count_for_owner(repo):
    repo.create(1, "a")
    repo.create(1, "b")
    repo.create(2, "c")
    assert repo.count_for_owner(1) == 2
    assert repo.count_for_owner(3) == 0


def test_delete_only_removes_owned_notes(repo):
    note = repo.create(1, "mine")
    assert repo.delete(note.id, owner_id=2) is False
    assert repo.delete(note.id, owner_id=1) is True
    assert repo.get(note.id) is None
    assert repo.delete(note.id, owner_id=1) is False


def test_notes_persist_across_connections(tmp_path, clock):
    path = str(tmp_path / "notes.db")
    first = Database(path)
    note = NoteRepository(first, clock=clock).create(1, "durable")
    first.close()
    assert NoteRepository(Database(path), clock=clock).get(note.id) == note
