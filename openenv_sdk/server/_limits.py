"""Refuse HTTP bodies over the server's `max_message_bytes` before any route reads them."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..types import ErrorCode
from ._protocol import ProtocolError

__all__ = ["BodyLimitMiddleware"]


class BodyLimitMiddleware:
    """Answers 413 `MESSAGE_TOO_LARGE` to a body declared or sent past `max_bytes`."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

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
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, size: int) -> None:
        error = ProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE, f"Request body of {size} bytes exceeds the limit of {self.max_bytes} bytes"
        )
        body = json.dumps({"detail": error.payload()}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.http_status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
