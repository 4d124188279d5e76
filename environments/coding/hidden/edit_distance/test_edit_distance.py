import pytest
from solution import edit_distance


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("kitten", "sitting", 3),
        ("", "", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("flaw", "lawn", 2),
        ("same", "same", 0),
        ("intention", "execution", 5),
        ("ab", "ba", 2),
        ("a", "A", 1),
    ],
)
def test_edit_distance(a, b, expected):
    assert edit_distance(a, b) == expected


def test_symmetric():
    assert edit_distance("sunday", "saturday") == edit_distance("saturday", "sunday") == 3


def test_long_strings():
    assert edit_distance("a" * 600, "b" * 400) == 600
    assert edit_distance("ab" * 300, "ba" * 300) == 2
    assert edit_distance("xy" * 300, "xy" * 300) == 0
