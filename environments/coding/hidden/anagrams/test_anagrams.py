import pytest
from solution import are_anagrams


@pytest.mark.parametrize(
    ("a", "b"),
    [("listen", "silent"), ("Dormitory", "dirty room"), ("", ""), ("abc!", "c b a!"), ("A", "a"), ("a b", "ab\t")],
)
def test_anagrams(a, b):
    assert are_anagrams(a, b) is True


@pytest.mark.parametrize(("a", "b"), [("a", "b"), ("aab", "abb"), ("ab", "a"), ("abc", "abc!"), ("12", "13")])
def test_not_anagrams(a, b):
    assert are_anagrams(a, b) is False
