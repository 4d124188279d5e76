"""A private event loop on a daemon thread, for sync callers of async episode code.

Environment sessions (WebSocket and MCP connections) belong to the loop that opened them, so a
caller that runs episodes from sync code (TRL's `rollout_func`) keeps one loop alive across calls
rather than `asyncio.run` a new one each time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["LoopThread"]

logger = logging.getLogger(__name__)


class LoopThread:
    """An event loop running on its own daemon thread until `close()`."""

    def __init__(self, name: str = "openenv-trainers-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (at most `timeout_s` seconds)."""
        if self.loop.is_closed():
            raise RuntimeError("the loop thread is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the loop (pending tasks are cancelled) and join its thread. Safe to call twice."""
        if self.loop.is_closed() or not self._thread.is_alive():
            return

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(timeout_s)
        except (TimeoutError, RuntimeError) as e:  # closing goes on regardless
            logger.debug("cancelling the loop's tasks failed: %r", e)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)
