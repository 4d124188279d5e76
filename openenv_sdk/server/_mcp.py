"""`/mcp`: standard MCP over streamable HTTP (the official `mcp` SDK), bound to episodes.

An agent's MCP connection names its episode with the session's MCP token, as the query
parameter `?session=TOKEN`, the header `Authorization: Bearer TOKEN`, or `X-OpenEnv-MCP-Token`.
`tools/list` needs no token; `tools/call` does. Plain JSON-RPC POSTs without an MCP session
(OpenEnv's clients, `openenv validate --url`) are answered by `_mcp_compat`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from ..types import ErrorCode
from ._mcp_compat import INVALID_PARAMS, mcp_tool_list, token_from_request
from ._protocol import RequestRefused

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from ._session import Session
    from ._state import ServerState

__all__ = ["build_mcp_server", "build_session_manager", "token_from_request"]


def _bound_session(state: ServerState, request: Any) -> Session:
    token = token_from_request(request)
    if token is None:
        raise MCPError(
            INVALID_PARAMS,
            "This MCP connection is not bound to an episode: connect to /mcp?session=<mcp_token> "
            "(the token comes from the orchestrator's session: POST /sessions, or the WebSocket 'session' message)",
            data={"code": ErrorCode.SESSION_REQUIRED.value},
        )
    session = state.sessions.get_by_token(token)
    if session is None:
        raise MCPError(
            INVALID_PARAMS,
            "Unknown or expired MCP session token: the episode's session has ended",
            data={"code": ErrorCode.SESSION_NOT_FOUND.value},
        )
    return session


def build_mcp_server(state: ServerState) -> Server[Any]:
    """The official low-level MCP server over the environment class's tools."""
    env_cls = state.env_cls
    tools = [types.Tool.model_validate(t) for t in mcp_tool_list(env_cls)]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        # A refusal carries its ErrorCode in `data.code`: the client raises what `step` would
        session = _bound_session(state, ctx.request)
        try:
            outcome = await session.mcp_tool_call(params.name, params.arguments or {})
        except RequestRefused as e:
            raise MCPError(INVALID_PARAMS, e.message, data={"code": e.code.value}) from e
        return types.CallToolResult.model_validate(outcome.mcp_result())

    return Server(
        env_cls.name,
        version=env_cls.version or "0",
        description=env_cls.description or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def build_session_manager(state: ServerState) -> Any:
    """The official server's streamable-HTTP session manager; enter its `run()` before use."""
    server = build_mcp_server(state)
    # The session token authenticates tool calls; Host checks would refuse published ports.
    server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=state.config.idle_timeout_s or 3600.0,
        max_sessions=state.config.max_mcp_sessions,
        max_request_body_size=state.config.max_message_bytes,
    )
    return server.session_manager
