"""A minimal WebSocket client and a fixed-reply WebSocket server, for bench_echo.py.

The concurrency test drives thousands of connections from a 2-core machine; the `websockets`
library costs tens of microseconds of Python per message, enough for the client to become
the limit. These two pieces do the least RFC 6455 asks of each side:

- `RawWebSocket`: the client, on a bare asyncio protocol.
- `CeilingProtocol` / `serve_fixed_reply`: the harness ceiling, a server that answers every
  data frame with one fixed frame (no JSON, no env). What the client measures against it is
  the most this client can drive here.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os

__all__ = ["CeilingProtocol", "RawWebSocket", "serve_fixed_reply", "server_frame"]

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key: bytes) -> bytes:
    """The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key`."""
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def server_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """An unmasked (server) frame, FIN set."""
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, n))
    elif n < 65536:
        head = bytes((0x80 | opcode, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 127)) + n.to_bytes(8, "big")
    return head + payload


def _expire(waiter: asyncio.Future[bytes], timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError(f"no reply in {timeout_s:.0f} s"))


class RawWebSocket(asyncio.Protocol):
    """A minimal RFC 6455 client on a bare asyncio protocol, for the concurrency test.

    The `websockets` client spends tens of microseconds of Python per message (a task per
    connection, frame objects, a `wait_for` task per timed receive); with thousands of
    connections on two cores the client, not the server, becomes the limit. This one does the
    least a client must: the upgrade handshake (checking `Sec-WebSocket-Accept`), masked
    frames (pre-built: the same bytes for every step), reassembly of fragmented messages,
    pong for ping, and the close handshake. It is measured against the ceiling server like
    everything else (`--conc-client websockets` switches back for comparison).
    """

    def __init__(self, host: str, path: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._key = base64.b64encode(os.urandom(16))
        self._request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {self._key.decode()}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
        self._handshake: asyncio.Future[None] = self._loop.create_future()
        self._buf = bytearray()
        self._fragments: list[bytes] | None = None
        self._messages: list[bytes] = []
        self._waiter: asyncio.Future[bytes] | None = None
        self._lost: asyncio.Future[None] = self._loop.create_future()
        self._closed_reason: str | None = None
        self.transport: asyncio.Transport | None = None

    @staticmethod
    def frame(opcode: int, payload: bytes) -> bytes:
        """A masked client frame (FIN set)."""
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = bytes((0x80 | opcode, 0x80 | n))
        elif n < 65536:
            head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
        else:
            head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
        key = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
        return head + mask + masked

    @classmethod
    async def open(cls, host: str, port: int, path: str, timeout_s: float) -> RawWebSocket:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            _, proto = await loop.create_connection(lambda: cls(f"{host}:{port}", path), host, port)
            await proto._handshake
        return proto

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self._request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self._handshake.done():
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buf[:end])
            del self._buf[: end + 4]
            self._check_handshake(head)
            if not self._handshake.done():
                return
        self._parse()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed_reason = self._closed_reason or f"connection lost ({exc or 'EOF'})"
        error = ConnectionError(self._closed_reason)
        if not self._handshake.done():
            self._handshake.set_exception(error)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        if not self._lost.done():
            self._lost.set_result(None)

    # -- protocol details
    def _check_handshake(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        if not lines[0].startswith(b"HTTP/1.1 101"):
            self._handshake.set_exception(
                ConnectionError(f"upgrade refused: {lines[0].decode(errors='replace')}")
            )
            return
        expected = accept_key(self._key)
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"sec-websocket-accept":
                if value.strip() != expected:
                    self._handshake.set_exception(ConnectionError("bad Sec-WebSocket-Accept"))
                    return
                self._handshake.set_result(None)
                return
        self._handshake.set_exception(ConnectionError("no Sec-WebSocket-Accept"))

    def _parse(self) -> None:
        buf = self._buf
        pos = 0
        size = len(buf)
        while size - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            length = b1 & 0x7F
            header = 2
            if length == 126:
                if size - pos < 4:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 4], "big")
                header = 4
            elif length == 127:
                if size - pos < 10:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                header = 10
            masked = b1 & 0x80
            if masked:
                header += 4
            if size - pos < header + length:
                break
            payload = bytes(buf[pos + header : pos + header + length])
            if masked:  # servers must not mask, but unmask rather than misread
                key = bytes(buf[pos + header - 4 : pos + header])
                payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            pos += header + length
            opcode = b0 & 0x0F
            fin = b0 & 0x80
            if opcode in (0x1, 0x2):
                if fin:
                    self._deliver(payload)
                else:
                    self._fragments = [payload]
            elif opcode == 0x0 and self._fragments is not None:
                self._fragments.append(payload)
                if fin:
                    self._deliver(b"".join(self._fragments))
                    self._fragments = None
            elif opcode == 0x9 and self.transport is not None:
                self.transport.write(self.frame(0xA, payload))
            elif opcode == 0x8:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self._closed_reason = f"closed by server ({code} {payload[2:].decode(errors='replace')})"
                if self.transport is not None:
                    self.transport.write(self.frame(0x8, payload[:2]))
                    self.transport.close()
        del buf[:pos]

    def _deliver(self, message: bytes) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._waiter = None
            waiter.set_result(message)
        else:
            self._messages.append(message)

    # -- the client API
    async def request(self, frame: bytes, timeout_s: float) -> bytes:
        """Send one pre-built frame; return the next data message."""
        if self._closed_reason is not None:
            raise ConnectionError(self._closed_reason)
        assert self.transport is not None
        self.transport.write(frame)
        if self._messages:
            return self._messages.pop(0)
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(timeout_s, _expire, waiter, timeout_s)
        try:
            return await waiter
        finally:
            timer.cancel()

    async def close(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(self.frame(0x8, (1000).to_bytes(2, "big")))
        try:
            async with asyncio.timeout(10):
                await self._lost  # the server answers the close and drops TCP
        except TimeoutError:
            self.transport.abort()


class CeilingProtocol(asyncio.Protocol):
    """Server side of the ceiling: upgrade, then one fixed text frame per client data frame."""

    def __init__(self, reply: bytes) -> None:
        self.reply = server_frame(reply)
        self.buf = bytearray()
        self.upgraded = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            key = b""
            for line in bytes(self.buf[:end]).split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"sec-websocket-key":
                    key = value.strip()
            del self.buf[: end + 4]
            accept = accept_key(key)
            self.transport.write(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
            )
            self.upgraded = True
        buf, pos, size = self.buf, 0, len(self.buf)
        replies = 0
        while size - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            length, header = b1 & 0x7F, 6  # client frames are masked: 4-byte key
            if length == 126:
                length, header = int.from_bytes(buf[pos + 2 : pos + 4], "big"), 8
            elif length == 127:
                length, header = int.from_bytes(buf[pos + 2 : pos + 10], "big"), 14
            if size - pos < header + length:
                break
            pos += header + length
            opcode = b0 & 0x0F
            if opcode in (0x1, 0x2):
                replies += 1
            elif opcode == 0x8:
                self.transport.write(b"\x88\x02\x03\xe8")
                self.transport.close()
                return
        del buf[:pos]
        if replies:
            self.transport.write(self.reply * replies)


async def serve_fixed_reply(port: int, reply: bytes, stop: asyncio.Future[None]) -> None:
    """Serve the ceiling on 127.0.0.1:`port` until `stop` resolves."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: CeilingProtocol(reply), "127.0.0.1", port, backlog=16384)
    async with server:
        await stop
