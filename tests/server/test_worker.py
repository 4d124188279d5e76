"""The worker pool and session lanes that run environments' blocking sync calls."""

from __future__ import annotations

import threading
import time

import pytest
from fixtures.servers import wait_until

from openenv_sdk.server._worker import EnvironmentAborted, SessionLane, WorkerPool


def test_a_task_that_hangs_does_not_hold_up_the_next() -> None:
    pool = WorkerPool(max_idle=1, idle_timeout_s=5.0)
    release = threading.Event()
    hung_lane, other_lane = SessionLane(pool), SessionLane(pool)
    hung = hung_lane.submit(release.wait, 30)
    try:
        assert other_lane.submit(lambda: "answered").result(timeout=5) == "answered"
        assert not hung.done()
        assert pool.threads == 2
    finally:
        release.set()
    assert hung.result(timeout=5) is True


def test_threads_end_once_idle() -> None:
    pool = WorkerPool(max_idle=2, idle_timeout_s=0.2)
    release = threading.Event()
    futures = [SessionLane(pool).submit(release.wait, 30) for _ in range(6)]
    # min_threads (4) at once, then one more each time the queue stalls for stall_s
    assert wait_until(lambda: pool.threads == 6, timeout_s=5)
    release.set()
    assert [f.result(timeout=5) for f in futures] == [True] * 6
    # beyond max_idle, threads end as their task does; the idle rest after idle_timeout_s
    assert wait_until(lambda: pool.threads <= 2, timeout_s=5)
    assert wait_until(lambda: pool.threads == 0, timeout_s=5)
    assert SessionLane(pool).submit(lambda: 7).result(timeout=5) == 7  # and starts again


def test_an_idle_thread_is_reused() -> None:
    pool = WorkerPool(max_idle=4, idle_timeout_s=5.0)
    lane = SessionLane(pool)
    seen = {lane.submit(threading.get_ident).result(timeout=5) for _ in range(20)}
    assert len(seen) == 1 and pool.threads == 1
    pool.shutdown()
    assert wait_until(lambda: pool.threads == 0, timeout_s=5)


def test_a_lane_runs_its_calls_one_at_a_time_in_order() -> None:
    pool = WorkerPool()
    lane = SessionLane(pool)
    release = threading.Event()
    ran: list[int] = []
    running = threading.Semaphore(1)

    def call(i: int) -> int:
        if not running.acquire(blocking=False):
            raise AssertionError("two calls of one lane ran at once")
        try:
            if i == 0:
                release.wait(30)
            ran.append(i)
            return i
        finally:
            running.release()

    futures = [lane.submit(call, i) for i in range(5)]
    time.sleep(0.1)
    assert ran == [] and not any(f.done() for f in futures)  # queued behind the first call
    release.set()
    assert [f.result(timeout=5) for f in futures] == [0, 1, 2, 3, 4]
    assert ran == [0, 1, 2, 3, 4]


def test_a_base_exception_becomes_environment_aborted_and_the_thread_goes_on() -> None:
    pool = WorkerPool(max_idle=1)
    lane = SessionLane(pool)

    def leave() -> None:
        raise SystemExit(2)

    with pytest.raises(EnvironmentAborted, match="SystemExit: 2"):
        lane.submit(leave).result(timeout=5)
    with pytest.raises(ValueError, match="bad"):
        lane.submit(lambda: (_ for _ in ()).throw(ValueError("bad"))).result(timeout=5)
    assert lane.submit(lambda: "still here").result(timeout=5) == "still here"
    assert pool.threads == 1


def test_a_task_behind_calls_that_hang_waits_about_stall_s() -> None:
    pool = WorkerPool(min_threads=2, stall_s=0.05)
    release = threading.Event()
    hung = [SessionLane(pool).submit(release.wait, 30) for _ in range(2)]
    try:
        started = time.monotonic()
        assert SessionLane(pool).submit(lambda: "answered").result(timeout=5) == "answered"
        waited_s = time.monotonic() - started
        assert 0.03 <= waited_s < 1.0, waited_s  # a stall (no task ended) started a third thread
        assert pool.threads == 3
        assert not any(f.done() for f in hung)
    finally:
        release.set()


def test_a_burst_of_quick_calls_runs_on_a_few_threads() -> None:
    # a thread per call would start up to one per lane; the queue lets a few threads run them all
    pool = WorkerPool(min_threads=4, stall_s=0.05)
    futures = [SessionLane(pool).submit(lambda i=i: i * 2) for i in range(2000)]
    assert [f.result(timeout=10) for f in futures] == [i * 2 for i in range(2000)]
    assert pool.threads <= 8, pool.threads
