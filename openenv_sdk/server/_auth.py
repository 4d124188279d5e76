"""The orchestrator's token, and the `X-Request-Id` of every HTTP exchange.

When the server has an orchestrator token, every route but discovery (`/health`,
`/metadata`, `/schema`, `/openapi.json`) and the agent's `/mcp` (guarded by its own per-session
token) needs `Authorization: Bearer <token>`: HTTP requests and the WebSocket upgrade alike.
The token comes from `ServerConfig.orchestrator_token`, else from the environment variable
`OPENENV_ORCHESTRATOR_TOKEN`, which the server removes from its own environment at startup so
that no process it starts inherits it.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..types import ORCHESTRATOR_TOKEN_VAR, ErrorCode
from ._protocol import RequestRefused

__all__ = [
    "ORCHESTRATOR_TOKEN_VAR",
    "PUBLIC_PATHS",
    "REQUEST_ID_HEADER",
    "OrchestratorAuthMiddleware",
    "RequestIdMiddleware",
    "take_token_from_environ",
]


PUBLIC_PATHS = frozenset({"/health", "/metadata", "/schema", "/openapi.json", "/mcp"})
"""Paths open without the orchestrator token (`/mcp` checks each session's MCP token itself)."""

REQUEST_ID_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,255}")


def take_token_from_environ() -> str | None:
    """Pop `OPENENV_ORCHESTRATOR_TOKEN` from this process's environment; its value, or None."""
    return os.environ.pop(ORCHESTRATOR_TOKEN_VAR, None) or None


def _bearer(scope: Scope) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].strip()
    return None


class OrchestratorAuthMiddleware:
    """Refuses requests without `Authorization: Bearer <token>`: HTTP with 401 `UNAUTHORIZED`,
    a WebSocket upgrade with the same 401 response (or a 1008 close where the server cannot
    send one). The comparison takes the same time whatever the token sent."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def __repr__(self) -> str:
        return "<OrchestratorAuthMiddleware>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        sent = _bearer(scope)
        if sent is not None and hmac.compare_digest(sent, self._token):
            await self.app(scope, receive, send)
            return
        why = "no orchestrator token" if sent is None else "a wrong orchestrator token"
        error = RequestRefused(
            ErrorCode.UNAUTHORIZED,
            f"This server requires the orchestrator's token and the request has {why}: send "
            f"`Authorization: Bearer <token>` (open without it: {', '.join(sorted(PUBLIC_PATHS))})",
        )
        body = json.dumps({"detail": error.payload()}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="openenv"'),
        ]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": ErrorCode.UNAUTHORIZED.value})


class RequestIdMiddleware:
    """Echoes the request's `X-Request-Id` on its response, or gives it a new one when the
    request has none (or one that is not 1 to 255 visible ASCII characters). A route that set
    the header itself (from a body's `request_id`) keeps its value."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = None
        for key, value in scope.get("headers", ()):
            if key == b"x-request-id":
                text = value.decode("latin-1")
                request_id = text if _REQUEST_ID.fullmatch(text) else None
                break
        given = request_id is not None
        header = (request_id or secrets.token_hex(16)).encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if given or not any(k.lower() == b"x-request-id" for k, _ in headers):
                    headers = [(k, v) for k, v in headers if k.lower() != b"x-request-id"]
                    headers.append((b"x-request-id", header))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)
