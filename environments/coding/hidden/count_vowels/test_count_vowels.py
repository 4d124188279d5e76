import pytest
from solution import count_vowels


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello", 2),
        ("AEIOU", 5),
        ("aEiOu", 5),
        ("rhythm", 0),
        ("", 0),
        ("Yay", 1),
        ("Programming in Python", 5),
        ("12345 !?", 0),
    ],
)
def test_count_vowels(text, expected):
    assert count_vowels(text) == expected
