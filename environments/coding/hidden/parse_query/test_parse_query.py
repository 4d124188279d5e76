import pytest
from solution import parse_query


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("a=1&b=2&a=3", {"a": ["1", "3"], "b": ["2"]}),
        ("", {}),
        ("?", {}),
        ("?x=1", {"x": ["1"]}),
        ("flag", {"flag": [""]}),
        ("q=hello+world%21", {"q": ["hello world!"]}),
        ("a=1&&b=", {"a": ["1"], "b": [""]}),
        ("name=%C3%A9t%C3%A9", {"name": ["été"]}),
        ("k=a=b", {"k": ["a=b"]}),
        ("%41=1", {"A": ["1"]}),
        ("a+b=c+d", {"a b": ["c d"]}),
        ("x=%2B", {"x": ["+"]}),
    ],
)
def test_parse_query(query, expected):
    assert parse_query(query) == expected


def test_key_order_is_first_occurrence():
    assert list(parse_query("z=1&a=2&z=3&m=4")) == ["z", "a", "m"]
