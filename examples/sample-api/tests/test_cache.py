import pytest

from notes_api.storage.cache import TTLCache


def test_set_and_get(clock):
    cache = TTLCache(10, clock=clock)
    cache.set("a", 1)
    assert cache.get("a") == 1
    assert cache.get("missing", "default") == "default"
    assert (cache.hits, cache.misses) == (1, 1)


def test_entries_expire_after_ttl(clock):
    cache = TTLCache(10, clock=clock)
    cache.set("a", 1)
    clock.advance(9.9)
    assert cache.get("a") == 1
    clock.advance(0.1)
    assert cache.get("a") is None
    assert len(cache) == 0


def test_setting_again_refreshes_expiry(clock):
    cache = TTLCache(10, clock=clock)
    cache.set("a", 1)
    clock.advance(8)
    cache.set("a", 2)
    clock.advance(8)
    assert cache.get("a") == 2


def test_least_recently_used_entry_is_evicted(clock):
    cache = TTLCache(10, max_entries=2, clock=clock)
    cache.set("a", 1)
    cache.set("b", 2)
    cache.get("a")
    cache.set("c", 3)
    assert cache.get("b") is None
    assert cache.get("a") == 1 and cache.get("c") == 3


def test_invalidate_and_clear(clock):
    cache = TTLCache(10, clock=clock)
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.invalidate("a") is True
    assert cache.invalidate("a") is False
    cache.clear()
    assert len(cache) == 0


def test_purge_expired_counts_removed_entries(clock):
    cache = TTLCache(5, clock=clock)
    cache.set("old", 1)
    clock.advance(3)
    cache.set("new", 2)
    clock.advance(3)
    assert cache.purge_expired() == 1
    assert cache.get("new") == 2


@pytest.mark.parametrize("ttl, size", [(0, 1), (1, 0)])
def test_invalid_configuration_is_rejected(ttl, size):
    with pytest.raises(ValueError):
        TTLCache(ttl, max_entries=size)
