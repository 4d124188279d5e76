import pytest
from solution import reverse_words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello world", "world hello"),
        ("the sky is blue", "blue is sky the"),
        ("hello   world", "world hello"),
        ("  leading and trailing  ", "trailing and leading"),
        ("tabs\tand\nnewlines", "newlines and tabs"),
        ("single", "single"),
        ("", ""),
        ("   ", ""),
        ("Hello, world!", "world! Hello,"),
    ],
)
def test_reverse_words(text, expected):
    assert reverse_words(text) == expected
