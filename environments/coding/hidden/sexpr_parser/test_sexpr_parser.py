import pytest
from solution import Symbol, parse_sexpr


def _typed(value):
    """The value with types made visible, so Symbol("a") and "a" differ."""
    if isinstance(value, list):
        return ["list", [_typed(v) for v in value]]
    return [type(value).__name__, value]


def test_integer():
    assert _typed(parse_sexpr("42")) == ["int", 42]
    assert _typed(parse_sexpr("-7")) == ["int", -7]


def test_symbol():
    assert _typed(parse_sexpr("foo")) == ["Symbol", "foo"]
    assert _typed(parse_sexpr("-")) == ["Symbol", "-"]
    assert _typed(parse_sexpr("1a")) == ["Symbol", "1a"]
    assert _typed(parse_sexpr("+5")) == ["Symbol", "+5"]


def test_string_is_plain_str():
    assert _typed(parse_sexpr('"two words"')) == ["str", "two words"]


def test_string_escapes():
    assert parse_sexpr(r'"he said \"hi\""') == 'he said "hi"'
    assert parse_sexpr(r'"back\\slash"') == "back\\slash"
    assert parse_sexpr('"(not a list)"') == "(not a list)"


def test_list():
    assert _typed(parse_sexpr('(define x (add 1 -2) "hi")')) == _typed(
        [Symbol("define"), Symbol("x"), [Symbol("add"), 1, -2], "hi"]
    )


def test_empty_and_nested_lists():
    assert parse_sexpr("()") == []
    assert parse_sexpr("(a (b (c)))") == ["a", ["b", ["c"]]]
    assert parse_sexpr("(()())") == [[], []]


def test_whitespace():
    assert parse_sexpr("  ( +\n 1\t2 )  ") == ["+", 1, 2]
    assert parse_sexpr('(a"b"c)') == ["a", "b", "c"]


def test_moderately_deep_nesting():
    expected = []
    for _ in range(99):
        expected = [expected]
    assert parse_sexpr("(" * 100 + ")" * 100) == expected


@pytest.mark.parametrize("text", ["", "   ", "(1 2", ")", "(a))", "1 2", '"abc', '"bad \\n escape"', "(a) b", '"a\\'])
def test_invalid(text):
    with pytest.raises(ValueError):
        parse_sexpr(text)
