"""A session's sync calls run on one thread by default, so thread-bound resources just work.

The environment is written the natural way (issue 27): `sqlite3.connect` in `reset`, tools that
query it, no class flag. 32 sessions play at once through a real server (uvicorn on a loopback
port, WebSocket clients on their own threads).
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fixtures.servers import ask, serve, ws_url
from websockets.sync.client import connect

from openenv_sdk import Environment, create_app, tool
from openenv_sdk.server._worker import AffinityPool, PinnedLane

SESSIONS = 32
CALLS = 12


class SqliteQuiz(Environment):
    """A database per episode, opened in `reset`, queried by tools."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> Any:
        observation = super().reset(seed=seed, episode_id=episode_id)
        self.db = sqlite3.connect(":memory:")  # bound to this thread (check_same_thread)
        self.db.execute("CREATE TABLE t (n INTEGER)")
        self.db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(10)])
        return observation

    @tool
    def total(self, above: int = 0) -> int:
        """Sum of the rows above a number."""
        return int(self.db.execute("SELECT SUM(n) FROM t WHERE n > ?", (above,)).fetchone()[0] or 0)

    @tool
    def insert(self, n: int) -> int:
        """Add a row; the row count."""
        self.db.execute("INSERT INTO t VALUES (?)", (n,))
        return int(self.db.execute("SELECT COUNT(*) FROM t").fetchone()[0])

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            db.close()


class FreeThreadedQuiz(SqliteQuiz):
    """The same class, claiming to be free-threaded (today's default before issue 27)."""

    THREAD_AFFINITY = False


def _play(url: str, barrier: threading.Barrier) -> list[str]:
    """One session: reset, then tool calls; the error types of the calls that failed."""
    errors: list[str] = []
    with connect(ws_url(url)) as ws:
        ask(ws, "reset", {})
        barrier.wait(timeout=30)  # every session is open before any calls: they interleave
        for i in range(CALLS):
            call = {"tool": "insert", "arguments": {"n": i}} if i % 2 else {"tool": "total", "arguments": {}}
            observation = ask(ws, "step", call, timeout_s=30)["data"]["observation"]
            if observation.get("error"):
                errors.append(f"{observation['error']['error_type']}: {observation['error'].get('message', '')}")
    return errors


def _run_sessions(env_cls: type[Environment], *, pinned_threads: int | None = None) -> list[str]:
    barrier = threading.Barrier(SESSIONS)
    app = create_app(env_cls)
    if pinned_threads is not None:  # fewer threads than sessions: they share, each pinned to one
        app.state.openenv.sessions.pinned = AffinityPool(max_threads=pinned_threads)
    with serve(app) as url, ThreadPoolExecutor(SESSIONS) as pool:
        results = list(pool.map(lambda _: _play(url, barrier), range(SESSIONS)))
        if pinned_threads is not None:  # the threads that ran them (idle now, not yet ended)
            # they shared (a thread whose call ran past 50 ms takes no new session: more may start)
            assert 1 <= app.state.openenv.sessions.pinned.threads < SESSIONS
    return [error for errors in results for error in errors]


def test_sqlite_opened_in_reset_works_under_32_concurrent_sessions() -> None:
    assert SqliteQuiz.THREAD_AFFINITY is None  # no flag: the default
    assert _run_sessions(SqliteQuiz) == []


def test_sessions_sharing_pinned_threads_keep_their_thread() -> None:
    assert _run_sessions(SqliteQuiz, pinned_threads=4) == []  # 32 sessions on 4 threads


def test_a_free_threaded_class_with_a_thread_bound_resource_fails_under_load() -> None:
    # what the default did before: calls on any pool thread, and sqlite refuses them
    errors = _run_sessions(FreeThreadedQuiz)
    assert errors, "free-threaded dispatch kept every session on one thread; the test above proves nothing"
    assert any("same thread" in error for error in errors), errors[:3]


def test_pinned_sessions_get_threads_of_their_own_then_share() -> None:
    pool = AffinityPool(max_threads=4, idle_timeout_s=5.0, name="test-pinned")
    lanes = [PinnedLane(pool) for _ in range(10)]
    idents = [lane.submit(threading.get_ident).result(timeout=5) for lane in lanes]
    assert len(set(idents[:4])) == 4 and pool.threads == 4  # one each while under max_threads
    assert set(idents[4:]) <= set(idents[:4])  # then shared
    for lane, ident in zip(lanes, idents, strict=True):  # and each session stays on its thread
        assert all(lane.submit(threading.get_ident).result(timeout=5) == ident for _ in range(5))
    for lane in lanes:
        lane.shutdown()
    pool.shutdown()


def test_a_new_session_is_not_pinned_behind_a_call_that_hangs() -> None:
    pool = AffinityPool(max_threads=1, idle_timeout_s=5.0, stall_s=0.05, name="test-pinned")
    release = threading.Event()
    hung = PinnedLane(pool)
    hung_future = hung.submit(release.wait, 30)
    try:
        fresh = PinnedLane(pool)
        threading.Event().wait(0.1)  # past stall_s: the hung call's thread takes no new session
        assert fresh.submit(lambda: "answered").result(timeout=2) == "answered"
        assert pool.threads == 2
    finally:
        release.set()
    assert hung_future.result(timeout=5) is True
    hung.shutdown()
    fresh.shutdown()
    pool.shutdown()


@pytest.mark.parametrize("affinity", [None, True])
def test_close_runs_on_the_session_thread(affinity: bool | None) -> None:
    seen: list[int] = []
    failures: list[str] = []

    class Closing(SqliteQuiz):
        THREAD_AFFINITY = affinity

        def close(self) -> None:
            seen.append(threading.get_ident())
            try:
                super().close()  # sqlite's close raises on another thread
            except sqlite3.ProgrammingError as e:
                failures.append(str(e))

    with serve(create_app(Closing)) as url:
        with connect(ws_url(url)) as ws:
            ask(ws, "reset", {})
            assert ask(ws, "step", {"tool": "total", "arguments": {}})["data"]["observation"]["result"]["data"] == 45
        for _ in range(200):
            if seen:
                break
            threading.Event().wait(0.02)
    assert seen and seen[0] != threading.get_ident()
    assert failures == []
