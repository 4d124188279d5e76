"""Parsing one cron field into the sorted values it allows."""

from __future__ import annotations

# name -> (lowest, highest) allowed value
FIELDS = {
    "minute": (0, 59),
    "hour": (0, 23),
    "day": (1, 31),
    "month": (1, 12),
    "weekday": (0, 6),
}


def parse_field(text: str, low: int, high: int) -> list[int]:
    """The sorted values a field allows, e.g. `parse_field("*/20", 0, 59)` is `[0, 20, 40]`.

    Raises:
        ValueError: malformed, or a value outside `low..high`.
    """
    values: set[int] = set()
    for part in text.split(","):
        values.update(_expand(part.strip(), low, high))
    return sorted(values)


def _expand(part: str, low: int, high: int) -> list[int]:
    if not part:
        raise ValueError("empty cron field part")
    step = 1
    if "/" in part:
        part, step_text = part.split("/", 1)
        step = _number(step_text)
        if step < 1:
            raise ValueError(f"step must be at least 1, got {step}")
    if part == "*":
        values = range(low, high + 1)
    elif "-" in part:
        first_text, last_text = part.split("-", 1)
        first, last = _number(first_text), _number(last_text)
        if first > last:
            raise ValueError(f"range {part!r} runs backwards")
        values = range(first, last)
    else:
        values = range(_number(part), _number(part) + 1)
    result = list(values)[::step]
    for value in result:
        if not low <= value <= high:
            raise ValueError(f"{value} is outside {low}..{high}")
    return result


def _number(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"not a number: {text!r}")
    return int(text)
