"""`Transcript`: the agent's tool calls in one episode, kept within a byte and a count budget.

Graders read it through the orchestrator call `transcript`. Each entry is
`{"tool", "arguments", "output", "error", "source"}` (`source`: `step` or `mcp`); an entry too
big for its share of the budget is cut (`"truncated": true`), and the oldest entries go first.
`cut` and `shrink` bound text for the transcript and for tool results alike.
"""

from __future__ import annotations

import collections
import json
from typing import Any

__all__ = ["MAX_TRANSCRIPT_CALLS", "Transcript", "cut", "json_size", "shrink"]

MAX_TRANSCRIPT_CALLS = 10_000
"""The most tool calls one episode's transcript keeps (its bytes are `max_transcript_bytes`)."""


class Transcript:
    """One episode's tool calls, oldest first, within `max_bytes` and `max_calls`."""

    __slots__ = ("_entries", "_bytes", "_dropped", "max_bytes", "max_calls")

    def __init__(self, *, max_bytes: int, max_calls: int = MAX_TRANSCRIPT_CALLS) -> None:
        self.max_bytes = max_bytes
        self.max_calls = max_calls
        # made at the episode's first tool call: a deque holds a 64-slot block from the start
        # (~0.7 KiB a session), and many sessions call no tool (orchestrator-only steps)
        self._entries: collections.deque[dict[str, Any]] | None = None
        self._bytes = 0
        self._dropped = 0

    def clear(self) -> None:
        """A new episode: nothing recorded, nothing dropped."""
        self._entries = None
        self._bytes = self._dropped = 0

    def entries(self) -> list[dict[str, Any]]:
        """The calls, oldest first; when older calls were dropped to stay within the budget,
        a first entry says how many."""
        entries = list(self._entries or ())
        if self._dropped:
            note = (
                f"{self._dropped} earlier tool call(s) were dropped: the transcript keeps at most "
                f"{self.max_bytes} bytes and {self.max_calls} calls"
            )
            entries.insert(
                0,
                {"tool": None, "arguments": None, "output": None, "error": note, "source": "server",
                 "dropped": self._dropped},
            )
        return entries

    def record(self, name: str, arguments: Any, output: str | None, error: str | None, source: str) -> None:
        """Keep one call: a big argument or output is cut (the entry says `"truncated": true`),
        and the oldest entries go first."""
        budget = max(1024, self.max_bytes // 4)  # one entry's share
        entry: dict[str, Any] = {"tool": name, "arguments": arguments, "output": output, "error": error, "source": source}
        size = json_size(entry)
        if size > budget:
            entry = {
                "tool": name,
                "arguments": shrink(arguments, budget // 4),
                "output": cut(output, budget // 2, "output") if output is not None else None,
                "error": cut(error, budget // 4, "error") if error is not None else None,
                "source": source,
                "truncated": True,
            }
            size = json_size(entry)
            if size > budget:
                entry["arguments"] = {"_truncated": f"arguments of {json_size(arguments)} bytes were not kept"}
                size = json_size(entry)
        entries = self._entries
        if entries is None:
            entries = self._entries = collections.deque()
        entries.append(entry)
        self._bytes += size
        while entries and (self._bytes > self.max_bytes or len(entries) > self.max_calls):
            self._bytes -= json_size(entries.popleft())
            self._dropped += 1


def json_size(value: Any) -> int:
    """`value`'s size as JSON, in bytes (its repr's length when it is not JSON)."""
    try:
        return len(json.dumps(value, default=str).encode())
    except (TypeError, ValueError, RecursionError):
        return len(repr(value))


def cut(text: str, max_bytes: int, what: str) -> str:
    """`text` within `max_bytes` of UTF-8, with a marker saying what was cut."""
    if len(text) * 4 <= max_bytes:
        return text
    raw = text.encode()
    if len(raw) <= max_bytes:
        return text
    kept = raw[:max_bytes].decode("utf-8", errors="ignore")
    return f"{kept}\n[... {what} truncated by the server: {len(raw)} bytes, the limit is {max_bytes} ...]"


def shrink(value: Any, max_string_bytes: int) -> Any:
    """`value` with every long string cut to `max_string_bytes`."""
    if isinstance(value, str):
        return cut(value, max_string_bytes, "string")
    if isinstance(value, dict):
        return {k: shrink(v, max_string_bytes) for k, v in value.items()}
    if isinstance(value, list):
        return [shrink(v, max_string_bytes) for v in value]
    return value
