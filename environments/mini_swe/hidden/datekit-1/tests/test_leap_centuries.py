from datetime import date

import pytest

from datekit import add_months, days_in_month, is_leap_year, parse_date


@pytest.mark.parametrize(("year", "leap"), [(2000, True), (2400, True), (1600, True), (1900, False), (2100, False)])
def test_century_leap_years(year, leap):
    assert is_leap_year(year) is leap


def test_parse_29_february_2000():
    assert parse_date("2000-02-29") == date(2000, 2, 29)
    assert parse_date("29/02/2000") == date(2000, 2, 29)
    assert days_in_month(2000, 2) == 29


def test_add_months_into_february_2000():
    assert add_months(date(2000, 1, 31), 1) == date(2000, 2, 29)


def test_1900_is_still_not_leap():
    with pytest.raises(ValueError):
        parse_date("1900-02-29")
