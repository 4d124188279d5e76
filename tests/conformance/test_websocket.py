"""The `/ws` session: OpenEnv's `{"type", "data"}` envelope, its replies and its typed errors.

Where a check is one of `openenv validate`'s rules (`openenv_sdk.checks`), the test calls the
rule; the typed-error recoveries and MCP over `/ws` are the suite's own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from openenv_sdk.checks import (
    RuntimeProbe,
    check_schema,
    check_ws_close,
    check_ws_request_id,
    check_ws_reset,
    check_ws_state,
    check_ws_step,
)

from .instances import invalid_action
from .wire import WSSession, holds


def test_reset_returns_observation(probe: RuntimeProbe) -> None:
    holds(check_ws_reset(probe))


def test_step_returns_observation(probe: RuntimeProbe) -> None:
    holds(check_schema(probe), check_ws_reset(probe), check_ws_step(probe))


def test_state_returns_state(probe: RuntimeProbe) -> None:
    holds(check_ws_reset(probe), check_ws_state(probe))


def _step_still_works(ws: WSSession, action: dict[str, Any], after: str) -> None:
    reply = ws.request("step", action)
    ws.expect(reply, "observation", f"a valid step after {after} (the session must go on)")


def test_invalid_json_is_typed_error_and_session_goes_on(ws: WSSession, action: dict[str, Any]) -> None:
    ws.expect_error(ws.send_text("{not json"), "INVALID_JSON", "a text frame that is not JSON")
    _step_still_works(ws, action, "INVALID_JSON")


def test_unknown_type_is_typed_error_and_session_goes_on(ws: WSSession, action: dict[str, Any]) -> None:
    ws.expect_error(ws.request("no_such_type", {}), "UNKNOWN_TYPE", "a message of unknown type")
    _step_still_works(ws, action, "UNKNOWN_TYPE")


def test_invalid_action_is_validation_error_and_session_goes_on(
    ws: WSSession, schema: dict[str, Any], tools: list[dict[str, Any]], action: dict[str, Any]
) -> None:
    bad = invalid_action(schema, tools)
    ws.expect_error(ws.request("step", bad), "VALIDATION_ERROR", f"step with an invalid action {bad!r}")
    _step_still_works(ws, action, "VALIDATION_ERROR")


@pytest.mark.extension
def test_reply_echoes_request_id(probe: RuntimeProbe) -> None:
    holds(check_ws_reset(probe), check_ws_request_id(probe))


def _mcp(ws: WSSession, method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    data = ws.expect(ws.request("mcp", body), "mcp", f"mcp {method}")
    assert isinstance(data, dict) and data.get("jsonrpc") == "2.0", f"mcp {method}: data must be JSON-RPC 2.0: {data!r}"
    assert data.get("id") == request_id, f"mcp {method}: JSON-RPC id {data.get('id')!r} != {request_id}"
    assert "error" not in data or data["error"] is None, f"mcp {method} failed: {data['error']!r}"
    result = data.get("result")
    assert isinstance(result, dict), f"mcp {method}: result must be an object: {data!r}"
    return result


def test_mcp_tools_list(ws: WSSession) -> None:
    result = _mcp(ws, "tools/list", {})
    listed = result.get("tools")
    assert isinstance(listed, list), f"mcp tools/list: result.tools must be a list, got {listed!r}"
    for entry in listed:
        assert isinstance(entry.get("name"), str), f"mcp tools/list: every tool needs a name: {entry!r}"
        assert isinstance(entry.get("inputSchema"), dict), f"tool {entry.get('name')!r} needs inputSchema: {entry!r}"


def test_mcp_tools_call(ws: WSSession, tools: list[dict[str, Any]]) -> None:
    if not tools:
        pytest.skip("the environment has no tools")
    from .instances import minimal_instance

    first = tools[0]
    arguments = minimal_instance(first.get("inputSchema") or first.get("input_schema") or {"type": "object"})
    result = _mcp(ws, "tools/call", {"name": first["name"], "arguments": arguments}, request_id=2)
    assert isinstance(result.get("content"), list), f"mcp tools/call: result.content must be a list: {result!r}"
    failed = result.get("isError", result.get("is_error"))
    assert not failed, f"mcp tools/call {first['name']}({json.dumps(arguments)}) reported an error: {result!r}"


def test_close_ends_the_socket(probe: RuntimeProbe) -> None:
    holds(check_ws_reset(probe), check_ws_close(probe))
