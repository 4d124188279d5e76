"""The agent's side of a session: one official MCP client session, bound by the session's token.

`AsyncMcpChannel` owns one `mcp` client session to `{base_url}/mcp?session=TOKEN`. The session
lives in one task (anyio's cancel scopes must be left by the task that entered them); callers
hand it work through a queue, from any task of the same event loop. `McpChannel`, its blocking
twin for the sync client, runs one on a private event loop (`LoopThread`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from .. import tracing
from .._mcp_imports import MCP_IMPORT_LOCK
from ..errors import RequestTimeout, TransportError
from ._base import logger, tool_call_refused

if TYPE_CHECKING:
    import mcp_types

__all__ = ["AsyncMcpChannel", "LoopThread", "McpChannel"]

T = TypeVar("T")

def _leaf(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class AsyncMcpChannel:
    """One MCP client session to one URL, served by one task on the current event loop."""

    def __init__(self, url: str, *, timeout_s: float, connect_timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._queue: asyncio.Queue[tuple[Callable[[Any], Awaitable[Any]], asyncio.Future[Any]] | None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def list_tools(self) -> list[mcp_types.Tool]:
        """The tools as the official client lists them (`mcp_types.Tool`)."""

        async def run(session: Any) -> list[mcp_types.Tool]:
            return list((await session.list_tools()).tools)

        return await self._request(run, "tools/list")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call one tool; returns `mcp_types.CallToolResult` (a failing tool is `is_error=True`).

        Raises:
            ToolCallError: the server refused the call (unknown tool: `error_type` `tool_not_found`).
            SessionError: the episode is not reset, or the session is busy (as `step` raises it).
        """

        async def run(session: Any) -> mcp_types.CallToolResult:
            return await session.call_tool(name, arguments)

        return await self._request(run, f"tools/call {name!r}", tool=name)

    async def aclose(self) -> None:
        """End the MCP session (the transport sends its DELETE) and its task."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        assert self._queue is not None
        self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(task), self.connect_timeout_s)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    # --- internals ----------------------------------------------------------------------

    async def _request(self, fn: Callable[[Any], Awaitable[T]], what: str, *, tool: str | None = None) -> T:
        with MCP_IMPORT_LOCK:
            from mcp.shared.exceptions import MCPError

        await self._ensure_started()
        assert self._queue is not None
        if tracing.enabled():  # the request runs in the caller's context: the mcp SDK puts its span in `_meta`
            context, untraced = contextvars.copy_context(), fn

            async def fn(session: Any) -> T:
                return await asyncio.create_task(untraced(session), context=context)  # type: ignore[arg-type]

        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((fn, future))
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            raise RequestTimeout(f"MCP {what} at {self.url} got no answer within {self.timeout_s:g} s") from None
        except MCPError as e:
            raise tool_call_refused(what, e.code, e.message, tool, e.data) from e

    async def _ensure_started(self) -> None:
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._queue = asyncio.Queue()
            self._ready = loop.create_future()
            self._task = loop.create_task(self._run(self._queue, self._ready), name="openenv-mcp-channel")
        assert self._ready is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.connect_timeout_s)
        except TimeoutError:
            await self.aclose()
            raise RequestTimeout(
                f"MCP session at {self.url} was not initialized within {self.connect_timeout_s:g} s"
            ) from None

    async def _run(self, queue: asyncio.Queue[Any], ready: asyncio.Future[None]) -> None:
        current: asyncio.Future[Any] | None = None
        try:
            # Inside the try: a failing import must reach `ready`, not leave callers waiting.
            with MCP_IMPORT_LOCK:
                from mcp import ClientSession
                from mcp.client.streamable_http import streamable_http_client

            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(streamable_http_client(self.url))
                session = await stack.enter_async_context(
                    ClientSession(streams[0], streams[1], read_timeout_seconds=self.timeout_s)
                )
                await session.initialize()
                ready.set_result(None)
                while True:
                    job = await queue.get()
                    if job is None:
                        return
                    fn, current = job
                    if current.done():
                        continue
                    try:
                        result = await fn(session)
                    except Exception as e:  # a refused call is the caller's error, not the channel's
                        if not current.done():
                            current.set_exception(e)
                    else:
                        if not current.done():
                            current.set_result(result)
                    current = None
        except BaseException as e:
            leaf = _leaf(e)
            error = TransportError(f"MCP session at {self.url} failed: {type(leaf).__name__}: {leaf}")
            pending = [current] if current is not None else []
            while not queue.empty():
                job = queue.get_nowait()
                if job is not None:
                    pending.append(job[1])
            for future in (ready, *pending):
                if not future.done():
                    future.set_exception(error)
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            if not ready.done():
                ready.set_exception(TransportError(f"MCP session at {self.url} ended before it was initialized"))


class LoopThread:
    """A private event loop on a daemon thread, for the sync client's MCP channel."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="openenv-client-mcp", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run `coro` on the loop and wait for it (at most `timeout_s`)."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RequestTimeout(f"MCP request got no answer within {timeout_s:g} s") from None

    def close(self, timeout_s: float) -> None:
        if self._loop.is_closed():
            return

        async def unwind() -> None:
            # what asyncio.run does at its end: cancel what still runs (an MCP stream, a call
            # given up on) and let it unwind, so that its sockets are closed, not left to the GC
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout_s)

        with contextlib.suppress(Exception):  # closing goes on whatever the tasks do
            asyncio.run_coroutine_threadsafe(unwind(), self._loop).result(timeout_s + 1.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)


class McpChannel:
    """The blocking twin of `AsyncMcpChannel`: the same channel, on its own event-loop thread."""

    def __init__(self, url: str, *, timeout_s: float, connect_timeout_s: float) -> None:
        self.url = url
        self._channel = AsyncMcpChannel(url, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s)
        self._wait_s = timeout_s + connect_timeout_s + 1.0  # the channel's own timeouts fire first
        self._loop_thread: LoopThread | None = None

    def list_tools(self) -> list[mcp_types.Tool]:
        """See `AsyncMcpChannel.list_tools`."""
        return self._loop().run(self._channel.list_tools(), self._wait_s)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """See `AsyncMcpChannel.call_tool`."""
        return self._loop().run(self._channel.call_tool(name, arguments), self._wait_s)

    def close(self) -> None:
        """End the MCP session, then the loop thread; closing goes on whatever fails."""
        thread, self._loop_thread = self._loop_thread, None
        if thread is None:
            return
        connect_timeout_s = self._channel.connect_timeout_s
        try:
            thread.run(self._channel.aclose(), connect_timeout_s + 1.0)
        except Exception as e:  # closing must go on
            logger.debug("closing the MCP channel failed: %s", e)
        thread.close(connect_timeout_s)

    def _loop(self) -> LoopThread:
        if self._loop_thread is None:
            self._loop_thread = LoopThread()
        return self._loop_thread
