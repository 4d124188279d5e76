import random

from solution import Trie


def _make(*words):
    t = Trie()
    for w in words:
        t.insert(w)
    return t


def test_insert_and_contains():
    t = _make("car", "cart", "dog")
    assert t.contains("car") and t.contains("cart") and t.contains("dog")
    assert not t.contains("ca") and not t.contains("carts") and not t.contains("")


def test_starts_with_sorted():
    t = _make("dog", "cart", "car", "care", "cat")
    assert t.starts_with("car") == ["car", "care", "cart"]
    assert t.starts_with("") == ["car", "care", "cart", "cat", "dog"]
    assert t.starts_with("x") == []


def test_count_prefix():
    t = _make("car", "cart", "dog")
    assert t.count_prefix("ca") == 2
    assert t.count_prefix("") == 3
    assert t.count_prefix("cart") == 1
    assert t.count_prefix("carts") == 0


def test_duplicates_and_len():
    t = _make("a", "a", "ab")
    assert len(t) == 2 and t.count_prefix("a") == 2


def test_remove():
    t = _make("car", "cart")
    assert t.remove("car") is True
    assert not t.contains("car") and t.contains("cart")
    assert t.remove("car") is False
    assert t.remove("ca") is False
    assert t.count_prefix("car") == 1 and len(t) == 1
    assert t.starts_with("c") == ["cart"]


def test_empty_word():
    t = Trie()
    assert len(t) == 0 and not t.contains("")
    t.insert("")
    assert t.contains("") and len(t) == 1 and t.starts_with("") == [""]
    assert t.remove("") is True and len(t) == 0


def test_many_words():
    rng = random.Random(9)
    words = {"".join(rng.choice("abcd") for _ in range(rng.randint(1, 12))) for _ in range(20_000)}
    t = Trie()
    for w in words:
        t.insert(w)
    assert len(t) == len(words)
    prefixes = ["".join(rng.choice("abcd") for _ in range(rng.randint(0, 4))) for _ in range(20_000)]
    expected = {p: sum(1 for w in words if w.startswith(p)) for p in set(prefixes[:8])}
    for p in prefixes:
        n = t.count_prefix(p)
        if p in expected:
            assert n == expected[p]
