"""The churn workload of bench_echo.py (`--churn N`): N sessions at once, each connects, resets,
steps S times and closes; then the server's RSS right after.

Run by client worker processes (`churn_worker`), with the `websockets` client or the raw-frame
one (`_rawws.RawWebSocket`). Times are wall-clock (`time.time()`), comparable across processes.
Every `PROGRESS_EVERY_S` a worker puts `("progress", pid, sessions ended, steps)` on its queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import threading
import time
from collections import Counter
from typing import Any

from _rawws import RawWebSocket

__all__ = ["PROGRESS_EVERY_S", "ChurnConfig", "ChurnResult", "churn_worker"]

PROGRESS_EVERY_S = 2.0


@dataclasses.dataclass
class ChurnConfig:
    url: str
    sessions: int
    steps: int
    client: str  # "websockets" or "raw"
    connect_parallelism: int
    timeout_s: float
    reset_frame: str
    step_frame: str
    hold: bool = True
    """Each session waits after its reset until every session has reset (or failed), so that
    all are open at once before any steps; False: each steps at once."""
    all_workers: Any = None
    """With several client processes: a `multiprocessing.Barrier` of them all, so that `hold`
    waits for every worker's sessions, not only this one's (None: one process)."""
    hold_timeout_s: float = 600.0
    """The most a worker waits at `all_workers` for the others (then its sessions step anyway)."""


@dataclasses.dataclass
class ChurnResult:
    """One server, one client, one run of the churn workload."""

    target: str
    client: str
    sessions: int
    ok_sessions: int = 0
    ok_steps: int = 0
    wall_s: float = 0.0
    baseline_rss_kib: int = 0
    peak_rss_kib: int = 0
    """The highest of the server's RSS sampled at each progress report (every ~2 s)."""
    after_rss_kib: int = 0
    round: int = 1
    errors: dict[str, int] = dataclasses.field(default_factory=dict)
    note: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.ok_steps / self.wall_s if self.wall_s > 0 else 0.0


def churn_worker(cfg: ChurnConfig, out: Any) -> None:
    """A client process: run `cfg.sessions` episodes at once; put `("done", ok_sessions,
    ok_steps, t_start, t_end, errors)` on `out`."""
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    try:
        out.put(("done", *asyncio.run(_churn(cfg, out))))
    except BaseException as e:
        out.put(("crash", os.getpid(), f"{type(e).__name__}: {e}"))


def _error_key(e: BaseException) -> str:
    text = str(e).splitlines()[0][:100] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


async def _churn(cfg: ChurnConfig, out: Any) -> tuple[int, int, float, float, dict[str, int]]:
    from urllib.parse import urlsplit

    import websockets

    url = urlsplit(cfg.url)
    gate = asyncio.Semaphore(cfg.connect_parallelism)
    errors: Counter[str] = Counter()
    tally = [0, 0]  # sessions ended (either way), steps answered
    opened = [0]  # sessions reset, or failed before it
    all_open = asyncio.Event()

    def one_open() -> None:
        opened[0] += 1
        if opened[0] == cfg.sessions:
            if cfg.all_workers is None:
                all_open.set()
            else:  # the other workers' sessions too: wait for them on a thread, off this loop
                waits.append(asyncio.ensure_future(every_worker_open()))

    async def every_worker_open() -> None:
        try:
            await asyncio.to_thread(cfg.all_workers.wait, cfg.hold_timeout_s)
        except threading.BrokenBarrierError:
            errors["the other client processes did not open their sessions in time"] += 1
        all_open.set()

    waits: list[asyncio.Future[None]] = []  # the barrier's wait, kept referenced

    async def hold(mine: list[bool]) -> None:
        mine[0] = True
        one_open()
        if cfg.hold:
            await all_open.wait()
    raw_reset = RawWebSocket.frame(0x1, cfg.reset_frame.encode())
    raw_step = RawWebSocket.frame(0x1, cfg.step_frame.encode())

    async def episode() -> int:
        mine = [False]  # this session counted among the open ones
        try:
            return await steps_of(mine)
        finally:
            if not mine[0]:  # it failed before its reset ended: the others need not wait for it
                one_open()

    async def steps_of(mine: list[bool]) -> int:
        steps = 0
        async with gate:  # the connection's opening, as a client fleet would pace it
            if cfg.client == "raw":
                conn: Any = await RawWebSocket.open(url.hostname or "127.0.0.1", url.port or 80, url.path, cfg.timeout_s)
            else:
                conn = await websockets.connect(
                    cfg.url, compression=None, ping_interval=None, open_timeout=cfg.timeout_s, proxy=None
                )
        try:
            if cfg.client == "raw":
                reply = await conn.request(raw_reset, cfg.timeout_s)
                await hold(mine)
                for _ in range(cfg.steps):
                    reply = await conn.request(raw_step, cfg.timeout_s)
                    if b"observation" not in reply[:40]:
                        raise RuntimeError(f"not an observation: {reply[:200]!r}")
                    steps += 1
                    tally[1] += 1
            else:
                await conn.send(cfg.reset_frame)
                await asyncio.wait_for(conn.recv(), cfg.timeout_s)
                await hold(mine)
                for _ in range(cfg.steps):
                    await conn.send(cfg.step_frame)
                    reply = await asyncio.wait_for(conn.recv(), cfg.timeout_s)
                    if "observation" not in reply[:40]:
                        raise RuntimeError(f"not an observation: {reply[:200]!r}")
                    steps += 1
                    tally[1] += 1
        finally:
            await conn.close()
        return steps

    async def counted() -> int:
        try:
            return await episode()
        except Exception as e:
            errors[_error_key(e)] += 1
            return -1
        finally:
            tally[0] += 1

    async def report() -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            out.put(("progress", os.getpid(), tally[0], tally[1]))

    reporter = asyncio.create_task(report())
    t_start = time.time()
    try:
        done = await asyncio.gather(*(counted() for _ in range(cfg.sessions)))
    finally:
        reporter.cancel()
    t_end = time.time()
    ok = [n for n in done if n == cfg.steps]
    return len(ok), sum(n for n in done if n > 0), t_start, t_end, dict(errors)
