"""Attacks on a real server's access control: the orchestrator token, tool calls outside any
episode, and secrets in logs. Each passes when the attack is refused with a typed error and the
server (and a session opened before it) goes on."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fixtures.envs import ProbeEnv, probe_factory
from fixtures.servers import ask, serve, ws_url
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from openenv_sdk import ServerConfig, create_app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.server import ORCHESTRATOR_TOKEN_VAR

TOKEN = "orchestrator-secret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"


@pytest.fixture
def guarded() -> Iterator[str]:
    app = create_app(ProbeEnv, factory=probe_factory(), config=ServerConfig(orchestrator_token=TOKEN))
    with serve(app) as url:
        yield url


def test_server_attack_orchestrator_routes_need_the_token(guarded: str) -> None:
    with connect(ws_url(guarded), additional_headers=AUTH) as bystander:
        assert ask(bystander, "reset")["type"] == "observation"
        session = httpx.post(f"{guarded}/sessions", headers=AUTH).json()
        named = {"X-OpenEnv-Session": session["session_id"]}
        attempts = [
            ("POST", "/reset", {}), ("POST", "/step", {}), ("GET", "/state", {}), ("POST", "/close", {}),
            ("POST", "/sessions", {}), ("GET", f"/sessions/{session['session_id']}", {}),
            ("DELETE", f"/sessions/{session['session_id']}", {}), ("POST", "/call/transcript", {}),
            ("POST", "/call/secret", {}), ("GET", "/docs", {}),
        ]
        for method, path, body in attempts:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                reply = httpx.request(method, f"{guarded}{path}", json=body, headers={**named, **headers})
                assert reply.status_code == 401, (method, path, headers, reply.text)
                assert reply.json()["detail"]["code"] == "UNAUTHORIZED"
                assert reply.headers["WWW-Authenticate"].startswith("Bearer")
        # the mcp_token (handed to the agent) is not the orchestrator's token
        reply = httpx.post(f"{guarded}/call/secret", headers={**named, "Authorization": f"Bearer {session['mcp_token']}"})
        assert reply.status_code == 401
        for path in ("/health", "/metadata", "/schema", "/openapi.json"):
            assert httpx.get(f"{guarded}{path}").status_code == 200, path
        assert httpx.post(f"{guarded}/reset", headers={**named, **AUTH}).status_code == 200
        assert httpx.post(f"{guarded}/call/secret", headers={**named, **AUTH}).json()["result"]["answer"] == 42
        assert ask(bystander, "step", {"message": "on"})["type"] == "observation"


def test_server_attack_websocket_upgrade_needs_the_token(guarded: str) -> None:
    with connect(ws_url(guarded), additional_headers=AUTH) as bystander:
        assert ask(bystander, "reset")["type"] == "observation"
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(InvalidStatus) as refused:
                connect(ws_url(guarded), additional_headers=headers, open_timeout=5)
            assert refused.value.response.status_code == 401
            assert json.loads(refused.value.response.body)["detail"]["code"] == "UNAUTHORIZED"
        assert httpx.get(f"{guarded}/health").json()["active_sessions"] == 1
        assert ask(bystander, "step", {"message": "on"})["type"] == "observation"


def test_server_attack_token_from_the_environment_is_required_and_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ORCHESTRATOR_TOKEN_VAR, TOKEN)
    app = create_app(ProbeEnv, factory=probe_factory())
    assert ORCHESTRATOR_TOKEN_VAR not in os.environ  # no child process of the server inherits it
    config = app.state.openenv.config
    assert TOKEN not in repr(config) and TOKEN not in str(config.model_dump())
    with serve(app) as url:
        assert httpx.post(f"{url}/reset").status_code == 401
        assert httpx.post(f"{url}/reset", headers=AUTH).status_code == 200
    assert TOKEN not in repr(GenericEnvClient(url, orchestrator_token=TOKEN))


def test_server_attack_tools_call_without_an_episode_is_refused() -> None:
    with serve(create_app(ProbeEnv, factory=probe_factory())) as url, connect(ws_url(url)) as bystander:
        assert ask(bystander, "reset")["type"] == "observation"
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "x"}}}
        for params in ("", "?session=", "?session=forged"):
            reply = httpx.post(f"{url}/mcp{params}", json=call).json()
            assert reply["error"]["code"] == -32602, reply
        reply = httpx.post(f"{url}/mcp", json=call).json()
        assert reply["error"]["data"] == {"code": "SESSION_REQUIRED"}
        listing = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()
        assert "echo" in [t["name"] for t in listing["result"]["tools"]]  # listing stays open
        assert httpx.get(f"{url}/health").json()["active_sessions"] == 1  # no throwaway session was made
        assert ask(bystander, "state")["data"]["messages"] == []  # nothing ran in the real episode


@pytest.fixture
def logged_server() -> Iterator[tuple[str, io.StringIO]]:
    """The app served with uvicorn's access log on, into a buffer."""
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    loggers = [logging.getLogger(n) for n in ("uvicorn.access", "uvicorn.error", "openenv_sdk.server", "mcp")]
    app = create_app(ProbeEnv, factory=probe_factory(), config=ServerConfig(orchestrator_token=TOKEN))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="info", access_log=True))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", sink
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_server_attack_no_secret_in_the_server_log(logged_server: tuple[str, io.StringIO]) -> None:
    url, sink = logged_server
    with httpx.Client(base_url=url, headers=AUTH, timeout=5) as client:
        info = client.post("/sessions").json()
        client.post("/reset", headers={"X-OpenEnv-Session": info["session_id"]})
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "m"}}}
        assert "result" in client.post(f"/mcp?session={info['mcp_token']}", json=call).json()
        client.post("/mcp?session=forged-token-value", json=call)
        httpx.post(f"{url}/reset", headers={"Authorization": "Bearer wrong-guess-value"})
    log = sink.getvalue()
    assert "/mcp?session=" in log  # the access log ran
    for secret in (TOKEN, info["mcp_token"], "forged-token-value", "wrong-guess-value"):
        assert secret not in log, secret


def test_server_attack_provider_servers_need_their_token() -> None:
    from openenv_sdk.providers.local import LocalProcessProvider

    with LocalProcessProvider(ECHO_DIR) as provider:
        token = provider.orchestrator_token
        assert token and token not in repr(provider)
        url = provider.start()
        assert httpx.post(f"{url}/reset").status_code == 401  # anyone reaching the port
        with pytest.raises(InvalidStatus):
            connect(ws_url(url), open_timeout=5)
        with GenericEnvClient(provider=provider) as env:  # the provider's client sends it
            env.reset()
            result: Any = env.step({"type": "call_tool", "tool_name": "echo", "arguments": {"message": "hi"}})
            assert result.observation["result"]["data"] == "hi"
            assert token not in repr(env)
            assert httpx.get(f"{url}/health").status_code == 200
            assert not any(token in line for line in provider.logs_tail(400))
