"""Fixtures of the conformance suite.

`OPENENV_CONFORMANCE_URL` names the server under test (e.g. `http://127.0.0.1:8000`); when it
is unset, the suite serves this repository's echo environment in-process on a free loopback
port. `OPENENV_CONFORMANCE_CORE_ONLY=1` skips the checks marked `extension` (what this SDK adds
to OpenEnv's protocol: reply `id`s, session counts, stateful HTTP, the official MCP client).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv_sdk.checks import RuntimeProbe

from .instances import valid_action
from .wire import TIMEOUT_S, WSSession, jsonrpc

URL_VAR = "OPENENV_CONFORMANCE_URL"
CORE_ONLY_VAR = "OPENENV_CONFORMANCE_CORE_ONLY"
ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"extension: a check of an optional extension of OpenEnv's protocol (skipped by {CORE_ONLY_VAR}=1)"
    )


@pytest.fixture(autouse=True)
def _skip_extensions_when_core_only(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("extension") and os.environ.get(CORE_ONLY_VAR, "") not in ("", "0"):
        pytest.skip(f"extension check; {CORE_ONLY_VAR} is set")


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    """The server under test: $OPENENV_CONFORMANCE_URL, or our echo environment in-process."""
    url = os.environ.get(URL_VAR)
    if url:
        yield url.rstrip("/")
        return
    yield from _serve_echo()


def _serve_echo() -> Iterator[str]:
    from openenv_sdk import create_app
    from openenv_sdk.loader import load_environment
    from openenv_sdk.testing import serve_app

    with serve_app(create_app(load_environment(ECHO_DIR).env_cls), timeout_s=TIMEOUT_S) as url:
        yield url


@pytest.fixture(scope="session")
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=TIMEOUT_S) as client:
        yield client


@pytest.fixture(scope="session")
def schema(http: httpx.Client) -> dict[str, Any]:
    """The server's `/schema` document."""
    response = http.get("/schema")
    assert response.status_code == 200, f"GET /schema answered HTTP {response.status_code}: {response.text[:300]}"
    body = response.json()
    assert isinstance(body, dict), f"GET /schema must answer a JSON object, got {body!r}"
    return body


@pytest.fixture(scope="session")
def tools(http: httpx.Client, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The environment's tools: `/schema` `tools` when the server lists them there, else
    JSON-RPC `tools/list` on POST /mcp. Empty when the server has none."""
    if isinstance(schema.get("tools"), list):
        return list(schema["tools"])
    reply = jsonrpc(http, "tools/list")
    result = reply.get("result") or {}
    return list(result.get("tools") or [])


@pytest.fixture(scope="session")
def action(schema: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A valid `step` payload for this environment, built from `/schema`."""
    return valid_action(schema, tools)


@pytest.fixture
def probe(base_url: str) -> Iterator[RuntimeProbe]:
    """A fresh connection for the rule functions `openenv validate` runs (`openenv_sdk.checks`):
    where a check here is one of those rules, the suite calls the rule, not a copy of it."""
    with RuntimeProbe(base_url, timeout_s=TIMEOUT_S, strict_extensions=True) as connection:
        yield connection


@pytest.fixture
def ws(base_url: str) -> Iterator[WSSession]:
    """A fresh `/ws` session that has been reset."""
    session = WSSession(base_url)
    try:
        reply = session.request("reset", {})
        session.expect(reply, "observation", "reset")
        yield session
    finally:
        session.close()
