"""Memory that thousands of ended sessions held goes back to the OS soon after they close
(`openenv_sdk/server/_trim.py`: a full collection and glibc's `malloc_trim` once Python's live
objects have fallen far below their high); without it the server's RSS stayed at its peak."""

from __future__ import annotations

import asyncio
import contextlib
import json
import platform
import resource
import time
from collections.abc import Iterator

import pytest
from websockets.asyncio.client import ClientConnection, connect

from openenv_sdk.server._trim import _MALLOC_TRIM, ShrinkWatch

from .served import ECHO_DIR, rss_bytes, serve_folder

SESSIONS, STEPS, CONNECT_AT_ONCE = 1500, 3, 100
WITHIN_S = 5.0


@contextlib.contextmanager
def _file_limit(need: int) -> Iterator[None]:
    """Enough descriptors for `need` sockets here and in the server (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = need if hard == resource.RLIM_INFINITY else min(need, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def _hold_sessions(url: str, pid: int) -> tuple[int, int]:
    """Open SESSIONS sessions at once, reset and step each, close them all; the server's RSS with
    all open (after the steps) and how many sessions answered every call."""
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)

    async def open_one() -> ClientConnection:
        async with gate:
            ws = await connect(url, open_timeout=30, ping_interval=None, compression=None)
        await ws.send('{"type": "reset", "data": {}}')
        assert json.loads(await ws.recv())["type"] == "observation"
        return ws

    sockets = await asyncio.gather(*(open_one() for _ in range(SESSIONS)))

    async def steps(ws: ClientConnection) -> int:
        for i in range(STEPS):
            await ws.send(json.dumps({"type": "step", "data": {"message": "trim"}, "id": i}))
            assert json.loads(await ws.recv())["type"] == "observation"
        return 1

    answered = sum(await asyncio.gather(*(steps(ws) for ws in sockets)))
    peak = rss_bytes(pid)
    await asyncio.gather(*(ws.close() for ws in sockets))
    return peak, answered


@pytest.mark.skipif(_MALLOC_TRIM is None, reason="glibc only: elsewhere the trim is a no-op by design")
def test_rss_falls_well_below_its_peak_within_seconds_of_many_sessions_closing() -> None:
    """1,500 sessions at once, then all closed: within 5 s the server's RSS falls by at least a
    tenth of what the sessions added (measured: 2,000 echo sessions, 91 -> 142 MiB, 142 MiB 1 s
    after they closed before; 132 after, of which ~5 MiB from the trim and ~6 from the collection)."""
    with _file_limit(SESSIONS + 1024), serve_folder(ECHO_DIR, "--max-sessions", str(SESSIONS + 16)) as (process, url):
        time.sleep(1.0)  # the official MCP server's import in the background has ended
        idle = rss_bytes(process.pid)
        peak, answered = asyncio.run(_hold_sessions(url.replace("http://", "ws://") + "/ws", process.pid))
        assert answered == SESSIONS
        deadline, lowest = time.monotonic() + WITHIN_S, peak
        while time.monotonic() < deadline and peak - lowest < (peak - idle) * 0.10:
            time.sleep(0.25)
            lowest = min(lowest, rss_bytes(process.pid))
    mib = {k: round(v / 2**20, 1) for k, v in {"idle": idle, "peak": peak, "lowest after close": lowest}.items()}
    assert peak - idle > 10 * 2**20, f"the sessions should have grown the server: {mib}"
    assert peak - lowest >= (peak - idle) * 0.10, f"RSS did not come down within {WITHIN_S} s: {mib}"


def test_a_trim_waits_for_a_large_fall_to_end() -> None:
    """ShrinkWatch: no trim while objects grow or fall little; after a large fall, not while it
    is still falling, then once. The count is fed in: the process's own moves with whatever other
    threads of the test session allocate between two checks."""
    counts = iter([100_000, 400_000, 370_000, 100_000, 99_000, 99_000, 99_000])
    watch = ShrinkWatch(fraction=0.25, min_blocks=20_000, count=lambda: next(counts))
    assert not watch.check()  # grown: a new high
    assert not watch.check()  # fell, but by far less than a quarter
    assert not watch.check()  # a large fall, still under way at this check
    assert watch.check()  # it has stopped (fell by less than 1/20 of the fall since the last check): trim
    assert not watch.check()  # once: the high is now the count after the fall
    assert watch.trims == 1


def test_the_watch_counts_the_process_live_objects_by_default() -> None:
    watch = ShrinkWatch(fraction=0.25, min_blocks=20_000)
    hoard = [[i] for i in range(300_000)]  # ~300,000 small objects: lists and ints
    watch.check()
    assert watch.high >= 300_000, watch.high
    del hoard


def test_malloc_trim_is_found_on_glibc() -> None:
    if platform.libc_ver()[0] == "glibc":
        assert _MALLOC_TRIM is not None
