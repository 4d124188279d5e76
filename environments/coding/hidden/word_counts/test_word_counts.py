import pytest
from solution import word_counts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The the THE", {"the": 3}),
        ("Hello, world! Hello?", {"hello": 2, "world": 1}),
        ("", {}),
        ("123 456 !!", {}),
        ("it's", {"it": 1, "s": 1}),
        ("a-b a_b a1b", {"a": 3, "b": 3}),
        ("naïve cafe", {"na": 1, "ve": 1, "cafe": 1}),
        ("one\ntwo\ttwo", {"one": 1, "two": 2}),
    ],
)
def test_word_counts(text, expected):
    assert dict(word_counts(text)) == expected
