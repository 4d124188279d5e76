import pytest

from datekit import day_of_year, days_in_month, is_leap_year


@pytest.mark.parametrize(("year", "leap"), [(2024, True), (2023, False), (2020, True), (1900, False), (2019, False)])
def test_is_leap_year(year, leap):
    assert is_leap_year(year) is leap


def test_days_in_month():
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2023, 2) == 28
    assert days_in_month(2023, 4) == 30
    assert days_in_month(2023, 12) == 31


def test_days_in_month_rejects_bad_month():
    with pytest.raises(ValueError):
        days_in_month(2023, 13)


def test_day_of_year():
    assert day_of_year(2023, 1, 1) == 1
    assert day_of_year(2023, 12, 31) == 365
    assert day_of_year(2024, 12, 31) == 366
    assert day_of_year(2024, 3, 1) == 61
