"""OpenEnv's JSON-RPC subset of MCP: `tools/list` and `tools/call` with no `initialize`.

It answers `{"type": "mcp"}` messages on `/ws` and plain JSON-RPC `POST /mcp` requests that do
not come from an MCP client session (those go to the official MCP server, `_mcp.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..types import ErrorCode
from ._protocol import RequestRefused

if TYPE_CHECKING:
    from ..environment import Environment
    from ._session import Session

__all__ = ["JsonRpcRequest", "handle_jsonrpc", "mcp_tool_list", "token_from_request"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

PROTOCOL_VERSION = "2025-06-18"

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


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request."""

    model_config = ConfigDict(extra="ignore")

    jsonrpc: str
    method: str
    params: dict[str, Any] | None = None
    id: str | int | None = None


def _error(code: int, message: str, request_id: Any = None, *, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def mcp_tool_list(env_cls: type[Environment[Any, Any, Any]]) -> list[dict[str, Any]]:
    """The environment's tools in MCP's `tools/list` shape (camelCase `inputSchema`)."""
    return [
        {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}
        for spec in env_cls.tool_specs.values()
    ]


async def handle_jsonrpc(
    payload: Any,
    *,
    session: Session | None,
    env_cls: type[Environment[Any, Any, Any]],
) -> dict[str, Any]:
    """Answer one JSON-RPC request. `tools/call` needs a session (bound by its MCP token):
    without one it is refused (`INVALID_PARAMS`, `data.code` `SESSION_REQUIRED`); OpenEnv's
    servers run it in a throwaway environment, which let anyone run tools outside any episode."""
    try:
        request = JsonRpcRequest.model_validate(payload)
    except ValidationError as e:
        request_id = payload.get("id") if isinstance(payload, dict) else None
        return _error(INVALID_REQUEST, f"Invalid JSON-RPC request: {e.errors()[0]['msg']}", request_id)
    rid = request.id
    params = request.params or {}
    if request.method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", PROTOCOL_VERSION),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": env_cls.name, "version": env_cls.version or "0"},
        }
    elif request.method == "ping":
        result = {}
    elif request.method == "tools/list":
        result = {"tools": mcp_tool_list(env_cls)}
    elif request.method == "tools/call":
        name = params.get("name")
        if not isinstance(name, str):
            return _error(INVALID_PARAMS, "tools/call needs params.name (the tool's name)", rid)
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            return _error(INVALID_PARAMS, "tools/call params.arguments must be an object", rid)
        if session is None:
            return _error(
                INVALID_PARAMS,
                "tools/call needs an episode: send the session's MCP token (`?session=<mcp_token>` or "
                "`Authorization: Bearer <mcp_token>`; the orchestrator gets it from POST /sessions or the "
                "WebSocket 'session' message), or call tools through the orchestrator's step",
                rid,
                data={"code": ErrorCode.SESSION_REQUIRED.value},
            )
        try:
            outcome = await session.mcp_tool_call(name, arguments)
        except RequestRefused as e:
            return _error(INVALID_PARAMS, e.message, rid, data={"code": e.code.value})
        result = outcome.mcp_result()
    else:
        return _error(METHOD_NOT_FOUND, f"Method not found: {request.method!r}", rid)
    return {"jsonrpc": "2.0", "id": rid, "result": result}
