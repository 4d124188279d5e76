"""`openenv_sdk.testing.serve_app`: a real server for the length of a `with` block."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

import openenv_sdk.testing
from openenv_sdk.errors import ProviderError
from openenv_sdk.testing import serve_app


async def hello_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


async def failing_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})


def uvicorn_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("uvicorn-")]


def test_api() -> None:
    assert sorted(openenv_sdk.testing.__all__) == [
        "DEFAULT_SERVE_TIMEOUT_S",
        "TEST_SESSION_LABEL",
        "labelled_builds",
        "remove_labelled",
        "serve_app",
    ]


def test_serves_on_a_free_loopback_port_and_stops() -> None:
    before = set(uvicorn_threads())  # session-scoped servers of other tests may be running
    with serve_app(hello_app) as url:
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url, timeout=5).text == "hello"
        assert set(uvicorn_threads()) - before
    assert set(uvicorn_threads()) == before
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=5)


def test_an_app_that_does_not_start_raises() -> None:
    before = set(uvicorn_threads())
    with (
        pytest.raises(ProviderError, match="uvicorn exited before it started on 127.0.0.1 port"),
        serve_app(failing_app, timeout_s=5),
    ):
        pass
    assert set(uvicorn_threads()) == before
