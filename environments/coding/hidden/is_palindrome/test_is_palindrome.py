import pytest
from solution import is_palindrome


@pytest.mark.parametrize(
    "text",
    [
        "A man, a plan, a canal: Panama",
        "No 'x' in Nixon",
        "racecar",
        "12321",
        "",
        "!!",
        "a",
        "Was it a car or a cat I saw?",
    ],
)
def test_palindromes(text):
    assert is_palindrome(text) is True


@pytest.mark.parametrize("text", ["race a car", "ab", "123", "0P", "abca"])
def test_not_palindromes(text):
    assert is_palindrome(text) is False
