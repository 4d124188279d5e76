from datetime import date

import pytest

from datekit import format_date, parse_date


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-31", date(2024, 1, 31)),
        ("31/01/2024", date(2024, 1, 31)),
        ("20240131", date(2024, 1, 31)),
        ("  2023-7-4 ", date(2023, 7, 4)),
        ("2024-02-29", date(2024, 2, 29)),
    ],
)
def test_parse_layouts(text, expected):
    assert parse_date(text) == expected


@pytest.mark.parametrize("text", ["2023-02-29", "2023-13-01", "32/01/2024", "yesterday", ""])
def test_parse_rejects(text):
    with pytest.raises(ValueError):
        parse_date(text)


def test_format_styles():
    d = date(2024, 3, 9)
    assert format_date(d) == "2024-03-09"
    assert format_date(d, "eu") == "09/03/2024"
    assert format_date(d, "compact") == "20240309"
    with pytest.raises(ValueError):
        format_date(d, "us")
