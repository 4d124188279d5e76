"""A failed handshake leaves no socket behind, in either client: the server runs as its own
process, so every socket counted here is the client's."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fixtures.servers import wait_until

from openenv_sdk.client import AsyncEnvClient, EnvClient
from openenv_sdk.errors import AuthenticationError, ServerError, TransportError
from openenv_sdk.providers import LocalProcessProvider

HERE = Path(__file__).resolve().parent
ECHO_DIR = HERE.parents[1] / "environments" / "echo"
ATTEMPTS = 5


def open_sockets() -> int:
    """How many sockets this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # closed between listdir and readlink (the listing's own fd)
            pass
    return count


@pytest.fixture(scope="module")
def broken_session_url() -> Iterator[str]:
    """A server that accepts the WebSocket upgrade and answers `session` with an error."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "broken_session_server.py")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="module")
def guarded_url() -> Iterator[str]:
    """A real environment server (`openenv serve`, its own process) that has an orchestrator token."""
    provider = LocalProcessProvider(ECHO_DIR, startup_timeout_s=60)
    try:
        yield provider.start()
    finally:
        provider.stop()


def _fail_sync(url: str, echo: ModuleType, expected: type[Exception], **options: object) -> None:
    for _ in range(ATTEMPTS):
        env = EnvClient(url, env_cls=echo.EchoEnvironment, connect_timeout_s=5, timeout_s=5, **options)  # type: ignore[arg-type]
        with pytest.raises(expected):
            env.reset()
        # no close(): the failed handshake itself must have let the socket go


def _fail_async(url: str, echo: ModuleType, expected: type[Exception], **options: object) -> None:
    async def attempts() -> None:
        for _ in range(ATTEMPTS):
            env = AsyncEnvClient(url, env_cls=echo.EchoEnvironment, connect_timeout_s=5, timeout_s=5, **options)  # type: ignore[arg-type]
            with pytest.raises(expected):
                await env.reset()

    asyncio.run(attempts())


@pytest.mark.parametrize("fail", [_fail_sync, _fail_async], ids=["sync", "async"])
def test_a_session_refused_after_the_upgrade_leaves_no_socket(
    fail: object, broken_session_url: str, echo_module: ModuleType
) -> None:
    before = open_sockets()
    fail(broken_session_url, echo_module, ServerError)  # type: ignore[operator]
    assert wait_until(lambda: open_sockets() <= before), f"{open_sockets() - before} sockets left open"


@pytest.mark.parametrize("fail", [_fail_sync, _fail_async], ids=["sync", "async"])
def test_an_upgrade_refused_for_a_wrong_token_leaves_no_socket(
    fail: object, guarded_url: str, echo_module: ModuleType
) -> None:
    before = open_sockets()
    fail(guarded_url, echo_module, TransportError, orchestrator_token="not-the-token")  # type: ignore[operator]
    assert wait_until(lambda: open_sockets() <= before), f"{open_sockets() - before} sockets left open"


def test_the_refusals_are_the_errors_they_should_be(broken_session_url: str, echo_module: ModuleType) -> None:
    env = EnvClient(broken_session_url, env_cls=echo_module.EchoEnvironment, connect_timeout_s=5, timeout_s=5)
    with pytest.raises(ServerError, match="no sessions on this server") as refused:
        env.reset()
    assert refused.value.code == "INTERNAL_ERROR"
    assert not isinstance(refused.value, AuthenticationError)
    env.close()
