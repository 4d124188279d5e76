"""`tool_transport`: the agent's tools over the official MCP client or on the session's WebSocket,
with the same results, refusals and transcript either way."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from openenv_sdk import AsyncEnvClient, EnvClient, ToolErrorType
from openenv_sdk.errors import ServerError, ToolCallError

pytestmark = pytest.mark.anyio


def outcome(call: Any) -> tuple[Any, ...]:
    """What a caller sees of one tool call: the result's text and flag, or the refusal."""
    try:
        result = call()
    except ServerError as e:
        return ("refused", type(e).__name__, e.code, e.details.get("tool"), str(e).split(" refused: ")[-1])
    return ("result", result.is_error, [c.text for c in result.content], result.structured_content)


def session_with(env: Any) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = [outcome(lambda: env.call_tool("echo", message="before reset"))]
    env.reset()
    seen.append(tuple((t.name, t.description, t.input_schema) for t in env.list_tools()))
    seen.append(outcome(lambda: env.call_tool("echo", message="agent")))
    seen.append(outcome(lambda: env.call_tool("echo")))  # missing argument: a failing tool
    seen.append(outcome(lambda: env.call_tool("echo", message=["not", "text"])))
    seen.append(outcome(lambda: env.call_tool("ecko", message="x")))  # unknown tool: refused
    seen.append(tuple(env.state().messages))
    seen.append(tuple((c["tool"], c["arguments"], c["output"]) for c in env.call("transcript")))
    return seen


def test_both_transports_give_the_same_outcomes(echo_server: str, echo_module: ModuleType) -> None:
    runs = {}
    for transport in ("mcp", "websocket"):
        with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment, tool_transport=transport) as env:
            runs[transport] = session_with(env)
            opened_mcp = env._mcp is not None
        assert opened_mcp == (transport == "mcp")  # the WebSocket transport opens no second connection
    assert runs["websocket"] == runs["mcp"]
    before_reset, tools, ok, failing, wrong_type, unknown, messages, transcript = runs["websocket"]
    assert before_reset[:4] == ("refused", "SessionError", "NOT_RESET", "echo") and "reset" in before_reset[4]
    assert [name for name, _, _ in tools] == ["echo"]
    assert ok == ("result", False, ["agent"], ok[3])
    assert failing[:2] == ("result", True) and wrong_type[:2] == ("result", True)
    assert unknown[:4] == ("refused", "ToolCallError", "INVALID_PARAMS", "ecko") and "Did you mean 'echo'?" in unknown[4]
    assert messages == ("agent",)
    assert [tool for tool, _, _ in transcript] == ["echo", "echo", "echo"]


async def test_the_async_client_on_the_websocket(echo_server: str, echo_module: ModuleType) -> None:
    async with AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment, tool_transport="websocket") as env:
        await env.reset()
        assert [t.name for t in await env.list_tools()] == ["echo"]
        result = await env.call_tool("echo", message="agent")
        assert (result.is_error, result.content[0].text) == (False, "agent")
        assert (await env.call_tool("echo")).is_error
        with pytest.raises(ToolCallError, match="Did you mean 'echo'") as caught:
            await env.call_tool("ecko")
        assert (caught.value.code, caught.value.error_type) == ("INVALID_PARAMS", ToolErrorType.TOOL_NOT_FOUND)
        assert (await env.step({"message": "step"})).observation.echoed_message == "step"  # the connection goes on
        assert (await env.state()).messages == ["agent", "step"]
        assert env._mcp is None


def test_an_unknown_transport_is_refused(echo_server: str) -> None:
    with pytest.raises(ValueError, match="tool_transport must be one of"):
        EnvClient(echo_server, tool_transport="grpc")  # type: ignore[arg-type]


def _server_with_mcp_results(results: dict[str, Any]) -> Any:
    """A WebSocket server speaking the session protocol whose MCP replies carry `results` by
    method: what a faulty or foreign server could send; ours never does."""
    import json

    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket

    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            request = json.loads(message["text"])
            if request["type"] == "mcp":
                rpc = request["data"]
                data: Any = {"jsonrpc": "2.0", "id": rpc.get("id"), "result": results[rpc["method"]]}
                kind = "mcp"
            elif request["type"] == "session":
                data, kind = {"session_id": "fake", "mcp_token": "fake-token"}, "session"
            else:
                data, kind = {"observation": {"echoed_message": ""}, "reward": None, "done": False}, "observation"
            await websocket.send_text(json.dumps({"type": kind, "data": data, "id": request.get("id")}))

    return Starlette(routes=[WebSocketRoute("/ws", ws)])


@pytest.mark.parametrize(
    ("results", "call", "expected"),
    [
        ({"tools/call": {"content": "not a list"}}, lambda env: env.call_tool("echo", message="x"), "not a valid CallToolResult: content"),
        ({"tools/list": {"tools": [{"name": 3}]}}, lambda env: env.list_tools(), "not a valid Tool: name"),
        ({"tools/list": {"tools": "echo"}}, lambda env: env.list_tools(), "`tools` is not a list"),
    ],
)
def test_a_malformed_mcp_result_on_the_websocket_is_a_server_error(
    results: dict[str, Any], call: Any, expected: str, echo_module: ModuleType
) -> None:
    from openenv_sdk.testing import serve_app

    with serve_app(_server_with_mcp_results(results)) as url, EnvClient(
        url, env_cls=echo_module.EchoEnvironment, tool_transport="websocket"
    ) as env:
        env.reset()
        with pytest.raises(ServerError, match=expected) as caught:
            call(env)
        assert not isinstance(caught.value, ToolCallError)  # not the agent's mistake: the server's
        env.reset()  # the session's connection goes on
