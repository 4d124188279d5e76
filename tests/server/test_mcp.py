"""`/mcp`: the official MCP client, episode binding by token, plain JSON-RPC, what MCP may not reach."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import httpx
import pytest
from fixtures.envs import ProbeEnv, Recorder, ToolOnlyEnv, probe_factory
from fixtures.servers import ask, serve, ws_url
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from websockets.sync.client import connect

from openenv_sdk import create_app

T = TypeVar("T")
HEADER = "X-OpenEnv-Session"
TOOLS = ["echo", "aecho", "add", "explode", "slow", "slow_sync", "whoami", "episode"]
NOT_BOUND = (
    "This MCP connection is not bound to an episode: connect to /mcp?session=<mcp_token> "
    "(the token comes from the orchestrator's session: POST /sessions, or the WebSocket 'session' message)"
)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(create_app(ProbeEnv, factory=probe_factory(recorder=Recorder()))) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10) as c:
        yield c


def run(scenario: Callable[[ClientSession], Awaitable[T]], url: str, headers: dict[str, str] | None = None) -> T:
    """Run `scenario` with an initialized official MCP client session on `url`."""

    async def main() -> T | MCPError:
        with anyio.fail_after(10):
            async with mcp_client(url, headers) as session:
                try:
                    return await scenario(session)
                except MCPError as e:  # raised below, outside the client's task groups
                    return e

    outcome = anyio.run(main)
    if isinstance(outcome, MCPError):
        raise outcome
    return outcome


@contextlib.asynccontextmanager
async def mcp_client(url: str, headers: dict[str, str] | None) -> AsyncIterator[ClientSession]:
    import httpx2

    async with httpx2.AsyncClient(headers=headers or {}, timeout=10) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=10) as session:
                await session.initialize()
                yield session


def session_with_token(client: httpx.Client, episode_id: str) -> tuple[dict[str, str], str]:
    info = client.post("/sessions").json()
    headers = {HEADER: info["session_id"]}
    client.cookies.clear()
    client.post("/reset", json={"episode_id": episode_id}, headers=headers)
    return headers, info["mcp_token"]


def no_reward_anywhere(value: Any) -> bool:
    text = json.dumps(value)
    return '"reward"' not in text


# --- the official client ---------------------------------------------------------------------


def test_initialize_and_list_tools_without_token(base_url: str) -> None:
    async def scenario(session: ClientSession) -> list[str]:
        return [t.name for t in (await session.list_tools()).tools]

    assert run(scenario, f"{base_url}/mcp") == TOOLS


def test_tool_schemas_come_from_signatures(base_url: str) -> None:
    async def scenario(session: ClientSession) -> dict[str, Any]:
        tools = (await session.list_tools()).tools
        add = next(t for t in tools if t.name == "add")
        return {"description": add.description, "schema": add.input_schema}

    assert run(scenario, f"{base_url}/mcp") == {
        "description": "Add two integers.",
        "schema": {
            "additionalProperties": False,
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"default": 0, "title": "B", "type": "integer"},
            },
            "required": ["a"],
            "type": "object",
        },
    }


def test_tool_call_acts_in_the_bound_session(base_url: str, client: httpx.Client) -> None:
    headers, token = session_with_token(client, "bound")

    async def scenario(session: ClientSession) -> list[Any]:
        sync = await session.call_tool("echo", {"message": "from-agent"})
        asynchronous = await session.call_tool("aecho", {"message": "async-agent"})
        episode = await session.call_tool("episode", {})
        return [sync.content[0].text, asynchronous.structured_content, episode.content[0].text]

    assert run(scenario, f"{base_url}/mcp?session={token}") == ["from-agent", {"message": "async-agent"}, "bound"]
    assert client.get("/state", headers=headers).json()["messages"] == ["from-agent", "async-agent"]


@pytest.mark.parametrize("how", ["bearer", "header"])
def test_token_in_headers(base_url: str, client: httpx.Client, how: str) -> None:
    headers, token = session_with_token(client, f"by-{how}")
    auth = {"Authorization": f"Bearer {token}"} if how == "bearer" else {"X-OpenEnv-MCP-Token": token}

    async def scenario(session: ClientSession) -> str:
        return (await session.call_tool("episode", {})).content[0].text  # type: ignore[union-attr]

    assert run(scenario, f"{base_url}/mcp", headers=auth) == f"by-{how}"


def test_tool_call_bound_to_a_websocket_session(base_url: str) -> None:
    with connect(ws_url(base_url)) as ws:
        ask(ws, "reset", {"episode_id": "ws-bound"})
        token = ask(ws, "session")["data"]["mcp_token"]

        async def scenario(session: ClientSession) -> None:
            await session.call_tool("echo", {"message": "agent"})

        run(scenario, f"{base_url}/mcp?session={token}")
        assert ask(ws, "state")["data"]["messages"] == ["agent"]


def test_tools_call_without_token_is_refused(base_url: str) -> None:
    async def scenario(session: ClientSession) -> None:
        await session.call_tool("echo", {"message": "x"})

    with pytest.raises(MCPError) as refused:
        run(scenario, f"{base_url}/mcp")
    assert str(refused.value) == NOT_BOUND


def test_unknown_token_is_refused(base_url: str) -> None:
    async def scenario(session: ClientSession) -> None:
        await session.call_tool("echo", {"message": "x"})

    with pytest.raises(MCPError) as refused:
        run(scenario, f"{base_url}/mcp?session=not-a-token")
    assert str(refused.value) == "Unknown or expired MCP session token: the episode's session has ended"


def test_token_of_a_closed_session_is_refused(base_url: str, client: httpx.Client) -> None:
    headers, token = session_with_token(client, "soon-closed")
    client.post("/close", headers=headers)

    async def scenario(session: ClientSession) -> None:
        await session.call_tool("echo", {"message": "x"})

    with pytest.raises(MCPError, match="Unknown or expired MCP session token"):
        run(scenario, f"{base_url}/mcp?session={token}")


def test_tool_failures_are_results_and_the_session_goes_on(base_url: str, client: httpx.Client) -> None:
    _, token = session_with_token(client, "failures")

    async def scenario(session: ClientSession) -> list[tuple[bool, str]]:
        out = []
        # slow_sync last: its thread runs on after the timeout, and the session is busy until it ends
        calls = [("explode", {}), ("slow", {}), ("add", {"a": "x"}), ("echo", {"message": "ok"}), ("slow_sync", {})]
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            out.append((result.is_error, result.content[0].text))  # type: ignore[union-attr]
        return out

    assert run(scenario, f"{base_url}/mcp?session={token}") == [
        (True, "Tool 'explode' failed: ValueError: boom"),
        (True, "Tool 'slow' timed out after 0.2 s"),
        (
            True,
            "Invalid arguments for tool 'add': a: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (False, "ok"),
        (True, "Tool 'slow_sync' timed out after 0.2 s"),
    ]


def test_unknown_tool_suggests_a_name(base_url: str, client: httpx.Client) -> None:
    _, token = session_with_token(client, "typo")

    async def scenario(session: ClientSession) -> None:
        await session.call_tool("ehco", {"message": "x"})

    with pytest.raises(MCPError) as refused:
        run(scenario, f"{base_url}/mcp?session={token}")
    assert str(refused.value) == f"Unknown tool 'ehco'. Did you mean 'echo'? Available: {sorted(TOOLS)}"


# --- what MCP may not reach ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["secret", "transcript", "reset", "step", "state", "close"])
def test_orchestrator_verbs_and_calls_are_not_tools(base_url: str, client: httpx.Client, name: str) -> None:
    _, token = session_with_token(client, "hidden")

    async def scenario(session: ClientSession) -> None:
        await session.call_tool(name, {})

    with pytest.raises(MCPError, match=f"Unknown tool '{name}'"):
        run(scenario, f"{base_url}/mcp?session={token}")
    reply = client.post(
        f"/mcp?session={token}", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}}
    ).json()
    assert reply["error"]["code"] == -32602


def test_nothing_reachable_through_mcp_returns_a_reward(base_url: str, client: httpx.Client) -> None:
    _, token = session_with_token(client, "no-reward")
    arguments: dict[str, dict[str, Any]] = {
        "echo": {"message": "x"},
        "aecho": {"message": "x"},
        "add": {"a": 1},
        "explode": {},
        "whoami": {},
        "episode": {},
    }

    async def scenario(session: ClientSession) -> list[Any]:
        listed = (await session.list_tools()).model_dump(mode="json")
        results = [listed]
        for name, args in arguments.items():
            results.append((await session.call_tool(name, args)).model_dump(mode="json"))
        return results

    for payload in run(scenario, f"{base_url}/mcp?session={token}"):
        assert no_reward_anywhere(payload), payload
    for name, args in arguments.items():
        plain = rpc(client, "tools/call", {"name": name, "arguments": args}, url=f"/mcp?session={token}")
        assert no_reward_anywhere(plain), plain
        assert "data" not in plain["result"]


# --- plain JSON-RPC (OpenEnv's clients) ----------------------------------------------------------------


def rpc(
    client: httpx.Client, method: str, params: dict[str, Any] | None = None, *, url: str = "/mcp"
) -> dict[str, Any]:
    response = client.post(url, json={"jsonrpc": "2.0", "id": 3, "method": method, "params": params or {}})
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


def test_plain_tools_list(client: httpx.Client) -> None:
    tools = rpc(client, "tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == TOOLS
    assert set(tools[0]) == {"name", "description", "inputSchema"}


def test_plain_tools_call_with_token_acts_in_session(client: httpx.Client) -> None:
    headers, token = session_with_token(client, "plain")
    reply = rpc(client, "tools/call", {"name": "echo", "arguments": {"message": "p"}}, url=f"/mcp?session={token}")
    result = {"content": [{"type": "text", "text": "p"}], "isError": False}
    assert reply == {"jsonrpc": "2.0", "id": 3, "result": result}
    assert client.get("/state", headers=headers).json()["messages"] == ["p"]


def test_plain_tools_call_without_token_is_refused(client: httpx.Client) -> None:
    before = client.get("/health").json()["active_sessions"]
    reply = rpc(client, "tools/call", {"name": "add", "arguments": {"a": 4, "b": 5}})
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"code": "SESSION_REQUIRED"}
    assert client.get("/health").json()["active_sessions"] == before


def test_plain_tools_call_with_unknown_token(client: httpx.Client) -> None:
    reply = rpc(client, "tools/call", {"name": "echo", "arguments": {"message": "x"}}, url="/mcp?session=bogus")
    error = {"code": -32602, "message": "Unknown or expired MCP session token"}
    assert reply == {"jsonrpc": "2.0", "id": 3, "error": error}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"{}", {"code": -32600, "message": "Invalid JSON-RPC request: Field required"}),
        (
            b"{bad",
            {
                "code": -32700,
                "message": "Parse error: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            },
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}',
            {"code": -32602, "message": "tools/call needs params.name (the tool's name)"},
        ),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "nope"}', {"code": -32601, "message": "Method not found: 'nope'"}),
    ],
)
def test_plain_bad_requests(client: httpx.Client, body: bytes, error: dict[str, Any]) -> None:
    response = client.post("/mcp", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.json()["error"] == error


def test_plain_oversized_request() -> None:
    from openenv_sdk import ServerConfig

    app = create_app(ProbeEnv, config=ServerConfig(max_message_bytes=1024))
    with serve(app) as url, httpx.Client(base_url=url) as c:
        response = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 2000}})
        assert response.status_code == 413
        assert response.json()["detail"]["code"] == "MESSAGE_TOO_LARGE"
        assert rpc(c, "tools/list", {})["result"]["tools"]  # the server goes on


def test_tool_only_env_over_mcp() -> None:
    with serve(create_app(ToolOnlyEnv)) as url, httpx.Client(base_url=url) as c:
        headers, token = session_with_token(c, "tools")

        async def scenario(session: ClientSession) -> Any:
            await session.call_tool("bump", {"by": 2})
            return (await session.call_tool("bump", {})).structured_content

        assert run(scenario, f"{url}/mcp?session={token}") == {"counter": 3}
