import pytest

from lrukit import LRUCache


def test_get_and_put():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("missing") is None
    assert cache.get("missing", 0) == 0


def test_evicts_least_recently_inserted():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]


def test_get_refreshes_recency():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]


def test_peek_does_not_refresh():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek("a") == 1
    cache.put("c", 3)
    assert "a" not in cache


def test_put_existing_key_replaces_value():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("a", 10)
    assert cache.get("a") == 10
    assert len(cache) == 1


def test_on_evict_callback():
    evicted = []
    cache = LRUCache(1, on_evict=lambda k, v: evicted.append((k, v)))
    cache.put("a", 1)
    cache.put("b", 2)
    assert evicted == [("a", 1)]


def test_statistics():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.get("a")
    cache.get("b")
    assert (cache.hits, cache.misses) == (1, 1)


def test_resize_evicts():
    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, key)
    cache.resize(1)
    assert cache.keys() == ["c"]


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_must_be_positive(capacity):
    with pytest.raises(ValueError):
        LRUCache(capacity)


def test_pop_and_clear():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.pop("a") == 1
    assert cache.pop("a", "gone") == "gone"
    cache.put("b", 2)
    cache.clear()
    assert len(cache) == 0
