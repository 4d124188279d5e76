"""`POST /mcp`: OpenEnv's plain JSON-RPC, and (extension) the official MCP client.

`tools/list` and the official client are `openenv validate`'s rules (`openenv_sdk.checks`).
"""

from __future__ import annotations

import httpx
import pytest

from openenv_sdk.checks import RuntimeProbe, check_mcp_jsonrpc, check_mcp_official, check_schema

from .wire import holds


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


def test_plain_jsonrpc_tools_list(probe: RuntimeProbe) -> None:
    holds(check_schema(probe), check_mcp_jsonrpc(probe))


@pytest.mark.extension
def test_official_mcp_client_lists_tools(probe: RuntimeProbe) -> None:
    holds(check_mcp_jsonrpc(probe), check_mcp_official(probe))
