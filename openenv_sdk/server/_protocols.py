"""uvicorn's HTTP protocol with two fixes, given to uvicorn by `uvicorn_limits` (`http=`).

- A deadline on request heads (`header_timeout_s`): a connection that has not sent a whole
  request head that long after it opened (or after its previous response) is closed. uvicorn
  has none: a client that trickles a head a byte at a time holds its connection, and its
  memory, for as long as it likes (HTTP "slow loris").
- No reference cycle left behind by a WebSocket upgrade: httptools' parser holds the
  protocol's bound methods and the protocol holds the parser. uvicorn breaks that cycle when
  the connection is lost, but after an upgrade the connection belongs to the WebSocket
  protocol and the HTTP protocol never hears of it: the cycle (and the transport, and the
  WebSocket protocol that the transport holds) waited for a full collection. Here the parser
  is dropped once the upgrade is handed over, so a finished session's memory is freed by
  reference counting as soon as its connection closes.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["ServerHttpProtocol"]


class ServerHttpProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` with a deadline on request heads and no cycle after an upgrade.

    `header_timeout_s` is a class attribute: uvicorn builds its protocols itself, so
    `uvicorn_limits` hands it a subclass with the server's value (`with_header_timeout`).
    """

    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    @classmethod
    def with_header_timeout(cls, header_timeout_s: float) -> type[ServerHttpProtocol]:
        return _subclass(round(header_timeout_s * 1000))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)
        # the request cycle holds `on_response_complete`, a bound method of this protocol
        self.cycle = None  # type: ignore[assignment]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():  # kept alive: the next head has the same deadline
            self._start_head_timer()

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        super().on_headers_complete()

    def handle_websocket_upgrade(self) -> None:
        self._stop_head_timer()
        super().handle_websocket_upgrade()
        # The WebSocket protocol owns the connection now; this one hears nothing more of it.
        self.parser = None  # type: ignore[assignment]
        self.cycle = None  # type: ignore[assignment]

    def _start_head_timer(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered (its head came in time)
        if not self.transport.is_closing():
            self.transport.close()



_PREFIX = "ServerHttpProtocol_ms"


@functools.lru_cache(maxsize=32)
def _subclass(header_timeout_ms: int) -> type[ServerHttpProtocol]:
    # Named, and found again by `__getattr__`, so that pickle finds it in uvicorn's worker processes.
    name = f"{_PREFIX}{header_timeout_ms}"
    return type(name, (ServerHttpProtocol,), {"header_timeout_s": header_timeout_ms / 1000, "__module__": __name__})


def __getattr__(name: str) -> Any:
    if name.startswith(_PREFIX) and name[len(_PREFIX) :].isdigit():
        return _subclass(int(name[len(_PREFIX) :]))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
