import pytest

from notes_api.auth.users import User, UserError, UserStore, hash_password
from notes_api.storage.db import Database

ITERATIONS = 1_000


def fixed_salt() -> bytes:
    return b"0123456789abcdef"


@pytest.fixture(params=["memory", "sqlite"])
def store(request):
    db = Database(":memory:") if request.param == "sqlite" else None
    return UserStore(db, iterations=ITERATIONS, salt_factory=fixed_salt)


def test_hash_password_is_deterministic_per_salt():
    first = hash_password("secret", b"salt-one", ITERATIONS)
    assert first == hash_password("secret", b"salt-one", ITERATIONS)
    assert first != hash_password("secret", b"salt-two", ITERATIONS)
    assert len(first) == 64


def test_create_and_lookup_user(store):
    user = store.create_user("alice", "wonderland")
    assert isinstance(user, User)
    assert user.salt == fixed_salt().hex()
    assert user.password_hash != "wonderland"
    assert store.get_by_id(user.id) == user
    assert store.get_by_name("alice") == user
    assert store.get_by_name("bob") is None


def test_user_ids_are_sequential(store):
    assert store.create_user("a", "pw").id == 1
    assert store.create_user("b", "pw").id == 2


def test_duplicate_or_empty_usernames_are_rejected(store):
    store.create_user("alice", "pw")
    with pytest.raises(UserError):
        store.create_user("alice", "other")
    with pytest.raises(UserError):
        store.create_user("   ", "pw")


def test_authenticate_checks_password(store):
    user = store.create_user("alice", "wonderland")
    assert store.authenticate("alice", "wonderland") == user
    assert store.authenticate("alice", "wrong") is None
    assert store.authenticate("nobody", "wonderland") is None


def test_deactivated_user_cannot_authenticate(store):
    user = store.create_user("alice", "wonderland")
    assert store.deactivate(user.id) is True
    assert store.get_by_id(user.id).is_active is False
    assert store.authenticate("alice", "wonderland") is None
    assert store.deactivate(999) is False


def test_public_dict_omits_secrets(store):
    public = store.create_user("alice", "pw").to_public_dict()
    assert public == {"id": 1, "username": "alice", "is_active": True}
