"""Giving freed memory back to the OS once many sessions have ended (glibc's `malloc_trim`).

When thousands of sessions close, Python frees their objects, but the C allocator keeps the
pages it got for them: glibc returns memory to the OS only from the top of its heap, so a heap
with a few live blocks scattered through it keeps its whole size, and the server's RSS stays
at its peak (375 MiB after 10,000 sessions, where it had started at ~90). `malloc_trim(0)`
releases every free page in glibc's heaps (`madvise(MADV_DONTNEED)`), wherever it lies.

It runs off the hot path: `ShrinkWatch.check` reads one counter (`sys.getallocatedblocks`,
Python's live small objects; from 3.12 a walk over pymalloc's pool headers, tens of
microseconds for a few hundred MiB) a few times a second, and only when that count has fallen far
below its highest since the last trim (many sessions ended) is the trim run, on a worker
thread (ctypes lets the GIL go meanwhile). Where glibc is absent (musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import sys
from collections.abc import Callable

__all__ = ["SHRINK_FRACTION", "ShrinkWatch", "malloc_trim", "trim_when_shrunk"]

logger = logging.getLogger("openenv_sdk.server")

SHRINK_FRACTION = 0.25
"""A trim runs once live objects have fallen by this share of their highest count since the last trim."""

MIN_SHRINK_BLOCKS = 20_000
"""...and by at least this many (~1-2 MiB of objects, ~100 echo sessions): small ebbs are not worth a trim."""

CHECK_EVERY_S = 0.25


def _load_malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols: glibc's when it is the C library
        fn = libc.malloc_trim
    except (OSError, AttributeError):  # musl has no malloc_trim
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


_MALLOC_TRIM = _load_malloc_trim()


def malloc_trim() -> bool:
    """Return the C heap's free pages to the OS; whether glibc did release any (False where
    there is no glibc)."""
    return bool(_MALLOC_TRIM(0)) if _MALLOC_TRIM is not None else False


class ShrinkWatch:
    """Says when live objects have fallen far enough below their high since the last trim."""

    __slots__ = ("high", "last", "fraction", "min_blocks", "trims", "count")

    def __init__(
        self,
        fraction: float = SHRINK_FRACTION,
        min_blocks: int = MIN_SHRINK_BLOCKS,
        count: Callable[[], int] = sys.getallocatedblocks,
    ) -> None:
        self.count = count  # live objects (the process's, by default: every thread's allocations count)
        self.high = self.last = count()
        self.fraction = fraction
        self.min_blocks = min_blocks
        self.trims = 0

    def check(self) -> bool:
        """Whether to trim now: the count has fallen far below its high, and has stopped falling
        (sessions that close free their connections' C buffers over the next turns of the loop:
        a trim in the middle of the ebb would miss them). The high is then reset to the count now."""
        blocks = self.count()
        last, self.last = self.last, blocks
        if blocks > self.high:
            self.high = blocks
            return False
        fallen = self.high - blocks
        if fallen < self.min_blocks or fallen < self.high * self.fraction or last - blocks > fallen // 20:
            return False
        self.high = blocks
        self.trims += 1
        return True


async def trim_when_shrunk(watch: ShrinkWatch | None = None, check_every_s: float = CHECK_EVERY_S) -> None:
    """Run until cancelled: trim the C heap whenever `watch` says many objects were freed."""
    if _MALLOC_TRIM is None:
        return
    watch = watch or ShrinkWatch()
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(check_every_s)
        if watch.check():
            # first a full collection: what the ended sessions left in reference cycles (with all
            # it holds) is freed now, not at the next timed one; what it frees is trimmed too
            gc.collect()
            watch.high = watch.last = watch.count()
            with contextlib.suppress(RuntimeError):  # the executor is shutting down with the server
                await loop.run_in_executor(None, malloc_trim)
