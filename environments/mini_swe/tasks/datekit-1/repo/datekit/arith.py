"""Date arithmetic that the standard library leaves out."""

from __future__ import annotations

from datetime import date

from .calendar import days_in_month


def add_months(value: date, months: int) -> date:
    """Move `value` by whole months, clamping the day to the target month's last day.

    `add_months(date(2023, 1, 31), 1)` is 2023-02-28.
    """
    index = value.year * 12 + (value.month - 1) + months
    year, month0 = divmod(index, 12)
    month = month0 + 1
    return date(year, month, min(value.day, days_in_month(year, month)))


def days_between(start: date, end: date) -> int:
    """Signed number of days from `start` to `end`."""
    return (end - start).days
