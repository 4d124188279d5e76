import pytest
from solution import min_window


@pytest.mark.parametrize(
    ("text", "chars", "expected"),
    [
        ("ADOBECODEBANC", "ABC", "BANC"),
        ("a", "a", "a"),
        ("a", "aa", ""),
        ("", "a", ""),
        ("abc", "", ""),
        ("aa", "aa", "aa"),
        ("bba", "ab", "ba"),
        ("cabwefgewcwaefgcf", "cae", "cwae"),
        ("abab", "ab", "ab"),
        ("xyz", "q", ""),
        ("aAbB", "ab", "aAb"),
        ("this is a test string", "tist", "t stri"),
    ],
)
def test_min_window(text, chars, expected):
    assert min_window(text, chars) == expected


def test_long_text():
    text = "x" * 100_000 + "abc" + "y" * 100_000 + "cba"
    assert min_window(text, "abc") == "abc"
    assert min_window(text, "xy") == "xabcy"
