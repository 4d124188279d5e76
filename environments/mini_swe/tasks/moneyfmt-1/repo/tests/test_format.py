import pytest

from moneyfmt import format_money, parse_money


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        (0, "USD", "$0.00"),
        (5, "USD", "$0.05"),
        (123456, "USD", "$1,234.56"),
        (100000000, "GBP", "£1,000,000.00"),
        (123456, "EUR", "1.234,56 €"),
        (123456, "CHF", "1'234.56 CHF"),
        (1234, "JPY", "¥1,234"),
        (-2500, "USD", "-$25.00"),
        (-100000, "EUR", "-1.000,00 €"),
        (-7, "JPY", "-¥7"),
    ],
)
def test_format(amount, currency, expected):
    assert format_money(amount, currency) == expected


def test_format_without_symbol():
    assert format_money(123456, "USD", symbol=False) == "1,234.56"


def test_unknown_currency():
    with pytest.raises(ValueError, match="unknown currency"):
        format_money(1, "XYZ")


@pytest.mark.parametrize(
    ("text", "currency", "expected"),
    [
        ("$1,234.56", "USD", 123456),
        ("1234.5", "USD", 123450),
        ("-$1.50", "USD", -150),
        ("1.234,56 €", "EUR", 123456),
        ("¥1,234", "JPY", 1234),
    ],
)
def test_parse(text, currency, expected):
    assert parse_money(text, currency) == expected


def test_parse_rejects_garbage():
    with pytest.raises(ValueError):
        parse_money("twelve dollars", "USD")


@pytest.mark.parametrize("amount", [0, 1, 99, 100, 101, 123456789])
def test_round_trip_positive(amount):
    assert parse_money(format_money(amount, "USD"), "USD") == amount
