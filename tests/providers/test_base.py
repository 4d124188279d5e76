"""The provider contract: what every caller reads (`logs_tail`, `host_address`) is declared on
`Provider` with a default, so a new provider is wired in one place; the client quotes the
server's last output when the server dies under it."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from openenv_sdk import create_app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.errors import TransportError
from openenv_sdk.loader import load_environment
from openenv_sdk.providers import LocalProcessProvider, Provider
from openenv_sdk.testing import serve_app

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"
ECHO_CALL = {"type": "call_tool", "tool_name": "echo", "arguments": {"message": "hi"}}


class InProcessProvider(Provider):
    """A provider that defines only the required members: serves echo in a thread."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None

    def start(self) -> str:
        self._stack = contextlib.ExitStack()
        return self._stack.enter_context(serve_app(create_app(load_environment(ECHO_DIR).env_cls)))

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def is_alive(self) -> bool:
        return self._stack is not None


def test_a_new_provider_gets_the_defaults_and_drives_a_client() -> None:
    provider = InProcessProvider()
    assert isinstance(provider, Provider)
    assert provider.logs_tail() == [] and provider.host_address is None
    with GenericEnvClient(provider=provider) as env:
        env.reset()
        assert env.step(ECHO_CALL).observation["result"] is not None
    assert not provider.is_alive()


def test_the_local_provider_overrides_them() -> None:
    provider = LocalProcessProvider(ECHO_DIR)
    assert provider.host_address == "127.0.0.1" and provider.logs_tail() == []
    with provider:
        assert provider.host_address == "127.0.0.1"
        assert isinstance(provider.logs_tail(), list)


def test_a_client_quotes_the_last_output_of_a_dead_server() -> None:
    provider = LocalProcessProvider(ECHO_DIR, extra_args=("--log-level", "info"))
    with GenericEnvClient(provider=provider) as env:
        env.reset()
        tail = provider.logs_tail()
        assert tail, "uvicorn at log level info prints its startup lines"
        assert provider.pid is not None
        os.killpg(provider.pid, signal.SIGKILL)
        with pytest.raises(TransportError) as caught:
            env.step(ECHO_CALL)
    message = str(caught.value)
    assert "The server (LocalProcessProvider) is not running; its last output:" in message
    assert tail[-1] in message
