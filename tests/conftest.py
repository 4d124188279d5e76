"""Shared fixtures: a free loopback port, and the echo environment served on one."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

ECHO_DIR = Path(__file__).resolve().parent.parent / "environments" / "echo"


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def echo_server() -> Iterator[str]:
    """The echo environment served by uvicorn in a thread; yields its base URL."""
    from openenv_sdk import create_app
    from openenv_sdk.loader import load_environment

    app = create_app(load_environment(ECHO_DIR).env_cls)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("echo server did not start")
        time.sleep(0.005)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture
def anyio_backend() -> str:
    """The async clients are asyncio clients."""
    return "asyncio"
