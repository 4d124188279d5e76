"""cronlite: cron expressions."""

from .fields import FIELDS, parse_field
from .schedule import CronSchedule

__all__ = ["FIELDS", "CronSchedule", "parse_field"]
