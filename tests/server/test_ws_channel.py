"""The WebSocket channel under the session loop (`ServerWebSocketProtocol.receive_message` and
`send_text_now`): a small text frame is read without `websockets`' parser and a reply's frame is
written directly. What goes on the wire must be what `websockets` would have written, and what
the fast path skips (the parser's state, uvicorn's flow control) must not change what a client
sees: frames over the wire here are raw bytes on a plain socket, read back byte for byte.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fixtures.envs import ProbeAction, ProbeEnv, ProbeObservation, probe_factory
from fixtures.servers import serve, ws_url
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from openenv_sdk import ServerConfig, create_app


def _slow_step(env: ProbeEnv, action: ProbeAction) -> ProbeObservation:
    if action.message.startswith("slow"):
        time.sleep(0.3)  # a BLOCKING environment: on a thread, the loop free meanwhile
    return ProbeObservation(echoed=action.message * action.count)


class RawClient:
    """A client on a plain socket: the handshake by `websockets`' sans-I/O client, then frames
    built and read here, byte for byte."""

    def __init__(self, url: str, *, timeout_s: float = 20.0) -> None:
        target = urlsplit(url)
        protocol = ClientProtocol(parse_uri(ws_url(url)), max_size=None)
        self.sock = socket.create_connection((target.hostname, target.port), timeout=timeout_s)
        protocol.send_request(protocol.connect())
        self.sock.sendall(b"".join(protocol.data_to_send()))
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        protocol.receive_data(head + b"\r\n\r\n")
        response = next(e for e in protocol.events_received() if isinstance(e, Response))
        assert response.status_code == 101, response

    def frame(self, payload: bytes, opcode: int = 0x1) -> bytes:
        """A final, masked client frame."""
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = bytes((0x80 | opcode, 0x80 | n))
        elif n < 65536:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

    def send(self, payload: bytes, opcode: int = 0x1) -> None:
        self.sock.sendall(self.frame(payload, opcode))

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(message).encode())
        raw, opcode, payload = self.read_frame()
        assert opcode == 0x1, (opcode, payload)
        reply = json.loads(payload)
        assert isinstance(reply, dict)
        return reply

    def read_frame(self) -> tuple[bytes, int, bytes]:
        """(the frame's bytes as sent, its opcode, its payload) of the next frame."""
        self._need(2)
        length, size = self.buffer[1] & 0x7F, 2
        assert not self.buffer[1] & 0x80, "a server's frames are never masked"
        if length == 126:
            self._need(4)
            length, size = struct.unpack("!H", self.buffer[2:4])[0], 4
        elif length == 127:
            self._need(10)
            length, size = struct.unpack("!Q", self.buffer[2:10])[0], 10
        self._need(size + length)
        raw, self.buffer = self.buffer[: size + length], self.buffer[size + length :]
        return raw, raw[0] & 0x0F, raw[size:]

    def _need(self, n: int) -> None:
        while len(self.buffer) < n:
            self.buffer += self._recv()

    def _recv(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the server closed the connection")
        return data

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    app = create_app(
        ProbeEnv,
        factory=probe_factory(ProbeEnv, step_func=_slow_step),
        config=ServerConfig(max_message_bytes=1024 * 1024),
    )
    with serve(app) as url:
        yield url


@pytest.fixture
def client(server: str) -> Iterator[RawClient]:
    conn = RawClient(server)
    assert conn.ask({"type": "reset"})["type"] == "observation"
    yield conn
    conn.close()


@pytest.mark.parametrize("count", [1, 30, 3000])  # a reply's length under 126, under 64 KiB, over it
def test_a_reply_frame_is_what_websockets_serializes(client: RawClient, count: int) -> None:
    """The reply to a small text frame, byte for byte: the frame `websockets` would build for
    the same payload (one header for each of the three length encodings)."""
    client.send(json.dumps({"type": "step", "id": count, "data": {"message": "abcdefghijklmnopqrstuv", "count": count}}).encode())
    raw, opcode, payload = client.read_frame()
    assert raw == Frame(Opcode.TEXT, payload).serialize(mask=False)
    reply = json.loads(payload)
    assert (reply["id"], reply["data"]["observation"]["echoed"]) == (count, "abcdefghijklmnopqrstuv" * count)


def test_non_ascii_text_is_read_and_answered_whole(client: RawClient) -> None:
    """A small frame of multi-byte UTF-8 (decoded on the fast path) reaches the environment as sent."""
    reply = client.ask({"type": "step", "id": "é", "data": {"message": "héllo wörld ✓ 🦀"}})
    assert (reply["id"], reply["data"]["observation"]["echoed"]) == ("é", "héllo wörld ✓ 🦀")


def test_a_small_frame_of_invalid_utf8_closes_with_1007(client: RawClient) -> None:
    """Text that is not UTF-8 in a small frame: the connection is closed with 1007, as
    uvicorn closes it for any text message that is not UTF-8."""
    client.send(b'{"type": "step", "data": {"message": "\xff\xfe"}}')
    raw, opcode, payload = client.read_frame()
    assert opcode == 0x8, (opcode, payload)
    assert struct.unpack("!H", payload[:2])[0] == 1007


def test_messages_sent_while_a_call_runs_are_answered_in_order(client: RawClient) -> None:
    """Frames sent one by one while the loop waits on a slow call (they queue, and reading is
    paused) are all answered, in the order sent, once it ends."""
    client.send(json.dumps({"type": "step", "id": "slow", "data": {"message": "slow"}}).encode())
    for i in range(20):
        client.send(json.dumps({"type": "step", "id": i, "data": {"message": f"m{i}"}}).encode())
        time.sleep(0.005)  # separate reads on the server, each a frame of its own
    replies = [json.loads(client.read_frame()[2]) for _ in range(21)]
    assert [r["id"] for r in replies] == ["slow", *range(20)], replies
    assert [r["data"]["observation"]["echoed"] for r in replies[1:]] == [f"m{i}" for i in range(20)]
    assert client.ask({"type": "state", "id": "after"})["id"] == "after"


def test_a_text_frame_after_the_clients_close_is_not_answered(client: RawClient) -> None:
    """After the client's close frame, a text frame it sends is not read (as `websockets`
    discards it): the server's close comes back and no reply."""
    client.send(struct.pack("!H", 1000), opcode=0x8)
    time.sleep(0.2)
    try:
        client.send(json.dumps({"type": "state", "id": "late"}).encode())
    except OSError:
        pass  # the server closed the socket first: nothing could be answered either
    frames = []
    try:
        while True:
            frames.append(client.read_frame())
    except (ConnectionError, OSError):
        pass
    assert [opcode for _, opcode, _ in frames] == [0x8], frames


def test_small_and_large_messages_alternate(client: RawClient) -> None:
    """Messages over 125 bytes go through `websockets`' parser and uvicorn's queueing (which
    pauses reading after each); small ones take the fast path: alternated, each is answered
    (a reader that waited on a paused connection would hang here)."""
    for i in range(6):
        message = "y" * (300 if i % 2 else 3)
        reply = client.ask({"type": "step", "id": i, "data": {"message": message}})
        assert (reply["id"], reply["data"]["observation"]["echoed"]) == (i, message)


def test_a_middleware_that_wraps_receive_still_sees_every_message() -> None:
    """An app wrapped in a middleware that reads the messages on their way in (here: counts
    them): the loop keeps to the ASGI channel, so the middleware sees each step."""
    seen: list[str] = []
    inner = create_app(ProbeEnv, factory=probe_factory(ProbeEnv))

    class Counting:
        state = inner.state  # `serve` runs it on our protocols, as it runs `inner`

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            async def counted() -> Any:
                message = await receive()
                if message.get("text") is not None:
                    seen.append(message["text"])
                return message

            await inner(scope, counted if scope["type"] == "websocket" else receive, send)

    with serve(Counting()) as url:
        conn = RawClient(url)
        try:
            assert conn.ask({"type": "reset"})["type"] == "observation"
            for i in range(3):
                assert conn.ask({"type": "step", "id": i, "data": {"message": "hi"}})["id"] == i
        finally:
            conn.close()
    assert len(seen) == 4, seen
