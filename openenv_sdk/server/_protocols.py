"""uvicorn's protocols with fixes, given to uvicorn by `uvicorn_limits` (`http=`, `ws=`).

`ServerWebSocketProtocol`: a message over the size limit is passed over and answered with a
typed error, not a 1009 close; and the session loop's channel (`CHANNEL_KEY`): a small text
frame read, and a reply's frame written, with no ASGI event dicts (see the class).
`ServerHttpProtocol`:

- Each request's scope names its connection (`CONNECTION_KEY`: a `Connection`, told when the
  connection closes), so that a session a request made can end with its client.
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
import json
import re
import struct
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import apply_mask
from websockets.protocol import State

from ._slim import SlimEvent, SlimQueue

if TYPE_CHECKING:
    from websockets.frames import Frame

__all__ = [
    "CHANNEL_KEY",
    "CONNECTION_KEY",
    "OVERSIZE_KEY",
    "Connection",
    "ServerHttpProtocol",
    "ServerWebSocketProtocol",
    "salvage_id",
]


CONNECTION_KEY = "openenv.connection"
"""The ASGI scope key under which `ServerHttpProtocol` puts the request's `Connection`."""


class Connection:
    """One HTTP connection, as requests see it (`scope[CONNECTION_KEY]`): what to do when it
    closes. It holds no reference to the protocol (no cycle through the scope)."""

    __slots__ = ("_on_close", "closed", "__weakref__")

    def __init__(self) -> None:
        self._on_close: list[Callable[[], None]] = []
        self.closed = False

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when the connection closes (at once if it has)."""
        if self.closed:
            callback()
        else:
            self._on_close.append(callback)

    def close(self) -> None:
        self.closed = True
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()


class ServerHttpProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` with a deadline on request heads and no cycle after an upgrade.

    `header_timeout_s` is a class attribute: uvicorn builds its protocols itself, so
    `uvicorn_limits` hands it a subclass with the server's value (`with_header_timeout`).
    """

    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self.connection = Connection()

    @classmethod
    def with_header_timeout(cls, header_timeout_s: float) -> type[ServerHttpProtocol]:
        return _subclass(round(header_timeout_s * 1000))

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)
        self.connection.close()
        # the request cycle holds `on_response_complete`, a bound method of this protocol
        self.cycle = None  # type: ignore[assignment]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():  # kept alive: the next head has the same deadline
            self._start_head_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[CONNECTION_KEY] = self.connection  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        super().on_headers_complete()

    def handle_websocket_upgrade(self) -> None:
        self._stop_head_timer()
        self.connection.close()  # as HTTP: the WebSocket's session is bound to the socket itself
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


OVERSIZE_KEY = "openenv.oversize"
"""The key of the `websocket.receive` event `ServerWebSocketProtocol` hands the app in place of a
message it left unread: `{"bytes": size, "id": the request's id or None}`."""

CHANNEL_KEY = "openenv.ws_channel"
"""The key of a WebSocket scope under which `ServerWebSocketProtocol` puts a weak reference to
itself: the session loop's channel to the connection (`receive_message`, `send_text_now`)."""

_FINAL_DATA = (0x81, 0x82)  # the first byte of a final (unfragmented) text or binary frame
_FINAL_TEXT = 0x81
_SMALL_TEXT_HEADERS = [bytes((_FINAL_TEXT, n)) for n in range(126)]  # a server's text frame of n < 126 bytes
_EDGE = 256  # bytes of a skipped message kept from its start and its end, to find its id in
_ID = rb'(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
_ID_AT_START = re.compile(rb'^\s*\{\s*(?:"type"\s*:\s*"[^"\\]{0,64}"\s*,\s*)?"id"\s*:\s*' + _ID)
_ID_AT_END = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*$")


def salvage_id(head: bytes, tail: bytes) -> str | int | None:
    """The envelope's `id` from the first and last bytes of a message that is not read whole:
    found when it is the first key (or the second, after `type`) or the last."""
    found = _ID_AT_START.match(head) or _ID_AT_END.search(tail)
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str | int) else None


class ServerWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, but a message over `ws_max_size` is skipped, not fatal.

    uvicorn (through `websockets`) closes the connection with 1009 on a message over
    `ws_max_size`, so one oversized message ended the session. Here the app gets an event in its
    place (`OVERSIZE_KEY`), which the server answers with a typed `MESSAGE_TOO_LARGE` error naming
    the limit, and the session goes on. A message's bytes past the limit are never held (its
    first and last 256 are kept to find the request's `id` in):

    - a message whose first frame is over the limit: its frames are passed over as they arrive;
      `websockets` never sees them;
    - a message sent in fragments that goes over the limit in all: `websockets` parses its
      fragments as usual while the sum is within the limit (uvicorn holds them, as for any
      fragmented message); from the fragment that crosses it, each one's payload is passed over
      and `websockets` gets the same frame with no payload (the library's own state of the
      message stays whole), and `handle_cont` lets the held fragments go and, at the last
      one, hands the app the event.

    Every other frame goes to `websockets` unchanged.

    The channel the session loop uses (`CHANNEL_KEY`): a small final text frame (a step) is
    unmasked and decoded here, and queued as its `str`, without `websockets`' parser and
    uvicorn's event dict (the frame changes nothing in `websockets`' state: it is whole, at a
    frame boundary, on an open connection, with no extension); `receive_message` hands the loop
    that `str` (any other event as uvicorn's dict) and `receive` the ASGI event for it.
    `send_text_now` writes a reply's frame as `websockets` would serialize it. Reading is paused
    only while a message waits in the queue unread, not after each message as uvicorn does.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the same calls in ~0.2 KiB where asyncio's take ~3.7 KiB a connection (`_slim.py`)
        self.queue = self._messages = SlimQueue()  # type: ignore[assignment]
        self.writable = SlimEvent()  # type: ignore[assignment]
        self.writable.set()
        self._limit = self.config.ws_max_size
        self._write_paused = False  # the transport's buffer is over its high-water mark
        self._scanning = False  # the first bytes are the upgrade request, not frames
        self._plain = False  # at a frame boundary, nothing skipped or fragmented under way
        self._header = b""  # an incomplete frame header
        self._left = 0  # payload bytes of the current frame still to come
        self._skipping = False  # the current frame's payload is passed over
        self._dropping = False  # the current message is passed over (until its last frame)
        self._fragment_passed = False  # a message's first fragment went to `websockets`
        self._passed_size = 0  # payload bytes of that message that went to `websockets`
        self._cutting = False  # that message went over the limit: its fragments go on empty
        self._fin = False
        self._mask = b""
        self._offset = 0
        self._size = 0
        self._head = b""
        self._tail = b""
        self._passed: list[bytes] = []  # bytes for `websockets` not handed over yet

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        if self.response.status_code == 101:  # weak: the scope is the protocol's own (no cycle)
            self.scope[CHANNEL_KEY] = weakref.ref(self)  # type: ignore[literal-required]

    def data_received(self, data: bytes) -> None:
        n = len(data)
        # The common case first (a step), in one test: at a frame boundary, one whole final text or
        # binary frame, masked, of under 126 bytes. Nothing to skip, no fragment begins.
        if self._plain and 5 < n < 132 and data[0] in _FINAL_DATA and data[1] == 0x80 | (n - 6):
            if data[0] == _FINAL_TEXT and n - 6 <= self._limit and not self.close_sent and self.conn.state is State.OPEN:
                try:
                    text = apply_mask(data[6:], data[2:6]).decode()
                except UnicodeDecodeError:  # `websockets`' path closes with 1007, as uvicorn does
                    pass
                else:
                    if not self._messages.put_nowait(text) and not self.read_paused:
                        self.read_paused = True  # no reader waits: hold the client back until one takes it
                        self.transport.pause_reading()
                    return
            super().data_received(data)
            return
        if not self._scanning:
            self._scanning = self._plain = True
            super().data_received(data)
            return
        passed = self._passed
        view, at, end = memoryview(data), 0, len(data)
        while at < end:
            if self._left:
                n = min(self._left, end - at)
                if self._skipping:
                    self._keep(view[at : at + n])
                else:
                    passed.append(bytes(view[at : at + n]))
                at += n
                self._left -= n
                if not self._left:
                    self._frame_done()
                continue
            before = len(self._header)
            self._header += bytes(view[at : at + 14 - before])
            parsed = _parse_header(self._header)
            if parsed is None:  # a header is at most 14 bytes: all that was left is in it
                at = end
                continue
            size, fin, opcode, length, mask = parsed
            at += size - before
            header, self._header = self._header[:size], b""
            self._fin, self._mask, self._offset, self._left = fin, mask, 0, length
            data_frame = opcode in (0, 1, 2)
            if data_frame and (self._dropping or (opcode != 0 and length > self._limit)):
                if not self._dropping:
                    self._dropping, self._size, self._head, self._tail = True, 0, b"", b""
                self._skipping = True
                self._size += length
            elif opcode == 0 and self._fragment_passed and (self._cutting or self._passed_size + length > self._limit):
                if not self._cutting:  # the fragments before this one are `websockets`' as they were
                    self._flush()
                    self._cutting, self._size, self._tail = True, self._passed_size, b""
                self._skipping = True
                self._size += length
            else:
                self._skipping = False
                if opcode in (1, 2):
                    self._fragment_passed, self._passed_size = not fin, length
                elif opcode == 0:
                    self._passed_size += length
                    if fin:
                        self._fragment_passed = False
                passed.append(header)
            if not length:
                self._frame_done()
        self._plain = not (self._left or self._header or self._dropping or self._fragment_passed)
        self._flush()

    def receive_message(self) -> Awaitable[Any]:
        """The next message for the session loop: a text message read by the fast path as its
        `str`, anything else as uvicorn's ASGI event (a dict). Reading paused (a message waited
        unread) resumes once the queue is empty, as in uvicorn's `receive`."""
        if self.read_paused:
            if self._messages.qsize():
                return self._receive_resuming()
            # taken already by a `get` that was waiting (uvicorn pauses after each message it queues)
            self.read_paused = False
            self.transport.resume_reading()
        return self._messages.get()  # the queue's own coroutine: no frame of ours around it

    async def _receive_resuming(self) -> Any:
        message = await self._messages.get()
        if self.read_paused and not self._messages.qsize():
            self.read_paused = False
            self.transport.resume_reading()
        return message

    async def receive(self) -> Any:
        message = await self._receive_resuming()
        if type(message) is str:  # the fast path's text, as uvicorn's event
            return {"type": "websocket.receive", "text": message}
        return message

    def pause_writing(self) -> None:
        self._write_paused = True
        super().pause_writing()

    def resume_writing(self) -> None:
        self._write_paused = False
        super().resume_writing()

    def send_text_now(self, text: str) -> bool:
        """Write a text message's frame as `send` would (`websockets` serializes it the same: a
        server's frames are unmasked), or False, having done nothing, where `send` must do it: the
        transport is full, the connection is not open, an extension is on."""
        if (
            self.close_sent
            or self.disconnected
            or self._write_paused
            or self.conn.extensions
            or self.conn.state is not State.OPEN
            or self.conn.expect_continuation_frame
        ):
            return False
        data = text.encode()
        n = len(data)
        if n < 126:
            self.transport.write(_SMALL_TEXT_HEADERS[n] + data)
        elif n < 65536:
            self.transport.write(struct.pack("!BBH", _FINAL_TEXT, 126, n) + data)
        else:
            self.transport.write(struct.pack("!BBQ", _FINAL_TEXT, 127, n) + data)
        return True

    def _flush(self) -> None:
        """Hand `websockets` the bytes passed so far, in order with what the scanner does next."""
        if self._passed:
            data = b"".join(self._passed)
            self._passed.clear()
            super().data_received(data)

    def _keep(self, chunk: memoryview) -> None:
        """Keep the first and last bytes of a skipped message, unmasked."""
        offset, mask = self._offset, self._mask
        self._offset += len(chunk)
        if len(self._head) < _EDGE and not self._cutting:  # a cut message's head is in its first fragment
            self._head += _unmask(bytes(chunk[: _EDGE - len(self._head)]), mask, offset)
        last = chunk[-_EDGE:]
        self._tail = (self._tail + _unmask(bytes(last), mask, offset + len(chunk) - len(last)))[-_EDGE:]

    def _frame_done(self) -> None:
        if not self._skipping:
            return
        self._skipping = False
        if self._cutting:  # the frame goes on to `websockets` with no payload, once its tail is kept
            self._passed.append(_empty_frame(self._fin, self._mask))
            if self._fin:
                self._fragment_passed = False
                self._flush()  # `handle_cont` hands the app the event, then the cut is over
            return
        if self._fin:  # the skipped message's last frame
            self._dropping = False
            self._flush()  # messages before it first
            self._oversize()

    def handle_cont(self, event: Frame) -> None:
        if not self._cutting:
            super().handle_cont(event)
            return
        if self.frames:  # the fragments held before the cut: their first bytes hold the id
            head = b""
            for fragment in self.frames:
                head += bytes(fragment[: _EDGE - len(head)])
                if len(head) >= _EDGE:
                    break
            self._head, self.frames = head, []
        if event.fin:
            self._cutting = False
            self._oversize()

    def _oversize(self) -> None:
        """Hand the app the event that stands for a message over the limit."""
        if not self.close_sent:
            oversize = {"bytes": self._size, "id": salvage_id(self._head, self._tail)}
            self.queue.put_nowait({"type": "websocket.receive", OVERSIZE_KEY: oversize})  # type: ignore[arg-type]
        self._head = self._tail = b""


def _empty_frame(fin: bool, mask: bytes) -> bytes:
    """A continuation frame's header with no payload (FIN as given, masked as the client's)."""
    return bytes((0x80 if fin else 0x00, 0x80 if mask else 0x00)) + mask


def _parse_header(header: bytes) -> tuple[int, bool, int, int, bytes] | None:
    """(header size, FIN, opcode, payload length, masking key) of a frame header, or None
    while `header` is too short."""
    if len(header) < 2:
        return None
    length, size = header[1] & 0x7F, 2
    if length == 126:
        size = 4
    elif length == 127:
        size = 10
    masked = header[1] & 0x80
    if len(header) < size + (4 if masked else 0):
        return None
    if size > 2:
        length = int.from_bytes(header[2:size], "big")
    mask = header[size : size + 4] if masked else b""
    return size + len(mask), bool(header[0] & 0x80), header[0] & 0x0F, length, mask


def _unmask(data: bytes, mask: bytes, offset: int) -> bytes:
    if not mask:
        return data
    key = (mask * 2)[offset % 4 : offset % 4 + 4]
    return bytes(b ^ key[i % 4] for i, b in enumerate(data))
