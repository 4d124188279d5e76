"""The I/O the two clients differ in, as twins: `AsyncX` for `AsyncEnvClient`, `X` for `EnvClient`.

`_async.py` is written against the `Async` names; `scripts/unasync.py` turns it into `_sync.py`
by dropping `async`/`await` and the `Async` prefix, so each pair here keeps the same methods:

    AsyncWebSocket / WebSocket   one client WebSocket: connect, send, recv within a timeout, close
    AsyncLock / Lock             serialises one client's calls (an asyncio lock / a thread lock)
    AsyncBlocking / Blocking     runs blocking provider work: in a worker thread / in place
    AsyncReplyBody / ReplyBody   reads an HTTP reply's body, refusing one over a size

(`AsyncMcpChannel` / `McpChannel` are the MCP twins, in `_mcp.py`; `httpx.AsyncClient` /
`httpx.Client` are httpx's own.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TypeVar

import httpx
from websockets.asyncio import client as async_ws
from websockets.exceptions import ConnectionClosed
from websockets.sync import client as sync_ws

from ..errors import TransportError
from ._options import ClientOptions

__all__ = ["AsyncBlocking", "AsyncLock", "AsyncReplyBody", "AsyncWebSocket", "Blocking", "Lock", "ReplyBody", "WebSocket"]

T = TypeVar("T")

_UNREAD_WAIT_S = 0.01
"""How long `unread()` waits for each message already received on a closed connection."""

_UNREAD_MAX = 8
"""The most messages `unread()` returns (the server's last error is among the first)."""


class AsyncWebSocket:
    """One client WebSocket on the event loop (`websockets.asyncio.client`)."""

    def __init__(self, conn: async_ws.ClientConnection) -> None:
        self._conn = conn

    @classmethod
    async def connect(cls, url: str, *, options: ClientOptions, headers: Mapping[str, str]) -> AsyncWebSocket:
        """Open the connection (the opening handshake within `connect_timeout_s`).

        Raises what `websockets` raises: `OSError`, `TimeoutError`, `InvalidHandshake`,
        `InvalidURI`, `ConnectionClosed`; the socket is closed then.
        """
        conn = await async_ws.connect(
            url,
            open_timeout=options.connect_timeout_s,
            close_timeout=options.connect_timeout_s,
            max_size=options.max_message_bytes,
            additional_headers=dict(headers),
        )
        return cls(conn)

    async def send(self, text: str) -> None:
        await self._conn.send(text)

    async def recv(self, timeout_s: float) -> str | bytes:
        """The next message; `TimeoutError` after `timeout_s`, `ConnectionClosed` when closed."""
        async with asyncio.timeout(timeout_s):
            return await self._conn.recv()

    async def unread(self) -> list[str | bytes]:
        """Messages already received on a closed connection (e.g. the server's last error)."""
        out: list[str | bytes] = []
        for _ in range(_UNREAD_MAX):
            try:
                out.append(await self.recv(_UNREAD_WAIT_S))
            except (ConnectionClosed, TimeoutError, RuntimeError):
                break
        return out

    async def aclose(self) -> None:
        await self._conn.close()


class WebSocket:
    """One client WebSocket on the calling thread (`websockets.sync.client`)."""

    def __init__(self, conn: sync_ws.ClientConnection) -> None:
        self._conn = conn

    @classmethod
    def connect(cls, url: str, *, options: ClientOptions, headers: Mapping[str, str]) -> WebSocket:
        """Open the connection; see `AsyncWebSocket.connect`."""
        conn = sync_ws.connect(
            url,
            open_timeout=options.connect_timeout_s,
            close_timeout=options.connect_timeout_s,
            max_size=options.max_message_bytes,
            additional_headers=dict(headers),
            legacy=True,  # a plain connection, closed by `close()`, not a context manager
        )
        return cls(conn)

    def send(self, text: str) -> None:
        self._conn.send(text)

    def recv(self, timeout_s: float) -> str | bytes:
        """The next message; `TimeoutError` after `timeout_s`, `ConnectionClosed` when closed."""
        return self._conn.recv(timeout=timeout_s)

    def unread(self) -> list[str | bytes]:
        """Messages already received on a closed connection (e.g. the server's last error)."""
        out: list[str | bytes] = []
        for _ in range(_UNREAD_MAX):
            try:
                out.append(self.recv(_UNREAD_WAIT_S))
            except (ConnectionClosed, TimeoutError, RuntimeError):
                break
        return out

    def close(self) -> None:
        self._conn.close()


class AsyncLock:
    """Serialises one client's calls across tasks (not reentrant)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()


class Lock:
    """Serialises one client's calls across threads (reentrant, as a guard against self-deadlock)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()


class AsyncBlocking:
    """Blocking provider work (starting or stopping a server) runs in a worker thread: the loop goes on."""

    @staticmethod
    async def call(fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)


class Blocking:
    """Blocking provider work runs on the calling thread."""

    @staticmethod
    def call(fn: Callable[[], T]) -> T:
        return fn()


def _too_large(what: str, max_bytes: int) -> TransportError:
    return TransportError(f"{what}: the reply is over {max_bytes} bytes (the client's max_message_bytes); not read")


def _declared_over(response: httpx.Response, max_bytes: int) -> bool:
    declared = response.headers.get("content-length", "")
    return declared.isdigit() and int(declared) > max_bytes


class AsyncReplyBody:
    """An HTTP reply's body, read as it streams in and refused past a size (never held whole)."""

    @staticmethod
    async def read(response: httpx.Response, max_bytes: int, what: str) -> bytes:
        """Raises `TransportError` when the body is (or says it is) over `max_bytes`."""
        if _declared_over(response, max_bytes):
            raise _too_large(what, max_bytes)
        chunks, size = [], 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise _too_large(what, max_bytes)
            chunks.append(chunk)
        return b"".join(chunks)


class ReplyBody:
    """An HTTP reply's body, read as it streams in and refused past a size (never held whole)."""

    @staticmethod
    def read(response: httpx.Response, max_bytes: int, what: str) -> bytes:
        """Raises `TransportError` when the body is (or says it is) over `max_bytes`."""
        if _declared_over(response, max_bytes):
            raise _too_large(what, max_bytes)
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise _too_large(what, max_bytes)
            chunks.append(chunk)
        return b"".join(chunks)
