import pytest
from solution import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400),
        ("45s", 45),
        ("2d3h", 183600),
        (" 1h 30m 15s ", 5415),
        ("0s", 0),
        ("90m", 5400),
        ("1d1h1m1s", 90061),
        ("007m", 420),
    ],
)
def test_valid(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "   ", "1x", "m", "10", "1h1h", "30m1h", "1.5h", "-1s", "1 h", "1h30", "h1", "1s 2s", "+5m"]
)
def test_invalid(text):
    with pytest.raises(ValueError):
        parse_duration(text)
