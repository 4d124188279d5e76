"""Running environment code so that nothing it does can stop the server.

- Blocking sync calls run off the event loop, one at a time per session, in order
  (`SessionLane`), on the threads of one pool (`WorkerPool`) that take calls from one queue:
  a few threads run quick calls back to back, and another starts whenever the queue goes
  `stall_s` (50 ms) without a call ending. A call that hangs holds its own thread only; other
  sessions wait behind it at most about `stall_s`. Threads go as calls end (a few stay idle),
  so 10,000 sessions that are between calls hold no thread each.
- By default a session's sync calls all run on one thread (`PinnedLane` on an `AffinityPool`),
  so that what a call leaves bound to its thread (a `sqlite3` connection, a C library's state)
  works in the next call: each session gets a thread of its own while fewer than `max_threads`
  (64) run, then sessions share them, pinned to one each; a new session is never pinned to a
  thread whose call has run past `stall_s`. `THREAD_AFFINITY = True` gives each session a
  dedicated thread (`SessionWorker`) whatever the count; `THREAD_AFFINITY = False` (the class is
  free-threaded) runs its calls on any thread of the shared `WorkerPool` (`SessionLane`).
- A `BaseException` that environment code raises (`SystemExit` from argparse, say,
  `KeyboardInterrupt`, `GeneratorExit`, a stray `CancelledError`) becomes `EnvironmentAborted`,
  a plain `Exception`, before it reaches an asyncio task (where `SystemExit` would stop the
  event loop) or a thread (where it would end the thread silently).
- The event loop hands a call to a thread as a `Call` and gets its result back through the
  loop's `LoopHandoff`: calls that end while the loop is busy come back in one wake-up, and no
  `concurrent.futures.Future` (a lock and a condition each) is made per call.
- `AbandonedCalls` counts the calls that timed out and still run on their thread, so that the
  server can bound them.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = [
    "AbandonedCalls",
    "AffinityPool",
    "Call",
    "CallRunner",
    "EnvironmentAborted",
    "FutureJob",
    "LoopHandoff",
    "PinnedLane",
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


class LoopHandoff:
    """Results of calls that ran on worker threads, handed to one event loop in batches.

    `call_soon_threadsafe` per result would wake the loop (a write to its self-pipe) once per
    call; here the first result of a batch schedules one `_deliver` and the results that end
    before it runs ride along. No lock: a deque's append and popleft are atomic, and `_deliver`
    clears the flag before it drains, so a result is either drained or schedules a new
    `_deliver` (two threads that both see the flag down schedule one extra, empty, `_deliver`).
    A lock here was contended by the loop and the threads once per call.
    """

    __slots__ = ("loop", "_ready", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._ready: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._scheduled = False

    def put(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """From any thread: settle `future` with `value` (a result, or the exception when not `ok`)."""
        self._ready.append((future, ok, value))
        if self._scheduled:
            return
        self._scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _deliver(self) -> None:
        self._scheduled = False
        ready = self._ready
        while ready:
            future, ok, value = ready.popleft()
            if future.done():  # its caller went away (cancelled) or gave up (timed out)
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_FINISH_LOCK = threading.Lock()  # taken only by calls that someone watches (abandoned ones)


class Call:
    """One sync call into environment code, run on a worker thread; its outcome settles an
    asyncio future on the loop through a `LoopHandoff`. `finished` turns true when the code
    has returned (a call that timed out may run on long after its future was settled)."""

    __slots__ = ("_fn", "_args", "_kwargs", "_future", "_handoff", "finished", "_watchers")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        future: asyncio.Future[Any],
        handoff: LoopHandoff,
    ) -> None:
        self._fn: Callable[..., Any] | None = fn
        self._args = args
        self._kwargs = kwargs
        self._future = future
        self._handoff = handoff
        self.finished = False
        self._watchers: list[Callable[[Call], None]] | None = None

    def run(self) -> None:
        """On a worker thread: run the code; nothing it raises escapes (the thread goes on)."""
        fn, self._fn = self._fn, None
        if fn is None:
            return
        try:
            value, ok = fn(*self._args, **self._kwargs), True
        except Exception as e:
            value, ok = e, False
        except BaseException as e:  # SystemExit would end this thread silently
            value, ok = EnvironmentAborted(e), False
        self._args, self._kwargs = (), {}
        self._handoff.put(self._future, ok, value)
        del value
        if self._watchers is None:
            self.finished = True
            if self._watchers is None:  # nobody began watching meanwhile
                return
        with _FINISH_LOCK:
            self.finished = True
            watchers, self._watchers = self._watchers, None
        for watcher in watchers or ():
            watcher(self)

    def when_finished(self, watcher: Callable[[Call], None]) -> None:
        """Call `watcher(call)` once the code has returned (at once when it already has)."""
        with _FINISH_LOCK:
            if not self.finished:
                self._watchers = [*(self._watchers or ()), watcher]
                return
        watcher(self)


class FutureJob:
    """A call whose outcome goes into a `concurrent.futures.Future` (the rarer paths: `close()`
    behind a hung call, and callers off the loop)."""

    __slots__ = ("future", "fn", "args", "kwargs")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def run(self) -> None:
        """Run the call into its future; nothing it raises escapes (the thread goes on)."""
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            value = self.fn(*self.args, **self.kwargs)
        except Exception as e:
            self.future.set_exception(e)
        except BaseException as e:  # SystemExit would end this thread silently
            self.future.set_exception(EnvironmentAborted(e))
        else:
            self.future.set_result(value)


_Job = Call | FutureJob


class CallRunner(Protocol):
    """Runs one session's sync calls off the event loop, one at a time, in submission order."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue `fn(*args, **kwargs)` behind the session's earlier calls; its future."""
        ...

    def start(self, call: Call) -> None:
        """Queue `call` behind the session's earlier calls (the event loop's path)."""
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
        job = FutureJob(fn, args, kwargs)
        self._queue.put(job)
        return job.future

    def start(self, call: Call) -> None:
        self._queue.put(call)

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
            item.run()
            del item


class WorkerPool:
    """Daemon threads shared by every session, started on demand, taking tasks from one queue.

    A task arriving when no thread waits for work starts a thread while fewer than
    `min_threads` run; beyond that, only when no task has ended for `stall_s` (every thread is
    on a call that hangs, or a slow one). So a task waits at most about `stall_s` behind calls
    that hang, and under load a few threads run the queued calls back to back: each holds the
    GIL for many short calls in a row, where a thread per call would pass the GIL back and forth
    (and start threads) once per call. A thread that finds no task for `idle_timeout_s` ends,
    and one that finishes a task ends at once when `max_idle` threads already wait. Daemon
    threads, not a `ThreadPoolExecutor`'s: the interpreter's exit must not wait for a task that
    hangs forever.

    Args:
        max_idle: the most threads kept waiting for work.
        idle_timeout_s: how long an idle thread waits for work before it ends.
        min_threads: threads started without waiting for a stall.
        stall_s: how long the queue may go without a task ending before another thread starts.
        name: the threads' name prefix.
    """

    def __init__(
        self,
        *,
        max_idle: int = 16,
        idle_timeout_s: float = 10.0,
        min_threads: int = 4,
        stall_s: float = 0.05,
        name: str = "openenv-worker",
    ) -> None:
        self.max_idle = max_idle
        self.idle_timeout_s = idle_timeout_s
        self.min_threads = min_threads
        self.stall_s = stall_s
        self._name = name
        self._numbers = itertools.count(1)
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._waiting = 0  # threads blocked on the queue
        self._queued = 0  # tasks put and not yet taken
        self._progress = time.monotonic()  # when a task last ended (or a thread last started)
        self._watching = False  # the stall watcher runs

    @property
    def threads(self) -> int:
        """Threads alive: running a task, or idle."""
        with self._lock:
            return self._threads

    def run(self, task: Callable[[], None]) -> None:
        """Run `task()` on a thread of the pool (it must not raise)."""
        with self._lock:
            self._queued += 1
            start = self._needs_thread(time.monotonic())
            watch = not start and self._queued > self._waiting and not self._watching
            if watch:
                self._watching = True
        self._tasks.put(task)
        if start:
            self._start_thread()
        if watch:
            self._start_watcher()

    def shutdown(self) -> None:
        """End the idle threads now (running tasks finish; a later `run` starts threads again)."""
        with self._lock:
            idle = self._waiting - self._queued
            self._queued += max(idle, 0)
        for _ in range(idle):
            self._tasks.put(_STOP)

    def _needs_thread(self, now: float) -> bool:
        """Under the lock: whether a queued task would wait for a busy thread, and may not; if so,
        the thread is counted (and is progress: a burst starts one thread per `stall_s`)."""
        if self._queued <= self._waiting:
            return False
        if self._threads >= self.min_threads and now - self._progress < self.stall_s:
            return False
        self._threads += 1
        self._progress = now
        return True

    def _start_thread(self) -> None:
        name = f"{self._name}-{next(self._numbers)}"
        try:
            threading.Thread(target=self._loop, name=name, daemon=True).start()
        except BaseException:  # RuntimeError: can't start new thread
            with self._lock:
                self._threads -= 1
            raise

    def _start_watcher(self) -> None:
        try:
            threading.Thread(target=self._watch, name=f"{self._name}-watcher", daemon=True).start()
        except BaseException:
            with self._lock:
                self._watching = False
            raise

    def _watch(self) -> None:
        """While tasks wait for busy threads, start one more each time the queue stalls."""
        while True:
            time.sleep(self.stall_s)
            with self._lock:
                if self._queued <= self._waiting:
                    self._watching = False
                    return
                start = self._needs_thread(time.monotonic())
            if start:
                with contextlib.suppress(RuntimeError):  # no thread now: the next tick tries again
                    self._start_thread()

    def _loop(self) -> None:
        while True:
            with self._lock:
                self._waiting += 1
            try:
                task = self._tasks.get(timeout=self.idle_timeout_s)
            except queue.Empty:
                with self._lock:
                    self._waiting -= 1
                    if self._queued <= self._waiting:  # nothing left for this thread to take
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._waiting -= 1
                self._queued -= 1
            if task is _STOP:
                with self._lock:
                    self._threads -= 1
                return
            task()
            del task
            with self._lock:
                self._progress = time.monotonic()
                if self._waiting >= self.max_idle and self._queued <= self._waiting:
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
        job = FutureJob(fn, args, kwargs)
        self.start(job)
        return job.future

    def start(self, call: _Job) -> None:
        with self._lock:
            if self._running:
                self._pending.append(call)
                return
            self._running = True
        try:
            self._pool.run(lambda: self._drain(call))
        except BaseException:
            with self._lock:
                self._running = False
            raise

    def shutdown(self) -> None:
        """Nothing to free: the lane's calls already submitted still run."""

    def _drain(self, job: _Job) -> None:
        while True:
            job.run()
            with self._lock:
                if not self._pending:
                    self._running = False
                    return
                job = self._pending.popleft()


