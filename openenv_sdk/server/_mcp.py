"""`/mcp`: standard MCP over streamable HTTP (the official `mcp` SDK), bound to episodes.

An agent's MCP connection names its episode with the session's MCP token, as the query
parameter `?session=TOKEN`, the header `Authorization: Bearer TOKEN`, or `X-OpenEnv-MCP-Token`.
`tools/list` needs no token; `tools/call` does. Plain JSON-RPC POSTs without an MCP session
(OpenEnv's clients, `openenv validate --url`) are answered by `_mcp_compat`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from ._mcp_compat import INVALID_PARAMS, PARSE_ERROR, handle_jsonrpc, mcp_tool_list, public_result
from ._protocol import ProtocolError

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._app import ServerState
    from ._session import Session

__all__ = ["McpEndpoint", "build_mcp_server"]

TOKEN_HEADER = "x-openenv-mcp-token"


def token_from_request(request: Any) -> str | None:
    """The session's MCP token from an HTTP request (query, bearer header, or our header)."""
    if request is None:
        return None
    token = request.query_params.get("session") if hasattr(request, "query_params") else None
    headers = getattr(request, "headers", None) or {}
    if not token:
        token = headers.get(TOKEN_HEADER)
    if not token:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
    return token or None


def _bound_session(state: ServerState, request: Any) -> Session:
    token = token_from_request(request)
    if token is None:
        raise MCPError(
            INVALID_PARAMS,
            "This MCP connection is not bound to an episode: connect to /mcp?session=<mcp_token> "
            "(the token comes from the orchestrator's session: POST /sessions, or the WebSocket 'session' message)",
        )
    session = state.sessions.get_by_token(token)
    if session is None:
        raise MCPError(INVALID_PARAMS, "Unknown or expired MCP session token: the episode's session has ended")
    return session


def build_mcp_server(state: ServerState) -> Server[Any]:
    """The official low-level MCP server over the environment class's tools."""
    env_cls = state.env_cls
    tools = [types.Tool.model_validate(t) for t in mcp_tool_list(env_cls)]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        session = _bound_session(state, ctx.request)
        try:
            outcome = await session.call_tool(params.name, params.arguments or {}, source="mcp")
        except ProtocolError as e:
            raise MCPError(INVALID_PARAMS, e.message) from e
        return types.CallToolResult.model_validate(public_result(outcome))

    return Server(
        env_cls.name,
        version=env_cls.version or "0",
        description=env_cls.description or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class McpEndpoint:
    """ASGI endpoint for `/mcp`: MCP client sessions go to the official server; plain JSON-RPC
    POSTs (no `Mcp-Session-Id`, no `MCP-Protocol-Version`, no `text/event-stream` in Accept)
    go to the OpenEnv-compatible handler."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.server = build_mcp_server(state)
        # The session token authenticates tool calls; Host checks would refuse published ports.
        self.app = self.server.streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=state.config.idle_timeout_s or 3600.0,
        )
        self.session_manager = self.server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        plain = (
            scope["method"] == "POST"
            and "mcp-session-id" not in headers
            and "mcp-protocol-version" not in headers
            and "text/event-stream" not in headers.get("accept", "")
        )
        if not plain:
            await self.session_manager.handle_request(scope, receive, send)
            return
        body = await _read_body(receive)  # its size is bounded by BodyLimitMiddleware
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
        except ValueError as e:
            return {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": f"Parse error: {e}"}}
        from starlette.requests import Request

        token = token_from_request(Request(scope))
        session = self.state.sessions.get_by_token(token) if token else None
        if token and session is None:
            request_id = payload.get("id") if isinstance(payload, dict) else None
            return {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": INVALID_PARAMS, "message": "Unknown or expired MCP session token"},
            }
        return await handle_jsonrpc(payload, session=session, env_cls=self.state.env_cls, sessions=self.state.sessions)


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
