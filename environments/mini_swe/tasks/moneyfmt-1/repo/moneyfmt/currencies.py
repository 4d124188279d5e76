"""The currencies moneyfmt knows, and how each is written."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Currency:
    code: str
    symbol: str
    decimals: int = 2
    thousands: str = ","
    decimal: str = "."
    symbol_first: bool = True


CURRENCIES = {
    "USD": Currency("USD", "$"),
    "GBP": Currency("GBP", "£"),
    "EUR": Currency("EUR", "€", thousands=".", decimal=",", symbol_first=False),
    "CHF": Currency("CHF", "CHF", thousands="'", symbol_first=False),
    "JPY": Currency("JPY", "¥", decimals=0),
}


def get_currency(code: str) -> Currency:
    try:
        return CURRENCIES[code.upper()]
    except KeyError:
        raise ValueError(f"unknown currency {code!r}; known: {', '.join(sorted(CURRENCIES))}") from None
