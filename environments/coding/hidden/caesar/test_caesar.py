import pytest
from solution import caesar


@pytest.mark.parametrize(
    ("text", "shift", "expected"),
    [
        ("abc", 1, "bcd"),
        ("xyz", 3, "abc"),
        ("Hello, World!", 13, "Uryyb, Jbeyq!"),
        ("abc", -1, "zab"),
        ("abc", 27, "bcd"),
        ("abc", -53, "zab"),
        ("", 5, ""),
        ("héllo 123", 1, "iémmp 123"),
        ("Zebra", 0, "Zebra"),
    ],
)
def test_caesar(text, shift, expected):
    assert caesar(text, shift) == expected


def test_round_trip():
    text = "The quick brown fox jumps over the lazy dog."
    assert caesar(caesar(text, 11), -11) == text
