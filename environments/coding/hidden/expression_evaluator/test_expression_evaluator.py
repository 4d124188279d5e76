import pytest
from calc import evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2", 3.0),
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("8 - 3 - 2", 3.0),
        ("8 / 4 / 2", 1.0),
        ("-(4 - 6) / 4", 0.5),
        ("--2", 2.0),
        ("2 * -3", -6.0),
        ("+5", 5.0),
        ("  7  ", 7.0),
        ("3.25 * 4", 13.0),
        ("((((1))))", 1.0),
        ("1 - -1", 2.0),
        ("2 * (3 + 4) * (5 - 1) / 7", 8.0),
        ("1/3", 1 / 3),
        ("0.1 + 0.2", 0.30000000000000004),
        ("-2 * -2 - -2", 6.0),
        ("10-2*3+4/2", 6.0),
    ],
)
def test_evaluate(expression, value):
    result = evaluate(expression)
    assert isinstance(result, float)
    assert result == pytest.approx(value)


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "   ",
        "(1",
        "1)",
        "1 +",
        "* 2",
        "3 4",
        "2 ** 3",
        "1 // 2",
        "1e3",
        "abs(1)",
        "()",
        "1 + (2 *)",
        ".5",
        "2 % 3",
        "1..2",
        "x",
    ],
)
def test_invalid(expression):
    with pytest.raises(ValueError):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["1 / 0", "1 / (2 - 2)", "5 / -0"])
def test_division_by_zero(expression):
    with pytest.raises(ZeroDivisionError):
        evaluate(expression)


def test_long_expression():
    assert evaluate(" + ".join(["1"] * 5000)) == 5000.0
