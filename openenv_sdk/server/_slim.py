"""Per-connection asyncio primitives in a fraction of the memory of asyncio's, for what uvicorn's
WebSocket protocol asks of them (`ServerWebSocketProtocol` swaps them in).

`asyncio.Queue` makes three deques when it is created and `asyncio.Event` one, each with a
64-slot block: ~3.7 KiB of a WebSocket connection's ~30 KiB, held for its whole life, though a
connection's queue holds one or two messages and at most one coroutine waits on either. These
hold a list, and a future only while someone waits.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["SlimEvent", "SlimQueue"]


class SlimQueue:
    """`asyncio.Queue`'s `put_nowait`, `get` and `empty`, unbounded, first in first out. A `get`
    cancelled while it waits takes nothing: an item put meanwhile stays for the next `get`."""

    __slots__ = ("_items", "_waiters")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._waiters: list[asyncio.Future[None]] | None = None

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)

    def put_nowait(self, item: Any) -> bool:
        """Queue `item`; whether a waiting `get` was woken for it."""
        self._items.append(item)
        return self._waiters is not None and _wake_one(self._waiters)

    async def get(self) -> Any:
        items = self._items
        while not items:
            # `_wait` inlined (this is the step's hot path)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            waiters = self._waiters
            if waiters is None:
                waiters = self._waiters = []
            waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if items:  # it was woken for an item it will not take: the next waiter may
                    _wake_one(waiters)
                raise
            finally:
                waiters.remove(waiter)
                if not waiters:
                    self._waiters = None
        item = items.pop(0)
        if items and self._waiters is not None:  # more to take: another waiter may take it
            _wake_one(self._waiters)
        return item

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)


class SlimEvent:
    """`asyncio.Event`: `set`, `clear`, `is_set` and `wait`."""

    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if not self._value:
            self._value = True
            for waiter in self._waiters or ():
                if not waiter.done():
                    waiter.set_result(None)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if not self._value:
            await _wait(self)
        return True


async def _wait(owner: SlimQueue | SlimEvent) -> None:
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters = owner._waiters
    if waiters is None:
        waiters = owner._waiters = []
    waiters.append(waiter)
    try:
        await waiter
    finally:
        waiters.remove(waiter)
        if not waiters:
            owner._waiters = None


def _wake_one(waiters: list[asyncio.Future[None]] | None) -> bool:
    for waiter in waiters or ():
        if not waiter.done():
            waiter.set_result(None)
            return True
    return False
