from lrukit import LRUCache


def test_put_existing_key_refreshes_recency():
    cache = LRUCache(2)
    cache.put("alice", 1)
    cache.put("bob", 1)
    cache.put("alice", 2)
    cache.put("carol", 1)
    assert cache.keys() == ["alice", "carol"]
    assert cache.get("alice") == 2


def test_eviction_callback_sees_the_idle_entry():
    evicted = []
    cache = LRUCache(2, on_evict=lambda k, v: evicted.append(k))
    cache.put("a", 1)
    cache.put("b", 1)
    cache.put("a", 2)
    cache.put("c", 1)
    assert evicted == ["b"]


def test_keys_order_after_updates():
    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, 0)
    cache.put("a", 1)
    cache.put("b", 1)
    assert cache.keys() == ["c", "a", "b"]
