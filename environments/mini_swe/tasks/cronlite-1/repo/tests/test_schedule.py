from datetime import datetime

import pytest

from cronlite import CronSchedule


def test_every_quarter_hour():
    s = CronSchedule("*/15 * * * *")
    assert s.next_run(datetime(2024, 5, 1, 8, 20)) == datetime(2024, 5, 1, 8, 30)
    assert s.next_run(datetime(2024, 5, 1, 8, 45)) == datetime(2024, 5, 1, 9, 0)


def test_next_run_is_strictly_after():
    s = CronSchedule("30 9 * * *")
    assert s.next_run(datetime(2024, 5, 1, 9, 30)) == datetime(2024, 5, 2, 9, 30)
    assert s.next_run(datetime(2024, 5, 1, 9, 29, 59)) == datetime(2024, 5, 1, 9, 30)


def test_rolls_over_month_and_year():
    s = CronSchedule("0 0 1 * *")
    assert s.next_run(datetime(2024, 12, 15)) == datetime(2025, 1, 1)


def test_weekday_field():
    s = CronSchedule("0 9 * * 1")  # Mondays
    assert s.next_run(datetime(2024, 5, 1)) == datetime(2024, 5, 6, 9, 0)
    s = CronSchedule("0 9 * * 0,6")  # weekends
    assert s.next_run(datetime(2024, 5, 1)) == datetime(2024, 5, 4, 9, 0)


def test_matches():
    s = CronSchedule("0,30 8 * * *")
    assert s.matches(datetime(2024, 5, 1, 8, 30))
    assert not s.matches(datetime(2024, 5, 1, 9, 30))


def test_leap_day():
    assert CronSchedule("0 0 29 2 *").next_run(datetime(2024, 3, 1)) == datetime(2028, 2, 29)


def test_impossible_date():
    with pytest.raises(ValueError, match="does not fire"):
        CronSchedule("0 0 31 2 *").next_run(datetime(2024, 1, 1))


def test_bad_expression():
    with pytest.raises(ValueError):
        CronSchedule("* * * *")
