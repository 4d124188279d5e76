import pytest
from solution import wrap


@pytest.mark.parametrize(
    ("text", "width", "lines"),
    [
        ("the quick brown fox", 10, ["the quick", "brown fox"]),
        ("a b c", 1, ["a", "b", "c"]),
        ("", 5, []),
        ("   \n ", 5, []),
        ("supercalifragilistic is long", 5, ["supercalifragilistic", "is", "long"]),
        ("one two", 7, ["one two"]),
        ("one two", 6, ["one", "two"]),
        ("  spaced   out  ", 20, ["spaced out"]),
        ("a bb ccc dddd", 6, ["a bb", "ccc", "dddd"]),
        ("line\nbreaks\tand tabs", 11, ["line breaks", "and tabs"]),
    ],
)
def test_wrap(text, width, lines):
    assert wrap(text, width) == lines


@pytest.mark.parametrize("width", [0, -3])
def test_bad_width(width):
    with pytest.raises(ValueError):
        wrap("some text", width)
