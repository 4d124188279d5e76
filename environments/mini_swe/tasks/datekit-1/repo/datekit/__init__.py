"""datekit: small, dependency-free helpers for calendar dates."""

from .arith import add_months, days_between
from .calendar import day_of_year, days_in_month, is_leap_year
from .parse import format_date, parse_date

__all__ = [
    "add_months",
    "day_of_year",
    "days_between",
    "days_in_month",
    "format_date",
    "is_leap_year",
    "parse_date",
]

__version__ = "0.3.1"
