"""A process's CPU time from /proc, and waiting for a freshly started server to go idle."""

from __future__ import annotations

import os
import time

__all__ = ["process_cpu_s", "wait_until_idle"]


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds used by `pid` so far (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(pid: int, *, window_s: float = 0.5, busy_share: float = 0.05, timeout_s: float) -> float:
    """Wait until `pid` uses under `busy_share` of a core over `window_s` (its start-up work
    done: our server imports the official MCP server in the background after it answers);
    return the seconds waited."""
    started = time.monotonic()
    last = process_cpu_s(pid)
    while time.monotonic() - started < timeout_s:
        time.sleep(window_s)
        now = process_cpu_s(pid)
        if now - last < busy_share * window_s:
            break
        last = now
    return time.monotonic() - started
