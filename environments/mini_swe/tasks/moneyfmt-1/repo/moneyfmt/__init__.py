"""moneyfmt: money amounts as integer minor units."""

from .allocate import allocate
from .currencies import CURRENCIES, Currency, get_currency
from .format import format_money, parse_money

__all__ = ["CURRENCIES", "Currency", "allocate", "format_money", "get_currency", "parse_money"]
