from datetime import datetime

import pytest

from cronlite import CronSchedule, parse_field


@pytest.mark.parametrize(
    ("text", "low", "high", "expected"),
    [
        ("1-5", 0, 6, [1, 2, 3, 4, 5]),
        ("9-17", 0, 23, list(range(9, 18))),
        ("0-30/10", 0, 59, [0, 10, 20, 30]),
        ("3-3", 0, 6, [3]),
    ],
)
def test_ranges_include_both_ends(text, low, high, expected):
    assert parse_field(text, low, high) == expected


def test_weekday_schedule_fires_on_friday():
    s = CronSchedule("0 9 * * 1-5")
    assert s.next_run(datetime(2024, 5, 2, 10, 0)) == datetime(2024, 5, 3, 9, 0)


def test_working_hours_include_the_last_hour():
    s = CronSchedule("0 9-17 * * *")
    assert s.matches(datetime(2024, 5, 1, 17, 0))
    assert s.next_run(datetime(2024, 5, 1, 16, 30)) == datetime(2024, 5, 1, 17, 0)


def test_day_range_reaches_the_31st():
    assert CronSchedule("0 0 1-31 * *").next_run(datetime(2024, 5, 30, 12, 0)) == datetime(2024, 5, 31, 0, 0)
