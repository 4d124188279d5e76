import pytest
from solution import is_balanced


@pytest.mark.parametrize("text", ["", "()", "([]{})", "a(b[c]{d}e)f", "(((())))", "no brackets", "{[()()]}[]"])
def test_balanced(text):
    assert is_balanced(text) is True


@pytest.mark.parametrize("text", ["([)]", "((", "))", "}{", "[", "(]", "{[}]", "(()"])
def test_unbalanced(text):
    assert is_balanced(text) is False


def test_long_input():
    assert is_balanced("([{" * 20000 + "}])" * 20000) is True
    assert is_balanced("(" * 20000 + ")" * 19999) is False
