"""The agent's MCP connection acts in the episode the orchestrator's client reset."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from openenv_sdk.client import AsyncEnvClient, EnvClient
from openenv_sdk.errors import ToolCallError

pytestmark = pytest.mark.anyio


async def _agent_calls(url: str, name: str, arguments: dict[str, Any]) -> Any:
    """What an agent does: the official MCP client, `initialize`, `tools/list`, `tools/call`."""
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["echo"]
            return await session.call_tool(name, arguments)


async def test_the_agents_tool_call_acts_in_the_orchestrators_episode(
    echo_server: str, echo_module: ModuleType
) -> None:
    async with AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        await env.reset(seed=1)
        result = await _agent_calls(env.mcp_url, "echo", {"message": "from the agent"})
        assert not result.is_error
        assert result.content[0].text == "from the agent"
        assert await env.call("transcript") == [
            {
                "tool": "echo",
                "arguments": {"message": "from the agent"},
                "output": "from the agent",
                "error": None,
                "source": "mcp",
            }
        ]
        assert (await env.state()).messages == ["from the agent"]
        await env.step({"message": "from the orchestrator"})
        assert (await env.state()).messages == ["from the agent", "from the orchestrator"]


async def test_a_token_acts_in_its_own_session_only(echo_server: str, echo_module: ModuleType) -> None:
    async with (
        AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as first,
        AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as second,
    ):
        await first.reset()
        await second.reset()
        await _agent_calls(second.mcp_url, "echo", {"message": "for the second"})
        assert (await first.state()).messages == []
        assert await first.call("transcript") == []
        assert (await second.state()).messages == ["for the second"]
        assert [c["output"] for c in await second.call("transcript")] == ["for the second"]


async def test_a_bad_token_is_refused(echo_server: str, echo_module: ModuleType) -> None:
    async with AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        await env.reset()
        refused = pytest.RaisesExc(MCPError, match="Unknown or expired MCP session token")
        with pytest.RaisesGroup(refused, flatten_subgroups=True):
            await _agent_calls(f"{echo_server}/mcp?session=not-a-token", "echo", {"message": "x"})
        assert (await env.state()).messages == []


async def test_a_closed_sessions_token_is_refused(echo_server: str, echo_module: ModuleType) -> None:
    env = AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment)
    await env.reset()
    url = env.mcp_url
    await env.aclose()
    with pytest.RaisesGroup(pytest.RaisesExc(MCPError, match="Unknown or expired"), flatten_subgroups=True):
        await _agent_calls(url, "echo", {"message": "x"})


def test_the_sync_clients_call_tool_uses_the_binding(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        assert [t.name for t in env.list_tools()] == ["echo"]
        assert env.call_tool("echo", message="one").content[0].text == "one"
        assert env.call_tool("echo", message="two").content[0].text == "two"
        assert env.state().messages == ["one", "two"]
        with pytest.raises(ToolCallError, match="Did you mean 'echo'") as caught:
            env.call_tool("ech", message="x")
        assert caught.value.details == {"jsonrpc_code": -32602, "tool": "ech"}
        assert env.call_tool("echo", message="three").content[0].text == "three"  # the channel goes on


def test_after_reconnect_call_tool_follows_the_new_session(echo_server: str, echo_module: ModuleType) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        env.reset()
        env.call_tool("echo", message="old episode")
        env.reconnect()
        env.reset()
        env.call_tool("echo", message="new episode")
        assert env.state().messages == ["new episode"]
        assert [c["output"] for c in env.call("transcript")] == ["new episode"]
