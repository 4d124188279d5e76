"""How much memory a served environment holds: a local server's process tree, or a container's cgroup."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["container_memory", "memory_reader", "process_tree_rss"]

_PROC = Path("/proc")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in (_PROC / str(pid) / "task").glob("*"):
        try:
            out += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _rss_bytes(pid: int) -> int:
    try:
        for line in (_PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def process_tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants, in bytes (0 once it is gone)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        total += _rss_bytes(current)
        todo += _children(current)
    return total


def container_memory(container: Any) -> int:
    """A container's memory use in bytes as the engine reports it, less its inactive page cache."""
    stats = container.stats(stream=False) or {}
    memory = stats.get("memory_stats") or {}
    usage = int(memory.get("usage") or 0)
    details = memory.get("stats") or {}
    cache = int(details.get("inactive_file") or details.get("total_inactive_file") or 0)
    return max(0, usage - cache)


def memory_reader(provider: Any) -> Callable[[], int] | None:
    """A function giving the served environment's memory in bytes now, or None when it cannot be read."""
    pid = getattr(provider, "pid", None)
    if isinstance(pid, int) and os.path.isdir(f"/proc/{pid}"):
        return lambda: process_tree_rss(pid)
    container = getattr(provider, "_container", None)
    if container is not None and hasattr(container, "stats"):
        return lambda: container_memory(container)
    return None
