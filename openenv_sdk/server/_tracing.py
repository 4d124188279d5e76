"""Server spans (only when `openenv_sdk.tracing` is on): one per HTTP request and per `/ws` message.

Each is a child of the caller's span when the request carries W3C trace context: the
`traceparent` (and `tracestate`) header of an HTTP request, or the same fields at the top level
of a `/ws` envelope (one connection carries many requests, so a header could not).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send

from .. import tracing

if TYPE_CHECKING:
    from ._session import Session
    from ._state import ServerState

__all__ = ["TracingMiddleware", "handle_traced"]

Handler = Callable[["Session", str, "ServerState"], Awaitable[tuple[str | None, bool]]]


class TracingMiddleware:
    """A server span around each HTTP request (`openenv.http METHOD PATH`) but MCP's; WebSockets pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/mcp":
            # MCP requests have the mcp SDK's own spans, parented through the request's `_meta`
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in (b"traceparent", b"tracestate")}
        status: dict[str, int] = {}

        async def send_status(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        name = f"openenv.http {scope['method']} {scope['path']}"
        attributes = {"http.request.method": scope["method"], "url.path": scope["path"]}
        with tracing.span(name, kind="server", attributes=attributes, parent=tracing.extract(headers)) as span:
            await self.app(scope, receive, send_status)
            tracing.set_attributes(span, {"http.response.status_code": status.get("code")})


async def handle_traced(handle: Handler, session: Session, text: str, state: ServerState) -> tuple[str | None, bool]:
    """`handle` (one `/ws` message) in a span `openenv.ws <type>`, the child of the envelope's trace context."""
    try:
        message = json.loads(text)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        message = {}
    kind = message.get("type") if isinstance(message.get("type"), str) else "invalid"
    attributes = {"openenv.session_id": session.id, "openenv.message_type": kind}
    with tracing.span(f"openenv.ws {kind}", kind="server", attributes=attributes, parent=tracing.extract(message)):
        return await handle(session, text, state)
