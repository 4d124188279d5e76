import re

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    if not re.fullmatch(r"\s*(?:[0-9]+[dhms]\s*)+", text):
        raise ValueError(f"not a duration: {text!r}")
    total = 0
    last = -1
    for number, unit in re.findall(r"([0-9]+)([dhms])", text):
        position = "dhms".index(unit)
        if position <= last:
            raise ValueError(f"unit {unit!r} repeated or out of order in {text!r}")
        last = position
        total += int(number) * _UNITS[unit]
    return total
