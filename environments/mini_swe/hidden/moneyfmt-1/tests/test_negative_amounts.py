import pytest

from moneyfmt import format_money, parse_money


@pytest.mark.parametrize(
    ("amount", "currency", "expected"),
    [
        (-150, "USD", "-$1.50"),
        (-5, "USD", "-$0.05"),
        (-99, "GBP", "-£0.99"),
        (-123456, "EUR", "-1.234,56 €"),
        (-123456, "CHF", "-1'234.56 CHF"),
    ],
)
def test_negative_fractions(amount, currency, expected):
    assert format_money(amount, currency) == expected


@pytest.mark.parametrize("currency", ["USD", "EUR", "JPY"])
def test_round_trip_negative(currency):
    for amount in range(-1001, 0, 7):
        assert parse_money(format_money(amount, currency), currency) == amount
