"""One error vocabulary on every transport: each mistake gets the same class and code through
`step` (WebSocket and HTTP), the client's `call_tool` (both tool transports) and raw MCP (the
official `mcp` client), against a real server on a real port.

Where MCP decides, MCP's rule holds: an unknown tool and a call outside an episode are protocol
errors (JSON-RPC -32602, as the MCP spec and OpenEnv's servers answer them), and a tool that
fails is a result with `isError` (the agent reads the same text as `step`'s `error.message`).
docs/errors.md draws this table from `TRANSPORT_TABLE` below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx
import pytest
from fixtures.servers import serve

from openenv_sdk import Environment, GenericEnvClient, ToolErrorType, ToolFailure, create_app, tool
from openenv_sdk._mcp_imports import MCP_IMPORT_LOCK
from openenv_sdk.client._base import http_error
from openenv_sdk.client._mcp import AsyncMcpChannel
from openenv_sdk.errors import ServerError, SessionError, ToolCallError

SESSION_HEADER = "X-OpenEnv-Session"


class Counter(Environment):
    """A tools-only environment with one tool of each fate."""

    name = "counter"

    @tool
    def count(self, n: int) -> int:
        """Echo a number.

        Args:
            n: the number.
        """
        if self.episode_done:
            raise ToolFailure("the episode is over: call reset to start another")
        return n

    @tool
    def fail(self, reason: str) -> str:
        """Always fail.

        Args:
            reason: the failure's text.
        """
        raise ToolFailure(reason)

    @tool
    async def refuse(self, n: int) -> int:
        """Refuse any number, from a coroutine.

        Args:
            n: the number.
        """
        raise ToolFailure(f"{n} is not allowed here", error_type=ToolErrorType.INVALID_ARGS)

    @tool
    def finish(self) -> str:
        """End the episode."""
        self.episode_done = True
        return "over"


@dataclass(frozen=True)
class Mistake:
    reset: bool
    finish_first: bool
    tool: str
    arguments: dict[str, Any]


MISTAKES = {
    "unknown tool": Mistake(True, False, "cuont", {"n": 1}),
    "bad arguments": Mistake(True, False, "count", {"n": "one"}),
    "tool raised": Mistake(True, False, "fail", {"reason": "the disk is full"}),
    "not reset": Mistake(False, False, "count", {"n": 1}),
    "episode over": Mistake(True, True, "count", {"n": 1}),
}


class Seen(NamedTuple):
    """What a caller gets: a failure (data: `step`'s `error`, MCP's `isError` result) with its
    `ToolErrorType` where the transport carries one, or a refusal (raised) with class and code."""

    kind: str  # "failure" or "refused"
    cls: str  # the raised class; "" for a failure
    code: str  # the ErrorCode / ToolErrorType value / JSON-RPC code with its data.code
    message: str


def _refused(e: ServerError) -> Seen:
    error_type = getattr(e, "error_type", None)
    code = error_type.value if error_type is not None else e.code
    return Seen("refused", type(e).__name__, code, str(e.args[0]).split(" refused: ")[-1])


def _from_observation(observation: Any) -> Seen:
    obs = observation if isinstance(observation, dict) else observation.model_dump(mode="json")
    error = obs["error"]
    assert error is not None, obs
    return Seen("failure", "", error["error_type"], error["message"])


def _from_result(result: Any) -> Seen:
    assert result.is_error, result
    return Seen("failure", "", "", result.content[0].text)


# --- the transports ----------------------------------------------------------------------------


def via_step_ws(url: str, m: Mistake) -> Seen:
    with GenericEnvClient(url) as env:
        if m.reset:
            env.reset()
        if m.finish_first:
            env.step({"tool": "finish", "arguments": {}})
        try:
            return _from_observation(env.step({"tool": m.tool, "arguments": m.arguments}).observation)
        except ServerError as e:
            return _refused(e)


def _http_session(client: httpx.Client, url: str, m: Mistake) -> dict[str, Any]:
    info: dict[str, Any] = client.post(f"{url}/sessions").json()
    headers = {SESSION_HEADER: info["session_id"]}
    if m.reset:
        assert client.post(f"{url}/reset", json={}, headers=headers).status_code == 200
    if m.finish_first:
        finish = {"action": {"tool": "finish", "arguments": {}}}
        assert client.post(f"{url}/step", json=finish, headers=headers).json()["done"] is True
    return info


def via_step_http(url: str, m: Mistake) -> Seen:
    with httpx.Client(timeout=10.0) as client:
        info = _http_session(client, url, m)
        action = {"action": {"tool": m.tool, "arguments": m.arguments}}
        reply = client.post(f"{url}/step", json=action, headers={SESSION_HEADER: info["session_id"]})
        if reply.status_code != 200:
            return _refused(http_error(reply.status_code, reply.json(), "POST /step"))
        return _from_observation(reply.json()["observation"])


def _via_call_tool(transport: str) -> Callable[[str, Mistake], Seen]:
    def run(url: str, m: Mistake) -> Seen:
        with GenericEnvClient(url, tool_transport=transport) as env:  # type: ignore[arg-type]
            if m.reset:
                env.reset()
            if m.finish_first:
                assert not env.call_tool("finish").is_error
            try:
                return _from_result(env.call_tool(m.tool, **m.arguments))
            except ServerError as e:
                return _refused(e)

    return run


def via_raw_mcp(url: str, m: Mistake) -> Seen:
    """The official `mcp` client, bound to an episode the orchestrator opened over HTTP."""
    with MCP_IMPORT_LOCK:  # the server imports mcp on a thread of its own meanwhile
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.exceptions import MCPError

    with httpx.Client(timeout=10.0) as client:
        token = _http_session(client, url, m)["mcp_token"]

    async def call() -> Seen:
        async with streamable_http_client(f"{url}/mcp?session={token}") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                try:
                    return _from_result(await session.call_tool(m.tool, m.arguments))
                except MCPError as e:
                    data = e.data if isinstance(e.data, dict) else {}
                    return Seen("refused", "MCPError", f"{e.code} {data.get('code')}", e.message)

    return asyncio.run(asyncio.wait_for(call(), 20.0))


TRANSPORTS: dict[str, Callable[[str, Mistake], Seen]] = {
    "step (WebSocket)": via_step_ws,
    "step (HTTP)": via_step_http,
    "call_tool (mcp)": _via_call_tool("mcp"),
    "call_tool (websocket)": _via_call_tool("websocket"),
    "raw MCP": via_raw_mcp,
}

TOOL_NOT_FOUND = ToolErrorType.TOOL_NOT_FOUND.value
INVALID_ARGS = ToolErrorType.INVALID_ARGS.value
EXECUTION_ERROR = ToolErrorType.EXECUTION_ERROR.value

TRANSPORT_TABLE: dict[str, dict[str, tuple[str, str, str]]] = {
    # mistake: {transport: (kind, class, code)}; a failure through MCP carries no type ("")
    "unknown tool": {
        "step (WebSocket)": ("failure", "", TOOL_NOT_FOUND),
        "step (HTTP)": ("failure", "", TOOL_NOT_FOUND),
        "call_tool (mcp)": ("refused", "ToolCallError", TOOL_NOT_FOUND),
        "call_tool (websocket)": ("refused", "ToolCallError", TOOL_NOT_FOUND),
        "raw MCP": ("refused", "MCPError", "-32602 VALIDATION_ERROR"),
    },
    "bad arguments": {
        "step (WebSocket)": ("failure", "", INVALID_ARGS),
        "step (HTTP)": ("failure", "", INVALID_ARGS),
        "call_tool (mcp)": ("failure", "", ""),
        "call_tool (websocket)": ("failure", "", ""),
        "raw MCP": ("failure", "", ""),
    },
    "tool raised": {
        "step (WebSocket)": ("failure", "", EXECUTION_ERROR),
        "step (HTTP)": ("failure", "", EXECUTION_ERROR),
        "call_tool (mcp)": ("failure", "", ""),
        "call_tool (websocket)": ("failure", "", ""),
        "raw MCP": ("failure", "", ""),
    },
    "not reset": {
        "step (WebSocket)": ("refused", "SessionError", "NOT_RESET"),
        "step (HTTP)": ("refused", "SessionError", "NOT_RESET"),
        "call_tool (mcp)": ("refused", "SessionError", "NOT_RESET"),
        "call_tool (websocket)": ("refused", "SessionError", "NOT_RESET"),
        "raw MCP": ("refused", "MCPError", "-32602 NOT_RESET"),
    },
    "episode over": {
        "step (WebSocket)": ("failure", "", EXECUTION_ERROR),
        "step (HTTP)": ("failure", "", EXECUTION_ERROR),
        "call_tool (mcp)": ("failure", "", ""),
        "call_tool (websocket)": ("failure", "", ""),
        "raw MCP": ("failure", "", ""),
    },
}

MESSAGES = {
    "unknown tool": "Unknown tool 'cuont'. Did you mean 'count'? Available: ['count', 'fail', 'finish', 'refuse']",
    "bad arguments": "Invalid arguments for tool 'count': n: Input should be a valid integer, unable to parse string as an integer",
    "tool raised": "Tool 'fail' failed: the disk is full",
    "not reset": None,  # `step` names the verb, MCP the tool: both say to call reset first
    "episode over": "Tool 'count' failed: the episode is over: call reset to start another",
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(create_app(Counter)) as base_url:
        yield base_url


@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_mistake_gets_its_class_and_code_on_every_transport(url: str, mistake: str, transport: str) -> None:
    seen = TRANSPORTS[transport](url, MISTAKES[mistake])
    assert (seen.kind, seen.cls, seen.code) == TRANSPORT_TABLE[mistake][transport]
    expected = MESSAGES[mistake]
    if expected is None:
        assert "before reset: call reset first" in seen.message
    else:
        assert seen.message == expected


def test_the_table_covers_every_mistake_on_every_transport() -> None:
    assert set(TRANSPORT_TABLE) == set(MISTAKES) == set(MESSAGES)
    for row in TRANSPORT_TABLE.values():
        assert set(row) == set(TRANSPORTS)


def test_the_session_goes_on_after_every_mistake(url: str) -> None:
    with GenericEnvClient(url) as env:
        env.reset()
        assert env.call_tool("fail", reason="x").is_error
        assert env.call_tool("count", n="one").is_error
        with pytest.raises(ToolCallError):
            env.call_tool("cuont", n=1)
        assert env.step({"tool": "cuont", "arguments": {}}).observation["error"]["error_type"] == TOOL_NOT_FOUND
        assert env.call_tool("count", n=7).structured_content == {"result": 7}
        assert [c["tool"] for c in env.call("transcript")] == ["fail", "count", "count"]  # an unknown tool ran nothing


def test_a_session_that_ended_is_session_not_found_through_step_and_mcp(url: str) -> None:
    """The orchestrator closed the episode: `step` with its id and a tool call with its token
    both name SESSION_NOT_FOUND (over MCP in `data.code`, which the client raises as step does)."""
    with httpx.Client(timeout=10.0) as client:
        info = _http_session(client, url, Mistake(True, False, "count", {}))
        headers = {SESSION_HEADER: info["session_id"]}
        assert client.post(f"{url}/close", headers=headers).status_code == 204
        reply = client.post(f"{url}/step", json={"action": {"tool": "count", "arguments": {"n": 1}}}, headers=headers)
        stepped = http_error(reply.status_code, reply.json(), "POST /step")
    assert (type(stepped), stepped.code) == (SessionError, "SESSION_NOT_FOUND")

    with MCP_IMPORT_LOCK:  # the server imports mcp on a thread of its own meanwhile
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.exceptions import MCPError

    async def call_raw() -> MCPError:
        async with streamable_http_client(f"{url}/mcp?session={info['mcp_token']}") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                with pytest.raises(MCPError) as caught:
                    await session.call_tool("count", {"n": 1})
                return caught.value

    raw = asyncio.run(asyncio.wait_for(call_raw(), 20.0))
    assert (raw.code, raw.data) == (-32602, {"code": "SESSION_NOT_FOUND"})

    async def call_client() -> None:
        channel = AsyncMcpChannel(f"{url}/mcp?session={info['mcp_token']}", timeout_s=10.0, connect_timeout_s=10.0)
        try:
            with pytest.raises(SessionError) as caught:
                await channel.call_tool("count", {"n": 1})
            assert caught.value.code == "SESSION_NOT_FOUND"
        finally:
            await channel.aclose()

    asyncio.run(asyncio.wait_for(call_client(), 30.0))


def test_an_async_tool_fails_with_its_own_error_type(url: str) -> None:
    with GenericEnvClient(url) as env:
        env.reset()
        error = env.step({"tool": "refuse", "arguments": {"n": 3}}).observation["error"]
        assert error == {"error_type": INVALID_ARGS, "message": "Tool 'refuse' failed: 3 is not allowed here"}
        assert _from_result(env.call_tool("refuse", n=3)).message == error["message"]  # isError, same text


def test_a_tool_failure_is_an_sdk_error_and_refusals_are_server_errors() -> None:
    assert issubclass(ToolFailure, Exception) and not issubclass(ToolFailure, ServerError)
    assert issubclass(ToolCallError, ServerError) and issubclass(SessionError, ServerError)
    assert ToolFailure("x", error_type=ToolErrorType.INVALID_ARGS).error_type is ToolErrorType.INVALID_ARGS
    assert ToolFailure("x").error_type is ToolErrorType.EXECUTION_ERROR