class _PinnedThread:
    """One thread of an `AffinityPool`: runs the calls of the sessions pinned to it, in order."""

    __slots__ = ("_queue", "pins", "running_since", "_pool")

    def __init__(self, pool: AffinityPool, name: str) -> None:
        self._pool = pool
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.pins = 0  # sessions pinned to this thread (under the pool's lock)
        self.running_since: float | None = None  # when the call it runs began
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def put(self, job: Any) -> None:
        self._queue.put(job)

    def stuck(self, now: float) -> bool:
        """Whether its current call has run past the pool's `stall_s` (it may hang)."""
        since = self.running_since
        return since is not None and now - since >= self._pool.stall_s

    def idle(self) -> bool:
        return self.running_since is None and self._queue.empty()

    def _loop(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=self._pool.idle_timeout_s)
            except queue.Empty:
                if self._pool._retire(self):
                    return
                continue
            if job is _STOP:
                return
            self.running_since = time.monotonic()
            job.run()
            del job
            self.running_since = None


class AffinityPool:
    """Threads that sessions are pinned to: every call of a session runs on the same thread.

    A session is pinned at its first call: to a thread no session holds and that runs nothing,
    else to a new thread while fewer than `max_threads` run (so up to that many sessions at once
    each have a thread of their own, and a call that hangs holds up nobody else), else to the
    next thread, in turn, whose call has not run past `stall_s`; when every thread's has, to a
    new one (beyond `max_threads`). Sessions sharing a thread run back to back on it, each
    holding the GIL for several calls. A thread that no session holds ends after
    `idle_timeout_s` without a call.

    Args:
        max_threads: threads started before sessions share them.
        idle_timeout_s: how long a thread no session holds waits for work before it ends.
        stall_s: how long a call may run before its thread takes no new sessions.
        name: the threads' name prefix.
    """

    def __init__(
        self,
        *,
        max_threads: int = 64,
        idle_timeout_s: float = 10.0,
        stall_s: float = 0.05,
        name: str = "openenv-pinned",
    ) -> None:
        self.max_threads = max_threads
        self.idle_timeout_s = idle_timeout_s
        self.stall_s = stall_s
        self._name = name
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._threads: list[_PinnedThread] = []
        self._cursor = 0

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    def pin(self) -> _PinnedThread:
        """A thread for a new session (see the class docstring); the session holds it until `unpin`."""
        with self._lock:
            chosen = self._choose(time.monotonic())
            chosen.pins += 1
            return chosen

    def unpin(self, thread: _PinnedThread) -> None:
        with self._lock:
            thread.pins -= 1

    def _choose(self, now: float) -> _PinnedThread:
        threads = self._threads
        for thread in threads:  # few: at most max_threads unless calls hang
            if thread.pins == 0 and thread.idle():
                return thread
        if len(threads) < self.max_threads:
            return self._start()
        for _ in range(len(threads)):
            self._cursor = (self._cursor + 1) % len(threads)
            thread = threads[self._cursor]
            if not thread.stuck(now):
                return thread
        return self._start()

    def _start(self) -> _PinnedThread:
        thread = _PinnedThread(self, f"{self._name}-{next(self._numbers)}")
        self._threads.append(thread)
        return thread

    def _retire(self, thread: _PinnedThread) -> bool:
        """From an idle thread: whether it may end (no session holds it, nothing queued)."""
        with self._lock:
            if thread.pins or not thread.idle():
                return False
            if thread in self._threads:  # `shutdown` may have let it go already
                self._threads.remove(thread)
            return True

    def shutdown(self) -> None:
        """End the threads no session holds, once their queued calls have run."""
        with self._lock:
            idle = [t for t in self._threads if t.pins == 0]
            for thread in idle:
                self._threads.remove(thread)
        for thread in idle:
            thread.put(_STOP)


class PinnedLane:
    """One session's sync calls, in order, all on the one thread of an `AffinityPool` it is
    pinned to at its first call (the default; see `AffinityPool`)."""

    __slots__ = ("_pool", "_thread")

    def __init__(self, pool: AffinityPool) -> None:
        self._pool = pool
        self._thread: _PinnedThread | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        job = FutureJob(fn, args, kwargs)
        self.start(job)
        return job.future

    def start(self, call: _Job) -> None:
        thread = self._thread
        if thread is None:
            thread = self._thread = self._pool.pin()
        thread.put(call)

    def shutdown(self) -> None:
        """Let the thread go (calls already submitted still run on it)."""
        if self._thread is not None:
            self._pool.unpin(self._thread)
            self._thread = None


class AbandonedCalls:
    """Calls that timed out and still run on their session's thread (at most one per thread)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running: set[Call] = set()
        self._lock = threading.Lock()

    def add(self, call: Call) -> None:
        with self._lock:
            self._running.add(call)
        call.when_finished(self._discard)

    def _discard(self, call: Call) -> None:
        with self._lock:
            self._running.discard(call)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._running)

    @property
    def full(self) -> bool:
        return self.count >= self.limit
