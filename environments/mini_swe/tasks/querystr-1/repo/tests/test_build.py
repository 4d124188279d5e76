import pytest

from querystr import build_query, build_url, encode_value


def test_simple_query():
    assert build_query({"q": "python", "page": 2}) == "q=python&page=2"


def test_encoding():
    assert build_query({"q": "café au lait"}) == "q=caf%C3%A9%20au%20lait"
    assert build_query({"first name": "a&b=c"}) == "first%20name=a%26b%3Dc"


def test_lists_repeat_the_key():
    assert build_query({"tag": ["a", "b"], "id": (1, 2)}) == "tag=a&tag=b&id=1&id=2"


def test_none_is_skipped():
    assert build_query({"a": None, "b": 1, "c": [None, 2]}) == "b=1&c=2"


@pytest.mark.parametrize(("value", "text"), [(True, "true"), (False, "false"), (0, "0"), (1.5, "1.5")])
def test_encode_value(value, text):
    assert encode_value(value) == text


def test_keyword_params_and_sort():
    assert build_query({"b": 1}, a=2) == "b=1&a=2"
    assert build_query({"b": 1}, a=2, sort=True) == "a=2&b=1"


def test_empty_query():
    assert build_query() == ""
    assert build_query({"a": None}) == ""


def test_build_url_adds_query():
    assert build_url("https://example.org/search", {"q": "x"}) == "https://example.org/search?q=x"


def test_build_url_extends_existing_query():
    assert build_url("https://example.org/s?lang=en", {"q": "x"}) == "https://example.org/s?lang=en&q=x"


def test_build_url_trailing_separators():
    assert build_url("https://example.org/s?", {"q": "x"}) == "https://example.org/s?q=x"
    assert build_url("https://example.org/s?a=1&", {"q": "x"}) == "https://example.org/s?a=1&q=x"


def test_build_url_without_params_is_unchanged():
    assert build_url("https://example.org/s", {}) == "https://example.org/s"
    assert build_url("https://example.org/s", {"a": None}) == "https://example.org/s"


def test_build_url_keywords():
    assert build_url("/api/items", page=3, q="name") == "/api/items?page=3&q=name"
