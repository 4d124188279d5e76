import pytest

from cronlite import parse_field


@pytest.mark.parametrize(
    ("text", "low", "high", "expected"),
    [
        ("*", 0, 6, [0, 1, 2, 3, 4, 5, 6]),
        ("5", 0, 59, [5]),
        ("0,30", 0, 59, [0, 30]),
        ("*/20", 0, 59, [0, 20, 40]),
        ("*/15", 0, 59, [0, 15, 30, 45]),
        ("1-6/2", 0, 6, [1, 3, 5]),
        ("0-59/30", 0, 59, [0, 30]),
        ("30,5,5", 0, 59, [5, 30]),
    ],
)
def test_parse_field(text, low, high, expected):
    assert parse_field(text, low, high) == expected


@pytest.mark.parametrize("text", ["", "60", "a", "*/0", "5-1", "1,,2", "-1"])
def test_parse_field_rejects(text):
    with pytest.raises(ValueError):
        parse_field(text, 0, 59)
