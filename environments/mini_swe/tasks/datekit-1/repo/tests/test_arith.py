from datetime import date

from datekit import add_months, days_between


def test_add_months_clamps_to_month_end():
    assert add_months(date(2023, 1, 31), 1) == date(2023, 2, 28)
    assert add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert add_months(date(2023, 3, 31), 1) == date(2023, 4, 30)


def test_add_months_crosses_years():
    assert add_months(date(2023, 11, 15), 3) == date(2024, 2, 15)
    assert add_months(date(2024, 1, 15), -1) == date(2023, 12, 15)
    assert add_months(date(2024, 5, 15), -17) == date(2022, 12, 15)


def test_days_between():
    assert days_between(date(2024, 1, 1), date(2024, 3, 1)) == 60
    assert days_between(date(2024, 3, 1), date(2024, 1, 1)) == -60
