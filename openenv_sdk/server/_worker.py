"""Running environment code so that nothing it does can stop the server.

- Blocking sync calls run off the event loop, one at a time per session, in order
  (`SessionLane`), on the threads of one elastic pool (`WorkerPool`): a call takes an idle
  thread or starts a new one, never waits for a busy one. A call that hangs holds its own thread
  only; other sessions never wait behind it. Threads go as calls end (a few stay idle), so
  10,000 sessions that are between calls hold no thread each.
- An environment with `THREAD_AFFINITY` gets its own thread per session instead
  (`SessionWorker`), for libraries with thread-local state.
- A `BaseException` that environment code raises (`SystemExit` from argparse, say,
  `KeyboardInterrupt`, `GeneratorExit`, a stray `CancelledError`) becomes `EnvironmentAborted`,
  a plain `Exception`, before it reaches an asyncio task (where `SystemExit` would stop the
  event loop) or a thread (where it would end the thread silently).
- `AbandonedCalls` counts the calls that timed out and still run on their thread, so that the
  server can bound them.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = [
    "AbandonedCalls",
    "CallRunner",
    "EnvironmentAborted",
    "SessionLane",
    "SessionWorker",
    "WorkerPool",
    "guard_async",
    "guard_sync",
]


class EnvironmentAborted(Exception):
    """Environment code raised a `BaseException` that is not an `Exception` (`SystemExit`, ...).

    Attributes:
        original: what the environment raised.
    """

    def __init__(self, original: BaseException) -> None:
        detail = str(original)
        super().__init__(f"{type(original).__name__}{': ' + detail if detail else ''}")
        self.original = original


def _own_cancellation() -> bool:
    """Whether the running task itself is being cancelled (the server's cancellation, not the env's)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def guard_sync(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call `fn`; a `BaseException` that is not an `Exception` comes out as `EnvironmentAborted`."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        raise
    except BaseException as e:
        raise EnvironmentAborted(e) from e


async def guard_async(awaitable: Awaitable[Any]) -> Any:
    """Await environment code; its `BaseException`s come out as `EnvironmentAborted`, except a
    `CancelledError` when this task is really being cancelled (a timeout, a shutdown)."""
    try:
        return await awaitable
    except Exception:
        raise
    except asyncio.CancelledError as e:
        if _own_cancellation():
            raise
        raise EnvironmentAborted(e) from e
    except BaseException as e:
        raise EnvironmentAborted(e) from e


_STOP = object()

_Job = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def _run_job(job: _Job) -> None:
    """Run one call into its future; nothing it raises escapes (the thread goes on)."""
    future, fn, args, kwargs = job
    if not future.set_running_or_notify_cancel():
        return
    try:
        value = fn(*args, **kwargs)
    except Exception as e:
        future.set_exception(e)
    except BaseException as e:  # SystemExit would end this thread silently
        future.set_exception(EnvironmentAborted(e))
    else:
        future.set_result(value)


class CallRunner(Protocol):
    """Runs one session's sync calls off the event loop, one at a time, in submission order."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue `fn(*args, **kwargs)` behind the session's earlier calls; its future."""
        ...

    def shutdown(self) -> None:
        """No more calls: free what the runner holds once the calls already submitted have run."""
        ...


class SessionWorker:
    """One daemon thread that runs one session's sync calls, in order (`THREAD_AFFINITY`).

    A daemon thread, not a `ThreadPoolExecutor`'s: the interpreter's exit must not wait for a
    call that hangs forever.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def shutdown(self) -> None:
        """End the thread once the calls already submitted have run."""
        self._queue.put(_STOP)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            _run_job(item)
            del item


class WorkerPool:
    """Daemon threads shared by every session, started on demand.

    `run(task)` hands `task` to an idle thread, or starts a new thread when none is idle: a task
    never waits for a busy thread, so one that hangs holds up nobody else. A thread that finishes
    waits up to `idle_timeout_s` for the next task, and ends then, or at once when `max_idle`
    threads already wait. So the threads alive are the tasks running plus at most `max_idle`.
    Daemon threads, not a `ThreadPoolExecutor`'s: the interpreter's exit must not wait for a
    task that hangs forever.

    Args:
        max_idle: the most threads kept waiting for work.
        idle_timeout_s: how long an idle thread waits for work before it ends.
        name: the threads' name prefix.
    """

    def __init__(self, *, max_idle: int = 16, idle_timeout_s: float = 10.0, name: str = "openenv-worker") -> None:
        self.max_idle = max_idle
        self.idle_timeout_s = idle_timeout_s
        self._name = name
        self._numbers = itertools.count(1)
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Threads waiting for a task less the tasks queued for them: > 0 means a task put on the
        # queue now is taken at once.
        self._idle = 0
        self._threads = 0

    @property
    def threads(self) -> int:
        """Threads alive: running a task, or idle."""
        with self._lock:
            return self._threads

    def run(self, task: Callable[[], None]) -> None:
        """Run `task()` on a thread of the pool (it must not raise)."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._tasks.put(task)
                return
            self._threads += 1
        name = f"{self._name}-{next(self._numbers)}"
        thread = threading.Thread(target=self._loop, args=(task,), name=name, daemon=True)
        try:
            thread.start()
        except BaseException:  # RuntimeError: can't start new thread
            with self._lock:
                self._threads -= 1
            raise

    def shutdown(self) -> None:
        """End the idle threads now (running tasks finish; a later `run` starts threads again)."""
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._tasks.put(_STOP)

    def _loop(self, task: Callable[[], None]) -> None:
        while True:
            task()
            del task
            with self._lock:
                if self._idle >= self.max_idle:
                    self._threads -= 1
                    return
                self._idle += 1
            while True:
                try:
                    task = self._tasks.get(timeout=self.idle_timeout_s)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._idle > 0:  # not counted on for a queued task: leave
                            self._idle -= 1
                            self._threads -= 1
                            return
                    # every idle thread has a task coming; this one is among them
            if task is _STOP:
                with self._lock:
                    self._threads -= 1
                return


class SessionLane:
    """One session's sync calls, one at a time and in order, on the threads of a `WorkerPool`.

    A lane holds no thread between calls. Calls submitted while one runs (a `close()` queued
    behind a call that hangs) run after it, on its thread.
    """

    __slots__ = ("_lock", "_pending", "_pool", "_running")

    def __init__(self, pool: WorkerPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._pending: collections.deque[_Job] = collections.deque()
        self._running = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        job: _Job = (future, fn, args, kwargs)
        with self._lock:
            if self._running:
                self._pending.append(job)
                return future
            self._running = True
        try:
            self._pool.run(lambda: self._drain(job))
        except BaseException:
            with self._lock:
                self._running = False
            raise
        return future

    def shutdown(self) -> None:
        """Nothing to free: the lane's calls already submitted still run."""

    def _drain(self, job: _Job) -> None:
        while True:
            _run_job(job)
            with self._lock:
                if not self._pending:
                    self._running = False
                    return
                job = self._pending.popleft()


class AbandonedCalls:
    """Calls that timed out and still run on their session's thread (at most one per thread)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()

    def add(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._running.add(future)
        future.add_done_callback(self._discard)

    def _discard(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._running.discard(future)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._running)

    @property
    def full(self) -> bool:
        return self.count >= self.limit
