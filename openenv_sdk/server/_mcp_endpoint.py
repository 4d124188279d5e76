"""`/mcp` routing: plain JSON-RPC (OpenEnv's clients) is answered here; MCP client sessions
go to the official `mcp` SDK's server, which is imported and started on first use (its import
costs about a second, which a server's cold start should not pay).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .._mcp_imports import MCP_IMPORT_LOCK
from ._mcp_compat import INVALID_PARAMS, PARSE_ERROR, handle_jsonrpc, token_from_request

if TYPE_CHECKING:
    from ._state import ServerState

__all__ = ["McpEndpoint", "warm_up_mcp"]


def warm_up_mcp() -> None:
    """Import the official MCP server ahead of its first use (run in a worker thread, while the
    server already answers), disturbing the event loop as little as it can:

    - no garbage collection during the import, and its objects frozen after it (`gc.freeze`):
      otherwise the import's ~100,000 new objects set off a full collection, a ~60 ms pause of
      every session, and every later full collection walks them again;
    - a short GIL switch interval meanwhile, so that the event loop waits ~1 ms, not 5 ms, for
      the GIL each time the import holds it.
    """
    if f"{__package__}._mcp" in sys.modules:
        return
    switch_s, collecting = sys.getswitchinterval(), gc.isenabled()
    sys.setswitchinterval(min(switch_s, 0.001))
    gc.disable()
    try:
        with MCP_IMPORT_LOCK:
            from . import _mcp  # noqa: F401
    finally:
        gc.freeze()  # what lives now (modules, classes, the app) lives as long as the process
        if collecting:
            gc.enable()
        sys.setswitchinterval(switch_s)


class McpEndpoint:
    """ASGI endpoint for `/mcp`: MCP client sessions go to the official server; plain JSON-RPC
    POSTs (no `Mcp-Session-Id`, no `MCP-Protocol-Version`, no `text/event-stream` in Accept)
    go to the OpenEnv-compatible handler."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._manager: Any = None
        self._starting: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def _session_manager(self) -> Any:
        if self._manager is None:
            self._starting = self._starting or asyncio.Lock()
            async with self._starting:
                if self._manager is None:
                    with MCP_IMPORT_LOCK:
                        from ._mcp import build_session_manager

                    manager = build_session_manager(self.state)
                    ready, self._stop = asyncio.Event(), asyncio.Event()
                    self._runner = asyncio.create_task(self._run(manager, ready), name="openenv-mcp")
                    await ready.wait()
                    self._manager = manager
        return self._manager

    async def _run(self, manager: Any, ready: asyncio.Event) -> None:
        # The session manager's task group must stay entered while MCP sessions live.
        assert self._stop is not None
        async with manager.run():
            ready.set()
            await self._stop.wait()

    def session_count(self) -> int:
        """Open MCP sessions (0 before the official server's first use)."""
        manager = self._manager
        return len(manager._server_instances) if manager is not None else 0

    async def aclose(self) -> None:
        """Stop the official MCP server, if it was started."""
        if self._runner is not None and self._stop is not None:
            self._stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
            self._runner = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        plain = (
            scope["method"] == "POST"
            and "mcp-session-id" not in headers
            and "mcp-protocol-version" not in headers
            and "text/event-stream" not in headers.get("accept", "")
        )
        if not plain:
            manager = await self._session_manager()
            await manager.handle_request(scope, receive, send)
            return
        body = await _read_body(receive)  # size, UTF-8 and depth checked by BodyLimitMiddleware
        reply = await self._answer_plain(body, scope, headers)
        payload = json.dumps(reply).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def _answer_plain(self, body: bytes, scope: Scope, headers: dict[str, str]) -> Any:
        try:
            payload = json.loads(body or b"null")
        except (ValueError, RecursionError) as e:
            return {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": f"Parse error: {e}"}}
        token = token_from_request(Request(scope))
        session = self.state.sessions.get_by_token(token) if token else None
        if token and session is None:
            request_id = payload.get("id") if isinstance(payload, dict) else None
            return {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": INVALID_PARAMS, "message": "Unknown or expired MCP session token"},
            }
        return await handle_jsonrpc(payload, session=session, env_cls=self.state.env_cls)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
