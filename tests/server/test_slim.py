"""`SlimQueue` and `SlimEvent` behave as the `asyncio.Queue` and `asyncio.Event` calls that
uvicorn's WebSocket protocol makes, cancellation included."""

from __future__ import annotations

import asyncio

import pytest

from openenv_sdk.server._slim import SlimEvent, SlimQueue


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_queue_is_first_in_first_out_and_wakes_a_waiting_get() -> None:
    async def main() -> None:
        queue = SlimQueue()
        assert queue.empty()
        waiting = asyncio.ensure_future(queue.get())
        await _settle()
        assert not waiting.done()
        for i in range(3):
            queue.put_nowait(i)
        assert await asyncio.wait_for(waiting, 5) == 0
        assert [await queue.get(), queue.get_nowait()] == [1, 2]
        assert queue.empty()
        with pytest.raises(asyncio.QueueEmpty):
            queue.get_nowait()

    asyncio.run(main())


def test_a_get_cancelled_after_it_was_woken_leaves_the_item_to_the_next_get() -> None:
    async def main() -> None:
        queue = SlimQueue()
        first, second = asyncio.ensure_future(queue.get()), asyncio.ensure_future(queue.get())
        await _settle()
        queue.put_nowait("item")  # wakes `first`, cancelled before it runs
        first.cancel()
        assert await asyncio.wait_for(second, 5) == "item"
        assert first.cancelled() and queue.empty()

    asyncio.run(main())


def test_the_event_wakes_every_waiter_and_clear_makes_them_wait_again() -> None:
    async def main() -> None:
        event = SlimEvent()
        assert not event.is_set()
        waiters = [asyncio.ensure_future(event.wait()) for _ in range(3)]
        await _settle()
        assert not any(w.done() for w in waiters)
        event.set()
        assert await asyncio.wait_for(asyncio.gather(*waiters), 5) == [True, True, True]
        assert await event.wait()  # set: at once
        event.clear()
        late = asyncio.ensure_future(event.wait())
        await _settle()
        assert not late.done()
        late.cancel()
        await _settle()
        event.set()
        assert late.cancelled() and event.is_set()

    asyncio.run(main())
