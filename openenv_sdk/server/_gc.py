"""The garbage collector's policy while a server runs (`ServerConfig.gc_full_interval_s`).

CPython's full collection walks every tracked object: with 10,000 sessions (~700,000 objects)
one takes ~0.5 s on a 2-core machine, a pause of every session. Under load the default
thresholds set one off every second or so: a request in flight survives two young
collections, so when it ends its objects count as long-lived garbage, and a busy server looks
to the collector like one whose heap keeps growing. In `benchmarks/bench_echo.py` at 10,000
sessions, 23 full collections took 13.6 s of a 30 s run (BLOCKING echo), half the server's time.

While a server runs:
- what is alive at start-up (modules, classes, the app) is frozen (`gc.freeze`): no full
  collection walks it again;
- allocations set off a full collection 100 times less often (the third threshold is 1,000,
  not 10); young collections, which free most cycles, are left as they are;
- a timer runs a full collection every `full_interval_s` in which none ran, so cyclic garbage
  that reached the old generation is freed within that time, whatever the load.

- freed memory goes back to the OS once many objects have been freed (thousands of sessions
  ended): `_trim.py`'s `malloc_trim`, checked a few times a second, run on a worker thread.

The thresholds are put back when the server stops. `PAUSES` times every collection in the
process (a `gc.callbacks` entry), for `/metrics` (`openenv_gc_pause_seconds`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

from ._trim import trim_when_shrunk

__all__ = ["FULL_COLLECTION_THRESHOLD", "PAUSES", "GcPauses", "full_collections", "serving_gc"]

FULL_COLLECTION_THRESHOLD = 1000
"""Young-generation collections between full collections set off by allocation (CPython's
default is 10, and a full collection also waits until a quarter of the old objects are new)."""


class GcPauses:
    """How long the collector has held this process, by generation, since this module was imported.

    Attributes:
        seconds: total pause per generation (0 young, 2 full).
        collections: collections per generation.
        longest_s: the longest single pause per generation.
    """

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self.longest_s = [0.0, 0.0, 0.0]
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        started, self._started = self._started, None
        if started is None:
            return
        pause, generation = time.perf_counter() - started, info["generation"]
        self.seconds[generation] += pause
        self.collections[generation] += 1
        self.longest_s[generation] = max(self.longest_s[generation], pause)


PAUSES = GcPauses()
gc.callbacks.append(PAUSES)  # once per process; two clock reads per collection


def full_collections() -> int:
    """Full (oldest-generation) collections run in this process so far, automatic or `gc.collect()`."""
    return int(gc.get_stats()[2]["collections"])


@contextlib.asynccontextmanager
async def serving_gc(full_interval_s: float | None) -> AsyncIterator[None]:
    """Apply the policy while the block runs (on the server's event loop); `None` leaves the
    collector as it is."""
    if full_interval_s is None:
        yield
        return
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(previous[0], previous[1], FULL_COLLECTION_THRESHOLD)
    timer = asyncio.create_task(_collect_every(full_interval_s), name="openenv-gc")
    trimmer = asyncio.create_task(trim_when_shrunk(), name="openenv-malloc-trim")
    try:
        yield
    finally:
        for task in (timer, trimmer):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        gc.set_threshold(*previous)


async def _collect_every(interval_s: float) -> None:
    seen = full_collections()
    while True:
        await asyncio.sleep(interval_s)
        if full_collections() == seen:  # none ran in this interval
            gc.collect()
        seen = full_collections()
