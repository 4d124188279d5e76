import re


def _minutes(text: str) -> int:
    m = re.fullmatch(r"([0-9]{2}):([0-9]{2})", text)
    if m is None:
        raise ValueError(f"bad time {text!r}")
    hours, minutes = int(m.group(1)), int(m.group(2))
    if minutes > 59 or hours > 24 or (hours == 24 and minutes):
        raise ValueError(f"bad time {text!r}")
    return hours * 60 + minutes


def _text(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def free_slots(busy: list[tuple[str, str]], day_start: str, day_end: str, min_minutes: int) -> list[tuple[str, str]]:
    start, end = _minutes(day_start), _minutes(day_end)
    if end <= start:
        raise ValueError("the day must end after it starts")
    meetings = []
    for a, b in busy:
        ma, mb = _minutes(a), _minutes(b)
        if mb < ma:
            raise ValueError(f"meeting ({a}, {b}) ends before it starts")
        if mb > ma:
            meetings.append((ma, mb))
    meetings.sort()
    slots = []
    cursor = start
    for ma, mb in meetings:
        if ma > cursor and min(ma, end) - cursor >= min_minutes and cursor < end:
            slots.append((_text(cursor), _text(min(ma, end))))
        cursor = max(cursor, mb)
    if end - cursor >= min_minutes and cursor < end:
        slots.append((_text(cursor), _text(end)))
    return slots
