"""`SessionRunner`: where one session's environment code runs, and what a call left running does.

A coroutine function runs on the event loop. A sync function runs in place when the class is
not `BLOCKING`; otherwise off the loop, one call at a time per session: by default always on
the same thread, the one the session is pinned to (so thread-bound resources work); on a
thread of its own with `THREAD_AFFINITY = True`; on any thread of the server's worker pool
when the class says it is free-threaded (`THREAD_AFFINITY = False`). A blocking call that times out
(or whose caller went away) keeps running on its thread, and the session is quarantined
(`SESSION_BUSY`) until it ends, or until the session closes: `close` then runs beside it. The threads themselves are `_worker.py`'s.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..types import ErrorCode
from ._protocol import RequestRefused
from ._worker import Call, CallRunner, FutureJob, PinnedLane, SessionLane, SessionWorker, guard_async, guard_sync

if TYPE_CHECKING:
    from ..environment import Environment
    from ._manager import SessionManager

logger = logging.getLogger("openenv_sdk.server")

__all__ = ["SessionRunner", "is_coroutine_function"]


class SessionRunner:
    """Runs one session's calls into its environment (see the module docstring)."""

    __slots__ = ("_session_id", "_env_cls", "_manager", "_worker", "_hung", "_hung_what")

    def __init__(self, session_id: str, env_cls: type[Environment[Any, Any, Any]], manager: SessionManager) -> None:
        self._session_id = session_id
        self._env_cls = env_cls
        self._manager = manager
        self._worker: CallRunner | None = None
        self._hung: Call | None = None
        self._hung_what = ""

    @property
    def busy(self) -> bool:
        """Whether a call that timed out (or whose caller went away) still runs on this session's thread."""
        if self._hung is not None and self._hung.finished:
            self._hung = None
        return self._hung is not None

    def check_not_busy(self) -> None:
        if self.busy:
            raise RequestRefused(
                ErrorCode.SESSION_BUSY,
                f"A previous call in this session ({self._hung_what}) is still running on its thread; "
                f"this session takes calls again once it ends (other sessions are not affected). "
                f"Close the session to start over in a new one.",
            )

    async def run(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        what: str = "",
    ) -> Any:
        """Run environment code where it belongs (see the module docstring). `TimeoutError` past
        `timeout_s`; a sync call left running (timed out, or its caller cancelled) quarantines
        the session until it ends."""
        kwargs = kwargs or {}
        if tracing.enabled():  # a span for the environment's code, on whichever thread runs it
            name = what or f"{getattr(fn, '__name__', 'call')}()"
            fn = tracing.wrap(fn, f"openenv.env {name}", {"openenv.session_id": self._session_id})
        if is_coroutine_function(fn):
            if timeout_s is None:
                return await guard_async(fn(*args, **kwargs))
            return await asyncio.wait_for(guard_async(fn(*args, **kwargs)), timeout=timeout_s)
        if not self._env_cls.BLOCKING:
            return guard_sync(fn, *args, **kwargs)
        what = what or f"{getattr(fn, '__name__', 'call')}()"
        self.check_not_busy()
        if self._worker is None:
            affinity = self._env_cls.THREAD_AFFINITY
            if affinity is None:  # the default: one thread per session, shared past a few hundred
                self._worker = PinnedLane(self._manager.pinned)
            elif affinity:
                self._worker = SessionWorker(f"openenv-{self._session_id[:8]}")
            else:  # free-threaded: any pool thread, none held between calls
                self._worker = SessionLane(self._manager.workers)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        call = Call(fn, args, kwargs, future, self._manager.handoff(loop))
        self._worker.start(call)
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, future)
        try:
            return await future
        except _Expired:
            self._abandon(call, f"{what}, which timed out after {timeout_s:g} s")
            raise TimeoutError(what) from None
        except asyncio.CancelledError:
            if not call.finished:
                self._abandon(call, f"{what}, whose caller went away")
            raise
        finally:
            if timer is not None:
                timer.cancel()

    async def close(self, fn: Callable[..., Any], *, timeout_s: float) -> None:
        """Run the environment's `close` and let the session's thread go; a `close` that hangs
        is abandoned after `timeout_s`.

        When a call still runs on the session's thread (it timed out, or its client went away),
        `close` runs at once on another thread, beside it: that is what ends the call (an
        environment's `close` kills its commands), where waiting behind it would leave the
        command running to its end and the workspace behind if the server stopped meanwhile."""
        try:
            if self.busy and self._worker is not None:
                job = FutureJob(fn, (), {})
                self._manager.workers.run(job.run)
                try:
                    await asyncio.wait_for(asyncio.wrap_future(job.future), timeout_s)
                except TimeoutError:
                    logger.warning("session %s: close() did not end within %g s", self._session_id[:8], timeout_s)
                    job.future.add_done_callback(_consume)
            else:
                await self.run(fn, timeout_s=timeout_s, what="close()")
        finally:
            if self._worker is not None:  # the one `run` may have started for `close` itself
                self._worker.shutdown()

    def _abandon(self, call: Call, what: str) -> None:
        self._hung, self._hung_what = call, what
        self._manager.abandoned.add(call)
        logger.warning("session %s: %s; the session is busy until it ends", self._session_id[:8], what)


class _Expired(Exception):
    """A blocking call's timer ran out before its thread answered (never leaves `SessionRunner.run`)."""


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(_Expired())


def _consume(future: Any) -> None:
    """Read a left-behind future's outcome, so that asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


def is_coroutine_function(fn: Callable[..., Any]) -> bool:
    """`inspect.iscoroutinefunction`, once per function (every call into an environment asks)."""
    return _coroutine_function(getattr(fn, "__func__", fn))


@functools.lru_cache(maxsize=1024)
def _coroutine_function(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn)
