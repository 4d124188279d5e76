"""Small synchronous clients for the suite: one WebSocket session, and JSON-RPC over POST /mcp."""

from __future__ import annotations

import json
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_sdk.checks import CheckResult

__all__ = ["TIMEOUT_S", "WSSession", "holds", "jsonrpc", "ws_url"]

TIMEOUT_S = 10.0
"""Every wait of the suite (connect, reply, HTTP request), in seconds."""


def holds(*results: CheckResult) -> None:
    """Assert that each rule (a result of an `openenv_sdk.checks` rule function) passed; the
    failure message is the rule's own, with its fix."""
    for result in results:
        assert result.passed, f"{result.name}: {result.message} (fix: {result.fix})"


def ws_url(base_url: str, path: str = "/ws") -> str:
    base = base_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + path
    return "ws://" + base.removeprefix("http://") + path


class WSSession:
    """One `/ws` connection: send an envelope, read the one reply."""

    def __init__(self, base_url: str) -> None:
        self.url = ws_url(base_url)
        self.conn: ClientConnection = connect(self.url, open_timeout=TIMEOUT_S, close_timeout=TIMEOUT_S)

    def send_text(self, text: str) -> dict[str, Any]:
        """Send raw text; return the parsed reply."""
        self.conn.send(text)
        return self.receive()

    def receive(self) -> dict[str, Any]:
        try:
            raw = self.conn.recv(timeout=TIMEOUT_S)
        except TimeoutError:
            raise AssertionError(f"no reply on {self.url} within {TIMEOUT_S} s") from None
        reply = json.loads(raw)
        assert isinstance(reply, dict), f"a /ws reply must be a JSON object, got {raw!r}"
        return reply

    def request(self, kind: str, data: Any = None, **extra: Any) -> dict[str, Any]:
        """Send `{"type": kind, "data": data}` (data omitted when None); return the reply."""
        message: dict[str, Any] = {"type": kind, **extra}
        if data is not None:
            message["data"] = data
        return self.send_text(json.dumps(message))

    def expect(self, reply: dict[str, Any], kind: str, what: str) -> Any:
        """Assert the reply's type and return its `data`, with the server's error in the message."""
        assert reply.get("type") == kind, (
            f"{what}: expected a reply of type {kind!r}, got {reply.get('type')!r}: {json.dumps(reply)[:500]}"
        )
        return reply.get("data")

    def expect_error(self, reply: dict[str, Any], code: str, what: str) -> dict[str, Any]:
        data = self.expect(reply, "error", what)
        assert isinstance(data, dict), f"{what}: error data must be an object, got {data!r}"
        assert data.get("code") == code, (
            f"{what}: expected error code {code!r}, got {data.get('code')!r} ({data.get('message')!r})"
        )
        assert isinstance(data.get("message"), str) and data["message"], f"{what}: the error needs a message"
        return data

    def wait_closed(self) -> int | None:
        """Read until the server closes the socket; return the close code."""
        try:
            while True:
                self.conn.recv(timeout=TIMEOUT_S)
        except ConnectionClosed as e:
            return e.rcvd.code if e.rcvd is not None else None
        except TimeoutError:
            raise AssertionError(f"the server did not close {self.url} within {TIMEOUT_S} s") from None

    def close(self) -> None:
        self.conn.close()


def jsonrpc(
    client: httpx.Client, method: str, params: dict[str, Any] | None = None, request_id: int = 1
) -> dict[str, Any]:
    """POST one plain JSON-RPC 2.0 request to /mcp; return the parsed body (asserting HTTP 200)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    response = client.post("/mcp", json=body)
    assert response.status_code == 200, (
        f"POST /mcp {method}: JSON-RPC answers with HTTP 200 and the error in the body; "
        f"got HTTP {response.status_code}: {response.text[:300]}"
    )
    reply = response.json()
    assert reply.get("jsonrpc") == "2.0", f"POST /mcp {method}: reply lacks jsonrpc '2.0': {reply!r}"
    assert reply.get("id") == request_id, f"POST /mcp {method}: reply id {reply.get('id')!r} != {request_id}"
    return reply
