"""Formatting and parsing amounts given in minor units (e.g. cents)."""

from __future__ import annotations

from .currencies import Currency, get_currency


def format_money(minor_units: int, currency: str = "USD", *, symbol: bool = True) -> str:
    """Format an amount of minor units: `format_money(-2500, "USD")` is `'-$25.00'`."""
    cur = get_currency(currency)
    sign = "-" if minor_units < 0 else ""
    scale = 10**cur.decimals
    units, fraction = divmod(minor_units, scale)
    units = abs(units)
    body = _group(units, cur.thousands)
    if cur.decimals:
        body += cur.decimal + str(fraction).zfill(cur.decimals)
    if not symbol:
        return sign + body
    if cur.symbol_first:
        return f"{sign}{cur.symbol}{body}"
    return f"{sign}{body} {cur.symbol}"


def _group(units: int, separator: str) -> str:
    digits = str(units)
    groups = []
    while len(digits) > 3:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    groups.insert(0, digits)
    return separator.join(groups)


def parse_money(text: str, currency: str = "USD") -> int:
    """Parse what `format_money` writes (symbol optional) back into minor units."""
    cur = get_currency(currency)
    cleaned = text.strip().replace(cur.symbol, "").strip()
    negative = cleaned.startswith("-")
    cleaned = cleaned.lstrip("-").strip().replace(cur.thousands, "")
    if cur.decimals:
        whole, _, fraction = cleaned.partition(cur.decimal)
        fraction = (fraction + "0" * cur.decimals)[: cur.decimals]
    else:
        whole, fraction = cleaned, ""
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        raise ValueError(f"not a {cur.code} amount: {text!r}")
    value = int(whole) * 10**cur.decimals + int(fraction or 0)
    return -value if negative else value


def _describe(cur: Currency) -> str:  # used in error messages by callers
    return f"{cur.code} ({cur.symbol})"
