"""`CronSchedule`: when does an expression fire?"""

from __future__ import annotations

from datetime import datetime, timedelta

from .fields import FIELDS, parse_field

MAX_YEARS = 5


class CronSchedule:
    def __init__(self, expression: str) -> None:
        parts = expression.split()
        if len(parts) != 5:
            raise ValueError(f"a cron expression has 5 fields, got {len(parts)}: {expression!r}")
        self.expression = expression
        allowed = {name: parse_field(text, *FIELDS[name]) for name, text in zip(FIELDS, parts)}
        self.minutes = allowed["minute"]
        self.hours = allowed["hour"]
        self.days = allowed["day"]
        self.months = allowed["month"]
        self.weekdays = allowed["weekday"]

    def matches(self, when: datetime) -> bool:
        return self._day_matches(when) and when.hour in self.hours and when.minute in self.minutes

    def _day_matches(self, when: datetime) -> bool:
        weekday = (when.weekday() + 1) % 7  # cron: 0 = Sunday
        return when.month in self.months and when.day in self.days and weekday in self.weekdays

    def next_run(self, after: datetime) -> datetime:
        """The first matching minute strictly after `after`.

        Raises:
            ValueError: nothing matches within five years (e.g. 31 February).
        """
        start = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.replace(hour=0, minute=0)
        for _ in range(366 * MAX_YEARS):
            if self._day_matches(day):
                for hour in self.hours:
                    for minute in self.minutes:
                        candidate = day.replace(hour=hour, minute=minute)
                        if candidate >= start:
                            return candidate
            day += timedelta(days=1)
        raise ValueError(f"{self.expression!r} does not fire within {MAX_YEARS} years")

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r})"
