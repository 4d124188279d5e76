"""Fixtures of the client tests: the echo environment's classes, and servers with a config."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fixtures.servers import serve

ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"


@pytest.fixture
def echo_module() -> ModuleType:
    """The echo environment's module (`EchoEnvironment`, `EchoAction`, ...), imported as the loader does."""
    from openenv_sdk.loader import load_environment

    env_cls = load_environment(ECHO_DIR).env_cls
    assert env_cls is not None
    return sys.modules[env_cls.__module__]


@pytest.fixture
def serve_echo(echo_module: ModuleType) -> Iterator[Callable[..., str]]:
    """Serve echo with a `ServerConfig` (e.g. `serve_echo(max_sessions=1)`); returns the base URL."""
    from openenv_sdk import ServerConfig, create_app

    with contextlib.ExitStack() as stack:

        def start(**config: Any) -> str:
            app = create_app(echo_module.EchoEnvironment, config=ServerConfig(**config))
            return stack.enter_context(serve(app))

        yield start
