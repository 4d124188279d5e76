"""Shared fixtures: a free loopback port, and the echo environment served on one."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sdk.testing import labelled_builds

ECHO_DIR = Path(__file__).resolve().parent.parent / "environments" / "echo"


@pytest.fixture(scope="session", autouse=True)
def _remove_the_images_this_session_built() -> Iterator[None]:
    """Every image this test session builds (in-process or through `openenv build` in a child
    process) carries a label of the session's own ($OPENENV_BUILD_LABELS), and is removed at
    the end: the suite leaves no test images behind, and never touches another run's images.
    The engine keeps the cached layers, so the next run rebuilds them quickly. Containers made
    from those images carry the label too, and go first (`openenv_sdk.testing.labelled_builds`)."""
    with labelled_builds(remove=os.environ.get("OPENENV_TEST_CONTAINERS") == "1"):
        yield


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
    from openenv_sdk.testing import serve_app

    with serve_app(create_app(load_environment(ECHO_DIR).env_cls)) as url:
        yield url


@pytest.fixture
def anyio_backend() -> str:
    """The async clients are asyncio clients."""
    return "asyncio"
