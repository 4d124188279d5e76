"""`AsyncEnvClient` against real servers on loopback ports: the same behaviour as `EnvClient`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from types import ModuleType

import pytest
from fixtures.envs import ProbeAction, ProbeEnv, ProbeObservation, probe_factory
from fixtures.servers import serve

from openenv_sdk import create_app
from openenv_sdk.client import AsyncEnvClient, AsyncGenericEnvClient, EnvClient, GenericEnvClient, StepResult
from openenv_sdk.errors import (
    CapacityError,
    ClientStateError,
    InvalidActionError,
    RequestTimeout,
    ServerError,
    SessionError,
    ToolCallError,
)
from openenv_sdk.types import CallToolObservation

pytestmark = pytest.mark.anyio


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


async def test_the_async_client_has_the_sync_clients_names() -> None:
    assert _public(AsyncEnvClient) - {"aclose"} == _public(EnvClient) - {"close"}
    assert _public(AsyncGenericEnvClient) - {"aclose"} == _public(GenericEnvClient) - {"close"}
    for name in ("reset", "step", "state", "call", "session", "list_tools", "call_tool", "reconnect", "restart"):
        assert inspect.iscoroutinefunction(getattr(AsyncEnvClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(EnvClient, name)), name
        assert list(inspect.signature(getattr(AsyncEnvClient, name)).parameters) == list(
            inspect.signature(getattr(EnvClient, name)).parameters
        )


async def test_reset_step_state(echo_server: str, echo_module: ModuleType) -> None:
    async with AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        first = await env.reset(seed=3)
        assert isinstance(first, StepResult)
        assert first.observation.echoed_message == "Echo environment ready!"
        result = await env.step(echo_module.EchoAction(message="hey"))
        assert isinstance(result.observation, echo_module.EchoObservation)
        assert result.reward == pytest.approx(0.3)
        state = await env.state()
        assert isinstance(state, echo_module.EchoState)
        assert (state.episode_id, state.messages) == ("echo-3", ["hey"])
        assert env.trajectory.actions == [{"metadata": {}, "message": "hey"}]
        called = await env.step({"tool": "echo", "arguments": {"message": "t"}})
        assert isinstance(called.observation, CallToolObservation)


async def test_concurrent_calls_on_one_client_are_serialised(echo_server: str, echo_module: ModuleType) -> None:
    async with AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        await env.reset()
        results = await asyncio.gather(*(env.step({"message": str(i)}) for i in range(20)))
        assert sorted(r.observation.echoed_message for r in results) == sorted(str(i) for i in range(20))
        assert (await env.state()).step_count == 20


async def test_many_clients_hold_separate_episodes(echo_server: str, echo_module: ModuleType) -> None:
    clients = [AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) for _ in range(5)]
    try:
        await asyncio.gather(*(c.reset(seed=i) for i, c in enumerate(clients)))
        await asyncio.gather(*(c.step({"message": f"m{i}"}) for i, c in enumerate(clients)))
        states = await asyncio.gather(*(c.state() for c in clients))
        assert [s.messages for s in states] == [[f"m{i}"] for i in range(5)]
        assert [s.episode_id for s in states] == [f"echo-{i}" for i in range(5)]
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


async def test_errors_match_the_sync_client(serve_echo: Callable[..., str], echo_module: ModuleType) -> None:
    url = serve_echo(max_sessions=1)
    async with AsyncEnvClient(url, env_cls=echo_module.EchoEnvironment) as env:
        await env.reset()
        with pytest.raises(InvalidActionError, match="action.message: Field required"):
            await env.step({})
        with pytest.raises(ServerError) as caught:
            await env.call("nope")
        assert caught.value.code == "UNKNOWN_CALL"
        other = AsyncEnvClient(url, env_cls=echo_module.EchoEnvironment)
        with pytest.raises(CapacityError):
            await other.connect()
        await other.aclose()


async def test_a_closed_client_refuses_reuse(echo_server: str, echo_module: ModuleType) -> None:
    env = AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment)
    async with env:
        await env.reset()
    await env.aclose()
    with pytest.raises(ClientStateError, match="This AsyncEnvClient is closed"):
        await env.reset()
    with pytest.raises(ClientStateError):
        await env.__aenter__()
    with pytest.raises(ClientStateError):
        env.mcp_url  # noqa: B018


async def test_mcp_url_needs_an_open_session(echo_server: str, echo_module: ModuleType) -> None:
    env = AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment)
    with pytest.raises(ClientStateError, match="mcp_url needs an open session"):
        env.mcp_url  # noqa: B018
    info = await env.session()
    assert env.mcp_url == f"{echo_server}/mcp?session={info.mcp_token}"
    await env.aclose()


async def test_tools_through_mcp(echo_server: str, echo_module: ModuleType) -> None:
    async with AsyncEnvClient(echo_server, env_cls=echo_module.EchoEnvironment) as env:
        await env.reset()
        assert [t.name for t in await env.list_tools()] == ["echo"]
        result = await env.call_tool("echo", message="agent")
        assert not result.is_error
        assert result.content[0].text == "agent"
        failed = await env.call_tool("echo")
        assert failed.is_error  # a tool failure is a result the agent sees
        with pytest.raises(ToolCallError, match="Unknown tool 'ecko'. Did you mean 'echo'?") as caught:
            await env.call_tool("ecko", message="x")
        assert caught.value.code == "INVALID_PARAMS"
        assert (await env.state()).messages == ["agent"]
        transcript = await env.call("transcript")
        assert [(c["tool"], c["output"]) for c in transcript] == [("echo", "agent"), ("echo", None)]


async def test_a_timed_out_request_does_not_shift_later_replies() -> None:
    def slow_step(env: ProbeEnv, action: ProbeAction) -> ProbeObservation:
        import time

        time.sleep(0.5)
        env.state.step_count += 1
        return ProbeObservation(echoed=action.message)

    with serve(create_app(ProbeEnv, factory=probe_factory(step_func=slow_step))) as url:
        async with AsyncEnvClient(url, env_cls=ProbeEnv, timeout_s=0.2) as env:
            await env.reset()
            with pytest.raises(RequestTimeout, match="No reply to 'step'"):
                await env.step({"message": "late"})
            await asyncio.sleep(0.5)
            assert (await env.state()).step_count == 1


async def test_a_reaped_session_is_reported(serve_echo: Callable[..., str], echo_module: ModuleType) -> None:
    url = serve_echo(idle_timeout_s=0.2)
    async with AsyncEnvClient(url, env_cls=echo_module.EchoEnvironment) as env:
        await env.reset()
        await asyncio.sleep(0.6)
        with pytest.raises(SessionError, match="The episode was lost"):
            await env.step({"message": "two"})
        with pytest.raises(SessionError, match="call reset\\(\\) to start a new episode"):
            await env.call("transcript")
        await env.reset()
        assert (await env.step({"message": "three"})).observation.echoed_message == "three"


async def test_a_reset_after_an_unreset_session_was_closed_opens_a_new_one(
    serve_echo: Callable[..., str], echo_module: ModuleType
) -> None:
    url = serve_echo(unreset_grace_s=0.2)
    async with AsyncEnvClient(url, env_cls=echo_module.EchoEnvironment) as env:
        old = (await env.session()).session_id
        await asyncio.sleep(0.8)
        await env.reset()
        assert (await env.session()).session_id != old
        assert (await env.step({"message": "after"})).observation.echoed_message == "after"
