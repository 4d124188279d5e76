"""Parsing and formatting dates in the three layouts we see in the wild."""

from __future__ import annotations

import re
from datetime import date

from .calendar import days_in_month

# (pattern, order of the captured groups)
_LAYOUTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$"), "ymd"),  # 2024-01-31
    (re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$"), "dmy"),  # 31/01/2024
    (re.compile(r"^(\d{4})(\d{2})(\d{2})$"), "ymd"),  # 20240131
]

_STYLES = {
    "iso": "{y:04d}-{m:02d}-{d:02d}",
    "eu": "{d:02d}/{m:02d}/{y:04d}",
    "compact": "{y:04d}{m:02d}{d:02d}",
}


def parse_date(text: str) -> date:
    """Parse `YYYY-MM-DD`, `DD/MM/YYYY` or `YYYYMMDD` into a `datetime.date`.

    Raises:
        ValueError: the text matches no layout, or names a day that does not exist.
    """
    cleaned = text.strip()
    for pattern, order in _LAYOUTS:
        match = pattern.match(cleaned)
        if match is None:
            continue
        parts = dict(zip(order, (int(g) for g in match.groups())))
        return _build(parts["y"], parts["m"], parts["d"], cleaned)
    raise ValueError(f"unrecognised date: {text!r}")


def _build(year: int, month: int, day: int, text: str) -> date:
    if not 1 <= month <= 12:
        raise ValueError(f"month out of range in {text!r}")
    if not 1 <= day <= days_in_month(year, month):
        raise ValueError(f"day out of range in {text!r}")
    return date(year, month, day)


def format_date(value: date, style: str = "iso") -> str:
    """Format a date as `iso` (2024-01-31), `eu` (31/01/2024) or `compact` (20240131)."""
    try:
        template = _STYLES[style]
    except KeyError:
        raise ValueError(f"unknown style {style!r}; choose one of {sorted(_STYLES)}") from None
    return template.format(y=value.year, m=value.month, d=value.day)
