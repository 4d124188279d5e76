import pytest
from tiny_regex import full_match


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("a*b", "aaab"),
        ("a*b", "b"),
        ("colou?r", "color"),
        ("colou?r", "colour"),
        (".*", ""),
        (".*", "anything at all"),
        ("a.c", "abc"),
        ("a\\.c", "a.c"),
        ("", ""),
        ("a+", "aaaa"),
        (".*x.*y", "ab x cd y"),
        ("\\*+", "***"),
        ("a?", ""),
        ("\\\\", "\\"),
        ("h.llo w*orld", "hello orld"),
        ("a?a?a?aaa", "aaa"),
    ],
)
def test_matches(pattern, text):
    assert full_match(pattern, text) is True


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("a+b", "b"),
        ("a.c", "ac"),
        ("a\\.c", "abc"),
        ("ab", "abc"),
        ("abc", "ab"),
        ("", "a"),
        (".+", ""),
        ("colou?r", "colouur"),
        ("a*", "b"),
        ("\\.", "x"),
    ],
)
def test_does_not_match(pattern, text):
    assert full_match(pattern, text) is False


@pytest.mark.parametrize("pattern", ["*a", "a**", "+", "?", "a\\", "a*?", "a+*"])
def test_invalid_pattern(pattern):
    with pytest.raises(ValueError):
        full_match(pattern, "a")


def test_polynomial_time():
    assert full_match("a*a*a*a*a*a*a*a*a*b", "a" * 40) is False
    assert full_match("a*a*a*a*a*a*a*a*a*b", "a" * 40 + "b") is True
    assert full_match(".*.*.*.*.*.*.*x", "y" * 60) is False
