import pytest
from lru_cache import LRUCache


def test_evicts_least_recently_used():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("c", 3)
    assert "a" not in c and c.get("a") is None
    assert c.get("b") == 2 and c.get("c") == 3


def test_get_refreshes_recency():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)
    assert c.keys() == ["a", "c"]


def test_put_existing_key_updates_and_refreshes():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    c.put("c", 3)
    assert c.keys() == ["a", "c"] and c.get("a") == 10 and len(c) == 2


def test_contains_does_not_refresh():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert "a" in c
    c.put("c", 3)
    assert "a" not in c and c.keys() == ["b", "c"]


def test_missing_key_default_and_stored_none():
    c = LRUCache(3)
    assert c.get("nope") is None
    assert c.get("nope", "dflt") == "dflt"
    c.put("k", None)
    assert c.get("k", "dflt") is None and "k" in c


def test_capacity_one():
    c = LRUCache(1)
    c.put(1, "x")
    c.put(2, "y")
    assert c.keys() == [2] and len(c) == 1


@pytest.mark.parametrize("capacity", [0, -5])
def test_bad_capacity(capacity):
    with pytest.raises(ValueError):
        LRUCache(capacity)


def test_miss_does_not_change_order():
    c = LRUCache(3)
    for k in "abc":
        c.put(k, k)
    c.get("zzz")
    assert c.keys() == ["a", "b", "c"]


def test_many_operations_are_fast():
    c = LRUCache(5_000)
    for i in range(10_000):
        c.put(i, i * 2)
    for i in range(5_000, 10_000):
        assert c.get(i) == i * 2
    assert len(c) == 5_000 and c.get(0) is None
    assert c.keys()[:3] == [5_000, 5_001, 5_002]
