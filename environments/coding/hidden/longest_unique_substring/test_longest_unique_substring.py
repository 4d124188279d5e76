import pytest
from solution import longest_unique_substring


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abcabcbb", "abc"),
        ("bbbbb", "b"),
        ("pwwkew", "wke"),
        ("", ""),
        ("abcdef", "abcdef"),
        ("abba", "ab"),
        ("dvdf", "vdf"),
        ("tmmzuxt", "mzuxt"),
        ("aA", "aA"),
        ("a b c a", "a b"),
    ],
)
def test_longest_unique_substring(text, expected):
    assert longest_unique_substring(text) == expected


def test_long_text():
    text = "abcdefghij" * 20_000 + "klmnopqrstuvwxyz"
    assert longest_unique_substring(text) == "abcdefghijklmnopqrstuvwxyz"
