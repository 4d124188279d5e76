import pytest
from solution import free_slots


def _slots(*args):
    return [tuple(s) for s in free_slots(*args)]


def test_example():
    busy = [("09:30", "10:00"), ("12:00", "13:00"), ("12:30", "14:00")]
    assert _slots(busy, "09:00", "17:00", 30) == [("09:00", "09:30"), ("10:00", "12:00"), ("14:00", "17:00")]


def test_no_meetings():
    assert _slots([], "09:00", "17:00", 60) == [("09:00", "17:00")]


def test_fully_booked():
    assert _slots([("08:00", "18:00")], "09:00", "17:00", 1) == []


def test_min_minutes_filters_short_gaps():
    busy = [("09:00", "09:50"), ("10:00", "11:00")]
    assert _slots(busy, "09:00", "12:00", 15) == [("11:00", "12:00")]
    assert _slots(busy, "09:00", "12:00", 10) == [("09:50", "10:00"), ("11:00", "12:00")]


def test_touching_meetings_leave_no_gap():
    busy = [("10:00", "11:00"), ("11:00", "12:00")]
    assert _slots(busy, "10:00", "13:00", 0) == [("12:00", "13:00")]


def test_unsorted_and_outside_the_day():
    busy = [("16:30", "19:00"), ("07:00", "09:15"), ("12:00", "12:30")]
    assert _slots(busy, "09:00", "17:00", 5) == [("09:15", "12:00"), ("12:30", "16:30")]


def test_whole_day_and_midnight():
    assert _slots([("00:00", "08:00"), ("20:00", "24:00")], "00:00", "24:00", 60) == [("08:00", "20:00")]


def test_zero_length_meeting_is_ignored():
    assert _slots([("10:00", "10:00")], "09:00", "11:00", 0) == [("09:00", "11:00")]


@pytest.mark.parametrize(
    ("busy", "start", "end"),
    [
        ([("9:00", "10:00")], "09:00", "17:00"),
        ([("12:60", "13:00")], "09:00", "17:00"),
        ([("25:00", "26:00")], "09:00", "17:00"),
        ([("11:00", "10:00")], "09:00", "17:00"),
        ([], "17:00", "09:00"),
        ([], "09:00", "09:00"),
        ([], "09:00", "24:01"),
        ([("ab:cd", "10:00")], "09:00", "17:00"),
    ],
)
def test_invalid(busy, start, end):
    with pytest.raises(ValueError):
        free_slots(busy, start, end, 0)
