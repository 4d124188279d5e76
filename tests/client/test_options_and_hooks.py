"""One frozen `ClientOptions` behind both clients' keywords, and `add_close_hook` (how pools learn
that a client they handed out was closed: no one reassigns `close`)."""

from __future__ import annotations

import dataclasses
import inspect
from types import ModuleType

import pytest

from openenv_sdk.client import AsyncEnvClient, AsyncGenericEnvClient, ClientOptions, EnvClient, GenericEnvClient
from openenv_sdk.errors import InvalidActionError

pytestmark = pytest.mark.anyio


def test_the_keywords_are_the_options_fields() -> None:
    fields = [f.name for f in dataclasses.fields(ClientOptions)]
    for cls in (EnvClient, AsyncEnvClient, GenericEnvClient, AsyncGenericEnvClient):
        parameters = list(inspect.signature(cls).parameters)
        assert parameters == ["base_url", "env_dir", "image", "provider", "env_cls", *fields], cls


async def test_the_options_are_frozen_and_checked(echo_server: str) -> None:
    env = GenericEnvClient(echo_server, timeout_s=5, tool_transport="websocket")
    assert env.options == ClientOptions(timeout_s=5.0, tool_transport="websocket")
    with pytest.raises(dataclasses.FrozenInstanceError):
        env.options.timeout_s = 1  # type: ignore[misc]
    with env.request_timeout(300):
        assert env.options.timeout_s == 300.0
    assert env.options.timeout_s == 5.0
    with pytest.raises(ValueError, match="timeout_s must be a positive, finite number of seconds, got 0"):
        AsyncGenericEnvClient(echo_server, timeout_s=0)
    with pytest.raises(ValueError, match="tool_transport must be one of \\('mcp', 'websocket'\\), got 'http'"):
        EnvClient(echo_server, tool_transport="http")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_message_bytes must be a positive whole number of bytes, got 0"):
        GenericEnvClient(echo_server, max_message_bytes=0)
    env.close()


def test_a_typed_client_without_validation_leaves_the_check_to_the_server(
    echo_server: str, echo_module: ModuleType
) -> None:
    with EnvClient(echo_server, env_cls=echo_module.EchoEnvironment, validate_actions=False) as env:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.step({"messag": "x"})
        assert "Invalid action for EchoAction" not in str(caught.value)  # the server's words, not the client's
        assert env.step({"message": "hi"}).observation.echoed_message == "hi"


def test_close_hooks_run_once_after_close_last_first_all_of_them(echo_server: str) -> None:
    ran: list[str] = []
    env = GenericEnvClient(echo_server)
    env.reset()

    def failing() -> None:
        ran.append("failing")
        raise RuntimeError("hook failed")

    env.add_close_hook(lambda: ran.append(f"first, closed={env.is_closed}"))
    env.add_close_hook(failing)
    env.add_close_hook(lambda: ran.append("last"))
    with pytest.raises(RuntimeError, match="hook failed"):
        env.close()
    assert ran == ["last", "failing", "first, closed=True"]
    env.close()
    assert len(ran) == 3  # once
    env.add_close_hook(lambda: ran.append("late"))  # on a closed client: at once
    assert ran[-1] == "late"
    assert "close" not in vars(env)


async def test_async_close_hooks(echo_server: str) -> None:
    ran: list[str] = []
    async with AsyncGenericEnvClient(echo_server) as env:
        await env.reset()
        env.add_close_hook(lambda: ran.append("released"))
        assert ran == []
    assert ran == ["released"]
    await env.aclose()
    assert ran == ["released"]
    assert "aclose" not in vars(env)
