"""Why something failed, as a short key to count by: a failed tool call's or episode's message,
its first line, numbers as `N` (thread ids, ports, sizes), cut to `MAX_CAUSE_CHARS`.

`Tool 'q' failed: ProgrammingError: SQLite objects created in a thread can only be used in that
same thread. The object was created in thread id 1403 and this is thread id 1407.` from 238
calls is one cause counted 238 times, not 238 causes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["MAX_CAUSE_CHARS", "cause_of", "merge_causes"]

MAX_CAUSE_CHARS = 160
_NUMBER = re.compile(r"\d+")


def cause_of(message: str) -> str:
    """The cause key of an error message (see the module docstring)."""
    line = next((part.strip() for part in message.splitlines() if part.strip()), "") or "(no message)"
    line = _NUMBER.sub("N", line)
    return line if len(line) <= MAX_CAUSE_CHARS else line[: MAX_CAUSE_CHARS - 3] + "..."


def merge_causes(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Counts by cause summed over many, most frequent first."""
    total: Counter[str] = Counter()
    for one in counts:
        total.update(one)
    return dict(total.most_common())
