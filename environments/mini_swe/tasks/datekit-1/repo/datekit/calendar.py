"""Calendar facts: leap years, month lengths, day of the year (proleptic Gregorian)."""

from __future__ import annotations

MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap_year(year: int) -> bool:
    """True for years that have a 29th of February."""
    return year % 4 == 0 and year % 100 != 0


def days_in_month(year: int, month: int) -> int:
    """Number of days in `month` (1-12) of `year`."""
    if not 1 <= month <= 12:
        raise ValueError(f"month must be in 1..12, got {month}")
    if month == 2 and is_leap_year(year):
        return 29
    return MONTH_DAYS[month - 1]


def day_of_year(year: int, month: int, day: int) -> int:
    """1 for the 1st of January, up to 365 or 366 for the 31st of December."""
    if not 1 <= day <= days_in_month(year, month):
        raise ValueError(f"day {day} is out of range for {year}-{month:02d}")
    return sum(days_in_month(year, m) for m in range(1, month)) + day
