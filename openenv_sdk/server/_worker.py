"""Running environment code so that nothing it does can stop the server.

- Every session runs its blocking sync calls on its own worker thread (`SessionWorker`), never
  on a shared pool: a call that hangs holds its own session's thread only, and other sessions
  never wait behind it.
- A `BaseException` that environment code raises (`SystemExit` from argparse, say,
  `KeyboardInterrupt`, `GeneratorExit`, a stray `CancelledError`) becomes `EnvironmentAborted`,
  a plain `Exception`, before it reaches an asyncio task (where `SystemExit` would stop the
  event loop) or a thread (where it would end the thread silently).
- `AbandonedCalls` counts the calls that timed out and still run on their thread, so that the
  server can bound them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["AbandonedCalls", "EnvironmentAborted", "SessionWorker", "guard_async", "guard_sync"]


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


class SessionWorker:
    """One daemon thread that runs one session's sync calls, in order.

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
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                value = fn(*args, **kwargs)
            except Exception as e:
                future.set_exception(e)
            except BaseException as e:  # SystemExit would end this thread silently
                future.set_exception(EnvironmentAborted(e))
            else:
                future.set_result(value)
            del item, future, fn, args, kwargs


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
