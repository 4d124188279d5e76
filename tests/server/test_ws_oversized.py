"""A WebSocket message over the limit sent in fragments: a typed error naming the limit, with the
request's id, and the session goes on (as for one frame over the limit).

The frames are real: built by `websockets`' sans-I/O client protocol and written on a plain
socket, several in one write where the order of what the server reads matters.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fixtures.envs import ProbeEnv, probe_factory
from fixtures.servers import ask, serve, ws_url
from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.http11 import Response
from websockets.sync.client import connect
from websockets.uri import parse_uri

from openenv_sdk import ServerConfig, create_app

LIMIT = 64 * 1024
"""`max_message_bytes` of the server under test (the protocol reads up to 64 KiB more)."""

FAR = 20 * 1024 * 1024
"""A fragment far over the limit."""


class FrameClient:
    """A WebSocket client on a plain socket: `websockets` builds the frames, `write` sends all
    that was built in one `sendall`, `replies` reads whole messages."""

    def __init__(self, url: str, *, timeout_s: float = 60.0) -> None:
        target = urlsplit(url)
        self.protocol = ClientProtocol(parse_uri(ws_url(url)), max_size=None)
        self.sock = socket.create_connection((target.hostname, target.port), timeout=timeout_s)
        self.protocol.send_request(self.protocol.connect())
        self.write()
        self._events: list[Any] = []
        while not any(isinstance(e, Response) for e in self._events):
            self._read()
        response = next(e for e in self._events if isinstance(e, Response))
        assert response.status_code == 101, response
        self._events = [e for e in self._events if not isinstance(e, Response)]

    def fragments(self, parts: list[str]) -> None:
        """One text message in `len(parts)` frames (built, not sent yet)."""
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if i == 0:
                self.protocol.send_text(part.encode(), fin=last)
            else:
                self.protocol.send_continuation(part.encode(), fin=last)

    def write(self) -> None:
        self.sock.sendall(b"".join(self.protocol.data_to_send()))

    def replies(self, count: int) -> list[dict[str, Any]]:
        """The next `count` messages, parsed; fails on a close frame (the session lost)."""
        got: list[dict[str, Any]] = []
        while len(got) < count:
            while not self._events:
                self._read()
            frame = self._events.pop(0)
            assert frame.opcode is not Opcode.CLOSE, f"the server closed the connection: {frame}"
            if frame.opcode is Opcode.TEXT:
                got.append(json.loads(frame.data))
        return got

    def _read(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise AssertionError("the server closed the connection")
        self.protocol.receive_data(data)
        self._events.extend(self.protocol.events_received())

    def close(self) -> None:
        self.sock.close()


def envelope(request_id: str | int, size: int, *, id_last: bool = False) -> str:
    message = "m" * size
    if id_last:
        return '{"type": "step", "data": {"message": "' + message + f'"}}, "id": {json.dumps(request_id)}}}'
    return json.dumps({"type": "step", "id": request_id, "data": {"message": message}})


def split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    app = create_app(ProbeEnv, factory=probe_factory(ProbeEnv), config=ServerConfig(max_message_bytes=LIMIT))
    with serve(app) as url:
        yield url


@pytest.fixture
def client(server: str) -> Iterator[FrameClient]:
    conn = FrameClient(server)
    conn.fragments([json.dumps({"type": "reset"})])
    conn.write()
    assert conn.replies(1)[0]["type"] == "observation"
    yield conn
    conn.close()


def assert_too_large(reply: dict[str, Any], request_id: str | int) -> None:
    assert reply["type"] == "error" and reply["data"]["code"] == "MESSAGE_TOO_LARGE", reply
    assert reply["id"] == request_id, reply
    assert f"limit of {LIMIT} bytes" in reply["data"]["message"], reply
    assert reply["data"]["max_message_bytes"] == LIMIT, reply


def step_answers(conn: FrameClient, message: str) -> None:
    conn.fragments([json.dumps({"type": "step", "id": "after", "data": {"message": message}})])
    conn.write()
    reply = conn.replies(1)[0]
    assert (reply["id"], reply["data"]["observation"]["echoed"]) == ("after", message), reply


@pytest.mark.parametrize(("request_id", "id_last"), [("frag-1", False), (7, True)])
@pytest.mark.parametrize("fragment_bytes", [16 * 1024, LIMIT])
def test_a_message_in_fragments_over_the_limit_gets_a_typed_error_and_the_session_goes_on(
    client: FrameClient, request_id: str | int, id_last: bool, fragment_bytes: int
) -> None:
    """A message sent in fragments, each under the limit but over it in all (4 MiB): a typed
    `MESSAGE_TOO_LARGE` error naming the limit, with the request's id (first key or last), and the
    session goes on (was a bare 1009 close, the session lost)."""
    for _ in range(2):
        client.fragments(split(envelope(request_id, 4 * 1024 * 1024, id_last=id_last), fragment_bytes))
        client.write()
        assert_too_large(client.replies(1)[0], request_id)
        step_answers(client, "still here")


def test_a_fragment_far_over_the_limit_is_passed_over(client: FrameClient) -> None:
    """A message whose first fragment is small and whose next is far over the limit (20 MiB):
    the typed error with the id, and the session goes on (was a bare 1009 close)."""
    text = envelope("far", FAR)
    client.fragments([text[:100], text[100:-100], text[-100:]])
    client.write()
    assert_too_large(client.replies(1)[0], "far")
    step_answers(client, "after the far one")


def test_messages_around_a_cut_one_in_one_burst_are_read_whole_and_in_order(client: FrameClient) -> None:
    """In one write: a fragmented message within the limit, one over it in fragments, another
    within it in fragments and a plain one: each answered in order, the ones within the limit
    read whole."""
    small = json.dumps({"type": "step", "id": "s1", "data": {"message": "a" * 3000}})
    client.fragments(split(small, 1000))
    client.fragments(split(envelope("big", 2 * LIMIT), 8 * 1024))
    again = json.dumps({"type": "step", "id": "s2", "data": {"message": "b" * 5000}})
    client.fragments(split(again, 700))
    client.fragments([json.dumps({"type": "state", "id": "s3"})])
    client.write()
    replies = client.replies(4)
    assert [r["id"] for r in replies] == ["s1", "big", "s2", "s3"], replies
    assert replies[0]["data"]["observation"]["echoed"] == "a" * 3000
    assert_too_large(replies[1], "big")
    assert replies[2]["data"]["observation"]["echoed"] == "b" * 5000
    assert replies[3]["type"] == "state"


def test_a_message_in_fragments_within_the_limit_is_read_whole(server: str) -> None:
    """The control: a message in fragments whose sum is just within the limit reaches the
    environment whole (through the `websockets` client's own fragmenting)."""
    with connect(ws_url(server), open_timeout=5, max_size=None) as conn:
        assert ask(conn, "reset")["type"] == "observation"
        text = json.dumps({"type": "step", "id": "whole", "data": {"message": "c" * (LIMIT - 100)}})
        conn.send(split(text, 4096))
        reply = json.loads(conn.recv(timeout=30))
        assert (reply["id"], reply["data"]["observation"]["echoed"]) == ("whole", "c" * (LIMIT - 100)), reply
