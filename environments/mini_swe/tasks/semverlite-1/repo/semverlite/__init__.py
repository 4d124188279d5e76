"""semverlite: semantic versions."""

from .ranges import max_satisfying, satisfies
from .version import Version

__all__ = ["Version", "max_satisfying", "satisfies"]
