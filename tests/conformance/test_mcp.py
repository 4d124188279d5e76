"""`POST /mcp`: OpenEnv's plain JSON-RPC, and (extension) the official MCP client."""

from __future__ import annotations

import anyio
import httpx
import pytest

from .wire import TIMEOUT_S, jsonrpc


def test_empty_object_gets_jsonrpc_error(http: httpx.Client) -> None:
    response = http.post("/mcp", json={})
    assert response.status_code == 200, (
        f"POST /mcp with {{}} must answer HTTP 200 with a JSON-RPC error in the body, got {response.status_code}"
    )
    body = response.json()
    assert body.get("jsonrpc") == "2.0", f"POST /mcp {{}}: the body must be JSON-RPC 2.0, got {body!r}"
    assert (body.get("error") or {}).get("code") == -32600, (
        f"POST /mcp {{}}: expected JSON-RPC error -32600 (invalid request), got {body!r}"
    )


def test_plain_jsonrpc_tools_list(http: httpx.Client) -> None:
    reply = jsonrpc(http, "tools/list", {})
    listed = (reply.get("result") or {}).get("tools")
    assert isinstance(listed, list), f"POST /mcp tools/list: result.tools must be a list, got {reply!r}"
    for entry in listed:
        assert isinstance(entry.get("name"), str) and isinstance(entry.get("inputSchema"), dict), (
            f"POST /mcp tools/list: each tool needs name and inputSchema (MCP's Tool), got {entry!r}"
        )


@pytest.mark.extension
def test_official_mcp_client_lists_tools(base_url: str, http: httpx.Client) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    plain = jsonrpc(http, "tools/list", {})
    expected = sorted(t["name"] for t in plain["result"]["tools"])

    async def run() -> tuple[str, list[str]]:
        with anyio.fail_after(TIMEOUT_S):
            async with streamable_http_client(f"{base_url}/mcp") as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=TIMEOUT_S) as session:
                    init = await session.initialize()
                    listed = await session.list_tools()
                    return init.server_info.name, sorted(t.name for t in listed.tools)

    server_name, names = anyio.run(run)
    assert server_name, "initialize must name the server (serverInfo.name)"
    assert names == expected, f"MCP tools/list via the official client {names} != plain JSON-RPC tools/list {expected}"
