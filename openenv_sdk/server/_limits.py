"""Limits on what a request may hold, checked before any route or parser reads it.

- `BodyLimitMiddleware`: an HTTP body past `max_message_bytes` gets 413 `MESSAGE_TOO_LARGE`;
  a body that is not UTF-8, or whose JSON nests deeper than `max_json_depth`, gets 400
  `INVALID_JSON` (on `/mcp`, a JSON-RPC parse error), so that no parser recurses into it.
- `check_json_text`: the same checks for a WebSocket message.
"""

from __future__ import annotations

import itertools
import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..types import ErrorCode
from ._protocol import RequestRefused

__all__ = ["DEFAULT_MAX_JSON_DEPTH", "BodyLimitMiddleware", "check_json_text", "json_depth"]

DEFAULT_MAX_JSON_DEPTH = 256
"""Deepest nesting of arrays and objects accepted in a message (Python's parsers recurse)."""

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_DELTA = {ord("["): 1, ord("]"): -1}


def json_depth(raw: bytes, *, at_most: int) -> int:
    """The nesting depth of the JSON text `raw`, or some depth up to `at_most` when it is not
    deeper than that. Linear, and run in C but for one pass over the brackets (no parsing):
    strings are cut out first, so brackets inside them do not count."""
    if raw.count(b"[") + raw.count(b"{") <= at_most:
        return 0
    structure = _JSON_STRING.sub(b"", raw) if b'"' in raw else raw
    brackets = structure.translate(None, _NOT_BRACKET).replace(b"{", b"[").replace(b"}", b"]")
    if brackets.count(b"[") <= at_most:
        return 0
    return max(itertools.accumulate(map(_DELTA.__getitem__, brackets)))


def check_json_text(raw: bytes, *, max_depth: int) -> str:
    """`raw` decoded as UTF-8, refused when it is not UTF-8 or nests deeper than `max_depth`.

    Raises:
        RequestRefused: `INVALID_JSON`, saying which.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestRefused(
            ErrorCode.INVALID_JSON, f"Invalid JSON: the message is not UTF-8 ({e.reason} at byte {e.start})"
        ) from e
    depth = json_depth(raw, at_most=max_depth)
    if depth > max_depth:
        raise RequestRefused(
            ErrorCode.INVALID_JSON,
            f"Invalid JSON: nested {depth} levels deep; the limit is {max_depth}",
            details={"max_json_depth": max_depth},
        )
    return text


class BodyLimitMiddleware:
    """Answers 413 `MESSAGE_TOO_LARGE` to a body declared or sent past `max_bytes`, and 400
    `INVALID_JSON` to a body that is not UTF-8 or nests deeper than `max_json_depth`."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_json_depth: int = DEFAULT_MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(send, int(value))
                return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        # A body without a (truthful) length is read here, up to the limit, then replayed.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, size)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body:
            try:
                check_json_text(body, max_depth=self.max_json_depth)
            except RequestRefused as e:
                await self._send_error(send, e, jsonrpc=scope.get("path") == "/mcp")
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, size: int) -> None:
        error = RequestRefused(
            ErrorCode.MESSAGE_TOO_LARGE, f"Request body of {size} bytes exceeds the limit of {self.max_bytes} bytes"
        )
        await self._send_error(send, error, jsonrpc=False)

    async def _send_error(self, send: Send, error: RequestRefused, *, jsonrpc: bool) -> None:
        if jsonrpc:  # what a JSON-RPC client of /mcp can read: a parse error, with our code in `data`
            content = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": error.message, "data": error.payload()}}
        else:
            content = {"detail": error.payload()}
        body = json.dumps(content).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
