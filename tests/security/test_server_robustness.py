"""Attacks on a real server (uvicorn on a loopback port) by bad input or hostile environment code.

Each test is an attack that must fail: it passes when the server gives a typed error, still
answers `/health`, and another session (opened before the attack) still steps.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fixtures.envs import ProbeEnv, probe_factory
from fixtures.servers import ask, receive, serve, wait_until, ws_url
from websockets.sync.client import ClientConnection, connect

from openenv_sdk import ServerConfig, create_app, orchestrator, tool

SPAWNED: list[int] = []
"""Pids of the commands `spawn_sleep` started."""
NAPS_CANCELLED: list[float] = []
"""`nap` calls whose coroutine was cancelled."""

RELEASE = threading.Event()
"""Set to end every `hang` call (tests set it when done, so no thread outlives its test by much)."""


class HostileEnv(ProbeEnv):
    """Tools and calls that raise what `except Exception` does not catch, or never return."""

    name = "hostile"

    @tool
    def exit_sync(self, code: int = 2) -> str:
        """argparse on bad input."""
        raise SystemExit(code)

    @tool
    async def exit_async(self) -> str:
        """SystemExit from a coroutine."""
        raise SystemExit(3)

    @tool
    def interrupt(self) -> str:
        """KeyboardInterrupt from a thread."""
        raise KeyboardInterrupt

    @tool
    async def interrupt_async(self) -> str:
        """KeyboardInterrupt on the event loop."""
        raise KeyboardInterrupt

    @tool
    def generator_exit(self) -> str:
        """GeneratorExit."""
        raise GeneratorExit

    @tool
    async def cancel_itself(self) -> str:
        """A CancelledError that is not the server's."""
        raise asyncio.CancelledError

    @tool(timeout_s=0.2)
    def hang(self, seconds: float = 5.0) -> str:
        """Block its thread until released."""
        RELEASE.wait(seconds)
        return "released"

    @tool
    def big(self, n_bytes: int) -> str:
        """A huge result."""
        return "x" * n_bytes

    @tool
    def big_dict(self, n_bytes: int) -> dict[str, str]:
        """A huge structured result."""
        return {"blob": "y" * n_bytes}

    @tool
    def odd(self, kind: str) -> Any:
        """A value that is not JSON."""
        values: dict[str, Any] = {
            "object": object(), "set": {1, 2}, "bytes": b"\xff", "nan": float("nan"),
            "inf_in_dict": {"x": float("inf")}, "int_keys": {(1, 2): "a"},
        }  # fmt: skip
        if kind == "cycle":
            loop: list[Any] = []
            loop.append(loop)
            return loop
        return values[kind]

    @tool
    def spawn_sleep(self, seconds: float) -> str:
        """A command that runs until it ends or the environment closes (and kills it)."""
        self._proc = subprocess.Popen(["sleep", str(seconds)])
        SPAWNED.append(self._proc.pid)
        return f"exit {self._proc.wait()}"

    @tool
    async def nap(self, seconds: float) -> str:
        """A coroutine that runs until it ends or is cancelled."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            NAPS_CANCELLED.append(seconds)
            raise
        return "rested"

    def close(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
        super().close()

    @orchestrator
    def quit(self) -> None:
        """An orchestrator call that exits."""
        raise SystemExit(4)

    def step(self, action: Any) -> Any:
        if action.message == "exit":
            raise SystemExit(5)
        return super().step(action)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> Any:
        if task.get("fail") == "exit":
            raise SystemExit(6)
        if task.get("fail") == "raise":
            raise RuntimeError("reset failed")
        return super().reset(seed=seed, episode_id=episode_id, **task)


def hostile_app(**config: Any) -> Any:
    return create_app(HostileEnv, factory=probe_factory(HostileEnv), config=ServerConfig(**config))


@pytest.fixture(autouse=True)
def _release_hung_threads() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


@pytest.fixture
def server() -> Iterator[str]:
    with serve(hostile_app()) as url:
        yield url


def open_session(url: str) -> ClientConnection:
    conn = connect(ws_url(url), open_timeout=5)
    assert ask(conn, "reset")["type"] == "observation"
    return conn


def tool_step(conn: ClientConnection, name: str, **arguments: Any) -> dict[str, Any]:
    return ask(conn, "step", {"tool": name, "arguments": arguments})


def assert_alive(url: str, bystander: ClientConnection) -> None:
    """The server answers, and a session opened before the attack goes on."""
    assert httpx.get(f"{url}/health", timeout=5).status_code == 200
    reply = ask(bystander, "step", {"message": "still here"}, timeout_s=5)
    assert reply["type"] == "observation", reply
    assert reply["data"]["observation"]["echoed"] == "still here"


# --- 1. BaseException from environment code --------------------------------------------


@pytest.mark.parametrize(
    ("tool_name", "raised"),
    [
        ("exit_sync", "SystemExit: 2"),
        ("exit_async", "SystemExit: 3"),
        ("interrupt", "KeyboardInterrupt"),
        ("interrupt_async", "KeyboardInterrupt"),
        ("generator_exit", "GeneratorExit"),
        ("cancel_itself", "CancelledError"),
    ],
)
def test_server_attack_base_exception_in_a_tool_is_a_tool_error(server: str, tool_name: str, raised: str) -> None:
    with open_session(server) as bystander, open_session(server) as attacker:
        obs = tool_step(attacker, tool_name)
        assert obs["type"] == "observation", obs
        assert obs["data"]["observation"]["error"] == {
            "error_type": "execution_error",
            "message": f"Tool {tool_name!r} failed: EnvironmentAborted: {raised}",
        }
        assert tool_step(attacker, "echo", message="after")["data"]["observation"]["result"]["data"] == "after"
        assert_alive(server, bystander)


def test_server_attack_base_exception_over_mcp_is_a_tool_error(server: str) -> None:
    with open_session(server) as bystander, httpx.Client(base_url=server, timeout=5) as client:
        info = client.post("/sessions").json()
        assert client.post("/reset", headers={"X-OpenEnv-Session": info["session_id"]}).status_code == 200
        for name in ("exit_sync", "exit_async", "interrupt_async"):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}
            reply = client.post(f"/mcp?session={info['mcp_token']}", json=body).json()
            assert reply["result"]["isError"] is True, reply
            assert "EnvironmentAborted" in reply["result"]["content"][0]["text"]
        assert_alive(server, bystander)


def test_server_attack_base_exception_in_reset_step_and_orchestrator_calls(server: str) -> None:
    with open_session(server) as bystander, connect(ws_url(server)) as attacker:
        reply = ask(attacker, "reset", {"fail": "exit"})
        assert reply["data"]["code"] == "EXECUTION_ERROR" and "SystemExit" in reply["data"]["message"], reply
        assert ask(attacker, "reset")["type"] == "observation"
        reply = ask(attacker, "step", {"message": "exit"})
        assert reply["data"]["code"] == "EXECUTION_ERROR" and "SystemExit" in reply["data"]["message"], reply
        reply = ask(attacker, "call", {"name": "quit"})
        assert reply["data"]["code"] == "EXECUTION_ERROR" and "SystemExit" in reply["data"]["message"], reply
        assert ask(attacker, "state")["type"] == "state"
        assert_alive(server, bystander)


# --- 2. hung sync calls -----------------------------------------------------------------------


def test_server_attack_hung_threads_do_not_starve_other_sessions(server: str) -> None:
    with open_session(server) as bystander:
        attackers = [open_session(server) for _ in range(12)]
        try:
            for conn in attackers:  # each leaves one thread blocked past its timeout
                assert tool_step(conn, "hang")["data"]["observation"]["error"]["error_type"] == "timeout"
            started = time.monotonic()
            with open_session(server) as fresh:  # a fresh session's reset is not queued behind them
                assert tool_step(fresh, "echo", message="fresh")["data"]["observation"]["result"]["data"] == "fresh"
            assert time.monotonic() - started < 1.5
            health = httpx.get(f"{server}/health").json()
            assert health["abandoned_threads"] == 12
            assert_alive(server, bystander)
        finally:
            for conn in attackers:
                conn.close()


def test_server_attack_timed_out_session_is_quarantined_until_its_call_ends(server: str) -> None:
    with open_session(server) as bystander, open_session(server) as attacker:
        assert tool_step(attacker, "hang")["data"]["observation"]["error"]["error_type"] == "timeout"
        for message in (("step", {"tool": "echo", "arguments": {"message": "x"}}), ("reset", None),
                        ("call", {"name": "secret"})):
            reply = ask(attacker, *message)
            assert reply["type"] == "error" and reply["data"]["code"] == "SESSION_BUSY", reply
            assert "still running" in reply["data"]["message"]
        assert_alive(server, bystander)
        RELEASE.set()  # the hung call really ends: the session takes calls again
        assert wait_until(lambda: httpx.get(f"{server}/health").json()["abandoned_threads"] == 0)
        assert tool_step(attacker, "echo", message="back")["data"]["observation"]["result"]["data"] == "back"


def test_server_attack_abandoned_threads_are_bounded() -> None:
    with serve(hostile_app(max_abandoned_threads=2)) as url, open_session(url) as bystander:
        attackers = [open_session(url) for _ in range(2)]
        for conn in attackers:
            tool_step(conn, "hang")
        with connect(ws_url(url)) as refused:
            reply = json.loads(refused.recv(timeout=5))
            assert reply["data"]["code"] == "CAPACITY_REACHED" and "max_abandoned_threads" in reply["data"]["message"]
        health = httpx.get(f"{url}/health").json()
        assert (health["status"], health["abandoned_threads"], health["max_abandoned_threads"]) == ("degraded", 2, 2)
        assert_alive(url, bystander)
        RELEASE.set()
        assert wait_until(lambda: httpx.get(f"{url}/health").json()["abandoned_threads"] == 0)
        with open_session(url):
            pass
        for conn in attackers:
            conn.close()


# --- 3. failed resets leave no session ----------------------------------------------------------


def test_server_attack_failed_http_resets_leave_no_session(server: str) -> None:
    with open_session(server) as bystander, httpx.Client(base_url=server, timeout=5) as client:
        for i in range(60):
            body = [{"seed": "not a number"}, {"fail": "raise"}, {"fail": "exit"}, {"episode_id": "e" * 300}][i % 4]
            reply = client.post("/reset", json=body, headers={"Cookie": ""})
            client.cookies.clear()
            assert reply.status_code in (422, 500), reply.text
            assert reply.json()["detail"]["code"] in ("VALIDATION_ERROR", "EXECUTION_ERROR")
            assert "X-OpenEnv-Session" not in reply.headers
        assert httpx.get(f"{server}/health").json()["active_sessions"] == 1  # the bystander only
        assert_alive(server, bystander)


# --- 5. session filling ---------------------------------------------------------------------------


def test_server_attack_unreset_sessions_are_reaped_after_the_grace_period() -> None:
    with serve(hostile_app(max_sessions=4, unreset_grace_s=0.5)) as url, open_session(url) as bystander:
        idle_sockets = [connect(ws_url(url)) for _ in range(2)]
        with httpx.Client(base_url=url) as client:
            assert client.post("/sessions").status_code == 201
        health = httpx.get(f"{url}/health").json()
        assert (health["active_sessions"], health["unreset_sessions"]) == (4, 3)
        with connect(ws_url(url)) as refused:  # un-reset sessions count against capacity
            assert json.loads(refused.recv(timeout=5))["data"]["code"] == "CAPACITY_REACHED"
        assert wait_until(lambda: httpx.get(f"{url}/health").json()["active_sessions"] == 1, timeout_s=5)
        for conn in idle_sockets:
            reply = json.loads(conn.recv(timeout=5))
            assert reply["data"]["code"] == "SESSION_ERROR" and "not reset within" in reply["data"]["message"]
            conn.close()
        assert_alive(url, bystander)  # a reset session is not reaped by the grace period


def test_server_attack_mcp_sessions_are_bounded_and_counted() -> None:
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with serve(hostile_app(max_mcp_sessions=3)) as url, open_session(url) as bystander, httpx.Client(
        base_url=url, timeout=5
    ) as client:
        statuses = [client.post("/mcp", json=init, headers=headers).status_code for _ in range(5)]
        assert statuses[:3] == [200, 200, 200] and all(s >= 400 for s in statuses[3:]), statuses
        health = client.get("/health").json()
        assert (health["mcp_sessions"], health["max_mcp_sessions"]) == (3, 3)
        assert_alive(url, bystander)


# --- 6. byte limits ---------------------------------------------------------------------------


@pytest.mark.parametrize("tool_name", ["big", "big_dict"])
def test_server_attack_huge_tool_result_is_cut(tool_name: str) -> None:
    limit = 64 * 1024
    with serve(hostile_app(max_tool_result_bytes=limit)) as url, open_session(url) as bystander, open_session(
        url
    ) as attacker:
        raw = attacker.send(json.dumps({"type": "step", "data": {"tool": tool_name, "arguments": {"n_bytes": 4 * 1024 * 1024}}}))
        raw = attacker.recv(timeout=10)
        assert len(raw) < 2 * limit, len(raw)
        result = json.loads(raw)["data"]["observation"]["result"]
        assert "truncated by the server" in result["content"][0]["text"]
        assert "structuredContent" not in result
        assert_alive(url, bystander)


def test_server_attack_transcript_is_byte_bounded() -> None:
    limit = 64 * 1024
    with serve(hostile_app(max_transcript_bytes=limit)) as url, open_session(url) as bystander, open_session(
        url
    ) as attacker:
        for i in range(30):
            assert tool_step(attacker, "echo", message=f"{i}:" + "z" * 32 * 1024)["type"] == "observation"
        transcript = ask(attacker, "call", {"name": "transcript"})["data"]["result"]
        assert len(json.dumps(transcript)) < 2 * limit
        assert transcript[0]["dropped"] > 0 and "dropped" in transcript[0]["error"]
        assert transcript[-1]["arguments"]["message"].startswith("29:")  # the newest call is kept
        assert_alive(url, bystander)


def test_server_attack_oversized_websocket_messages() -> None:
    """Over the limit, a little (read, then refused) or far (passed over as it arrives): a typed
    error naming the limit, with the request's id, and the session goes on."""
    limit = 64 * 1024
    with serve(hostile_app(max_message_bytes=limit)) as url, open_session(url) as bystander:
        with open_session(url) as attacker:
            for size in (limit + 1000, 4 * 1024 * 1024, 100 * 1024 * 1024):
                for request_id in ("req-1", 42):
                    reply = ask(attacker, "step", {"message": "m" * size}, id=request_id, timeout_s=60)
                    assert reply["type"] == "error" and reply["data"]["code"] == "MESSAGE_TOO_LARGE", reply
                    assert reply["id"] == request_id, reply
                    assert f"limit of {limit} bytes" in reply["data"]["message"], reply
                    assert reply["data"]["max_message_bytes"] == limit
                    # the id last in the envelope is found too
                    attacker.send('{"type": "step", "data": {"message": "' + "m" * size + f'"}}, "id": {json.dumps(request_id)}}}')
                    assert receive(attacker, timeout_s=60)["id"] == request_id
                    assert ask(attacker, "state", id="s")["type"] == "state"  # the session goes on
            attacker.send(b"\x00" * (4 * 1024 * 1024))  # binary, far over, no id: typed, no id
            reply = receive(attacker)
            assert reply["data"]["code"] == "MESSAGE_TOO_LARGE" and "id" not in reply, reply
            assert ask(attacker, "step", {"message": "still"})["data"]["observation"]["echoed"] == "still"
        assert_alive(url, bystander)


def test_server_attack_typed_errors_keep_the_request_id(server: str) -> None:
    """A message refused before it is parsed (not UTF-8, nested too deep) keeps its id."""
    with open_session(server) as attacker:
        attacker.send(b'{"type": "step", "id": "bad-utf8", "data": {"message": "\xff\xfe"}}')
        reply = receive(attacker)
        assert (reply["data"]["code"], reply["id"]) == ("INVALID_JSON", "bad-utf8"), reply
        attacker.send('{"type": "step", "id": 7, "data": {"message": "x", "metadata": ' + "[" * 5000 + "]" * 5000 + "}}")
        reply = receive(attacker)
        assert (reply["data"]["code"], reply["id"]) == ("INVALID_JSON", 7), reply
        attacker.send('{"type": "nope", "id": "unknown-type"}')
        reply = receive(attacker)
        assert (reply["data"]["code"], reply["id"]) == ("UNKNOWN_TYPE", "unknown-type"), reply


# --- 7. JSON nested too deep, bytes that are not UTF-8 -------------------------------------


DEEP = b"[" * 100_000 + b"]" * 100_000


def test_server_attack_deep_json_on_websocket(server: str) -> None:
    with open_session(server) as bystander, open_session(server) as attacker:
        attacker.send(DEEP.decode())
        reply = json.loads(attacker.recv(timeout=5))
        assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON", reply
        assert "nested" in reply["data"]["message"]
        attacker.send(b'{"type": "state", "id": "\xff\xfe"}')  # a binary frame, not UTF-8
        reply = json.loads(attacker.recv(timeout=5))
        assert reply["data"]["code"] == "INVALID_JSON" and "UTF-8" in reply["data"]["message"], reply
        deep_action = '{"type": "step", "data": {"message": "x", "metadata": ' + "[" * 5000 + "]" * 5000 + "}}"
        attacker.send(deep_action)
        assert json.loads(attacker.recv(timeout=5))["data"]["code"] == "INVALID_JSON"
        assert ask(attacker, "state")["type"] == "state"  # the session goes on
        assert_alive(server, bystander)


@pytest.mark.parametrize("path", ["/reset", "/step", "/sessions", "/call/secret"])
@pytest.mark.parametrize("body", [DEEP, b'{"seed": 1, "x": "\xc3\x28"}'], ids=["deep", "not-utf8"])
def test_server_attack_bad_http_bodies_get_typed_errors(server: str, path: str, body: bytes) -> None:
    with open_session(server) as bystander:
        reply = httpx.post(f"{server}{path}", content=body, headers={"Content-Type": "application/json"})
        assert reply.status_code == 400, reply.text
        assert reply.json()["detail"]["code"] == "INVALID_JSON"
        assert httpx.get(f"{server}/health").json()["active_sessions"] == 1
        assert_alive(server, bystander)


@pytest.mark.parametrize("body", [DEEP, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list\xff"}'], ids=["deep", "not-utf8"])
@pytest.mark.parametrize("mcp_client", [False, True], ids=["plain-jsonrpc", "mcp-client"])
def test_server_attack_bad_mcp_bodies_get_jsonrpc_parse_errors(server: str, body: bytes, mcp_client: bool) -> None:
    headers = {"Content-Type": "application/json"}
    if mcp_client:
        headers.update({"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
    with open_session(server) as bystander:
        reply = httpx.post(f"{server}/mcp", content=body, headers=headers)
        assert reply.status_code < 500, reply.text
        error = reply.json()["error"]
        assert error["code"] == -32700 and error["data"]["code"] == "INVALID_JSON", error
        assert_alive(server, bystander)


# --- 8. X-Request-Id ------------------------------------------------------------------------


def test_server_request_id_is_echoed_or_generated(server: str) -> None:
    with httpx.Client(base_url=server, timeout=5) as client:
        for method, path in (("GET", "/health"), ("GET", "/schema"), ("POST", "/reset"), ("GET", "/state"),
                             ("POST", "/mcp"), ("GET", "/no-such-route")):
            reply = client.request(method, path, headers={"X-Request-Id": "req-42"}, json=None)
            assert reply.headers.get("X-Request-Id") == "req-42", (method, path)
            generated = client.request(method, path).headers.get("X-Request-Id")
            assert generated and generated != "req-42", (method, path)
        bad = client.get("/health", headers={"X-Request-Id": "x" * 300})  # not echoed: too long
        assert bad.headers["X-Request-Id"] != "x" * 300
        step = client.post("/step", json={"action": {"message": "hi"}, "request_id": "body-id"})
        assert step.headers["X-Request-Id"] == "body-id"


# --- 9. HTTP slow loris ------------------------------------------------------------------------


def test_server_attack_slow_loris_request_heads_are_cut_at_the_header_deadline() -> None:
    """200 connections trickle a request head a byte at a time: each is closed once it has taken
    `header_timeout_s` without finishing its head; the server answers meanwhile and after."""
    with serve(hostile_app(header_timeout_s=1.0)) as url, open_session(url) as bystander:
        host, port = url.removeprefix("http://").split(":")
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
        sockets = [socket.create_connection((host, int(port)), timeout=5) for _ in range(200)]
        started = time.monotonic()
        closed: set[int] = set()
        try:
            for i in range(len(head)):
                if len(closed) == len(sockets) or time.monotonic() - started > 8:
                    break
                for n, sock in enumerate(sockets):
                    if n in closed:
                        continue
                    try:
                        sock.sendall(head[i : i + 1])
                    except OSError:  # reset by the server: it closed the connection
                        closed.add(n)
                time.sleep(0.2)
            for n, sock in enumerate(sockets):  # what is left: the server must have closed it
                if n not in closed:
                    sock.settimeout(3)
                    try:
                        assert sock.recv(1024) == b"", "a connection trickling its head got an answer"
                    except TimeoutError:
                        raise AssertionError(f"a connection trickling its head is still held after {time.monotonic() - started:.1f} s") from None
                    except OSError:  # reset: closed
                        pass
                    closed.add(n)
            elapsed = time.monotonic() - started
        finally:
            for sock in sockets:
                sock.close()
        assert elapsed < 6, f"the heads were held {elapsed:.1f} s (header_timeout_s is 1 s)"
        assert_alive(url, bystander)
        # a whole head sent promptly is answered as before, also on a kept-alive connection
        with httpx.Client(base_url=url, timeout=5) as client:
            for _ in range(3):
                assert client.get("/health").status_code == 200
                time.sleep(0.4)
    assert ServerConfig().header_timeout_s == 10.0  # finite by default


# --- 10. tool results that are not JSON ---------------------------------------------------------

ODD_KINDS = ["object", "set", "bytes", "nan", "inf_in_dict", "int_keys", "cycle"]


def test_server_attack_non_json_tool_results_are_is_error_results(server: str) -> None:
    """Over the WebSocket step, plain JSON-RPC and the official MCP client alike: an `isError`
    result saying why, strict JSON on the wire, and the session goes on."""
    import anyio
    import httpx2

    from openenv_sdk._mcp_imports import MCP_IMPORT_LOCK

    with MCP_IMPORT_LOCK:  # the server imports the official MCP package in a thread meanwhile
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

    with open_session(server) as bystander, open_session(server) as attacker, httpx.Client(
        base_url=server, timeout=10
    ) as client:
        info = client.post("/sessions").json()
        assert client.post("/reset", headers={"X-OpenEnv-Session": info["session_id"]}).status_code == 200
        for kind in ODD_KINDS:
            obs = tool_step(attacker, "odd", kind=kind)["data"]["observation"]
            assert obs["error"]["error_type"] == "execution_error", (kind, obs)
            assert "returned a value that is not JSON" in obs["error"]["message"], (kind, obs)
            body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "odd", "arguments": {"kind": kind}}}
            reply = client.post(f"/mcp?session={info['mcp_token']}", json=body)
            assert reply.status_code == 200, (kind, reply.text)
            assert not any(c in reply.text for c in ("NaN", "Infinity")), (kind, reply.text)  # strict JSON
            result = reply.json()["result"]
            assert result["isError"] is True and "not JSON" in result["content"][0]["text"], (kind, result)

        async def official() -> list[tuple[bool, str]]:
            async with httpx2.AsyncClient(timeout=10) as http, streamable_http_client(
                f"{server}/mcp?session={info['mcp_token']}", http_client=http
            ) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                results = [await session.call_tool("odd", {"kind": kind}) for kind in ODD_KINDS]
                return [(r.is_error, r.content[0].text) for r in results]  # type: ignore[union-attr]

        for is_error, text in anyio.run(official):
            assert is_error and "not JSON" in text, text
        assert tool_step(attacker, "echo", message="after")["data"]["observation"]["result"]["data"] == "after"
        assert_alive(server, bystander)


# --- 11. a client that goes away mid-call ----------------------------------------------------------


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _drop(conn: ClientConnection) -> None:
    """Go away without a close handshake, as a crashed client does."""
    conn.socket.shutdown(socket.SHUT_RDWR)
    conn.socket.close()


@pytest.mark.parametrize("tool_name", ["spawn_sleep", "nap"])
def test_server_attack_a_dropped_client_ends_its_call(tool_name: str) -> None:
    """A client drops during a 12 s call: after `disconnect_grace_s` its command is killed (the
    environment's close runs beside the call) or its coroutine cancelled, and the session ends."""
    grace_s = 0.3
    with serve(hostile_app(disconnect_grace_s=grace_s)) as url, open_session(url) as bystander:
        spawned, cancelled = len(SPAWNED), len(NAPS_CANCELLED)
        conn = open_session(url)
        conn.send(json.dumps({"type": "step", "data": {"tool": tool_name, "arguments": {"seconds": 12}}}))
        time.sleep(0.3)  # the call is running
        if tool_name == "spawn_sleep":
            assert len(SPAWNED) == spawned + 1
            assert _running(SPAWNED[-1])
        dropped = time.monotonic()
        _drop(conn)
        if tool_name == "spawn_sleep":
            assert wait_until(lambda: not _running(SPAWNED[-1]), timeout_s=5), "the command outlived its client"
        else:
            assert wait_until(lambda: len(NAPS_CANCELLED) == cancelled + 1, timeout_s=5), "the coroutine ran on"
        took_s = time.monotonic() - dropped
        assert grace_s <= took_s < grace_s + 1.5, took_s
        health = lambda: httpx.get(f"{url}/health").json()  # noqa: E731
        assert wait_until(lambda: health()["active_sessions"] == 1 and health()["abandoned_threads"] == 0)
        assert_alive(url, bystander)


def test_server_attack_a_client_that_sends_during_a_call_is_not_dropped() -> None:
    """The watch for a dropped client reads the connection: a message sent while a call runs is
    answered after it, in order."""
    with serve(hostile_app()) as url, open_session(url) as conn:
        conn.send(json.dumps({"type": "step", "data": {"tool": "nap", "arguments": {"seconds": 0.4}}, "id": 1}))
        time.sleep(0.2)
        conn.send(json.dumps({"type": "state", "id": 2}))
        first, second = receive(conn), receive(conn)
        assert (first["id"], first["data"]["observation"]["result"]["data"]) == (1, "rested"), first
        assert (second["id"], second["type"]) == (2, "state"), second


# --- 12. no session outlives its client unless made to -------------------------------------------


def test_server_attack_sessions_made_by_reset_end_with_their_client() -> None:
    """`POST /reset` without a session (any body) makes one that ends `unreset_grace_s` after
    its connection closes; one made by `POST /sessions`, or named from another connection, is
    kept (until `idle_timeout_s`)."""
    with serve(hostile_app(unreset_grace_s=0.5)) as url, open_session(url) as bystander:
        json_headers = {"Content-Type": "application/json"}
        for body in (b"null", b"{}", b'{"seed": 3}', None):
            with httpx.Client(base_url=url, timeout=5) as client:  # its own connection, closed after
                reply = client.post("/reset", content=body, headers=json_headers if body else {})
                assert reply.status_code == 200 and reply.headers["X-OpenEnv-Session"], reply.text
        explicit = httpx.post(f"{url}/sessions").json()["session_id"]
        assert httpx.post(f"{url}/reset", headers={"X-OpenEnv-Session": explicit}).status_code == 200
        with httpx.Client(base_url=url, timeout=5) as first:
            claimed = first.post("/reset").headers["X-OpenEnv-Session"]
            with httpx.Client(base_url=url, timeout=5) as second:  # another client names it
                step = second.post("/step", json={"action": {"message": "mine"}}, headers={"X-OpenEnv-Session": claimed})
                assert step.status_code == 200, step.text
        health = lambda: httpx.get(f"{url}/health").json()["active_sessions"]  # noqa: E731
        assert wait_until(lambda: health() == 3, timeout_s=5), health()  # the bystander, explicit, claimed
        time.sleep(1.0)
        assert health() == 3
        for kept in (explicit, claimed):
            step = httpx.post(f"{url}/step", json={"action": {"message": "kept"}}, headers={"X-OpenEnv-Session": kept})
            assert step.status_code == 200, step.text
        # a cookie-keeping client on one connection keeps its session while it is open
        with httpx.Client(base_url=url, timeout=5) as keeper:
            assert keeper.post("/reset").status_code == 200
            time.sleep(1.0)
            assert keeper.post("/step", json={"action": {"message": "still"}}).status_code == 200
        assert wait_until(lambda: health() == 3, timeout_s=5), health()
        assert_alive(url, bystander)


def test_server_attack_fragmented_and_interleaved_frames_are_read_as_sent() -> None:
    """The frame scanner that passes over oversized messages leaves every other frame as it was:
    a message in fragments, a ping between them, several frames in one write."""
    limit = 64 * 1024
    with serve(hostile_app(max_message_bytes=limit)) as url, open_session(url) as conn:
        text = json.dumps({"type": "step", "id": "frag", "data": {"message": "f" * 3000}})
        conn.send([text[:10], text[10:2000], text[2000:]])  # one message, three frames
        reply = receive(conn)
        assert (reply["id"], reply["data"]["observation"]["echoed"]) == ("frag", "f" * 3000), reply
        conn.ping(b"between")  # a control frame, then a message whose first fragment is big
        big = json.dumps({"type": "step", "id": "big", "data": {"message": "g" * (limit // 2)}})
        conn.send([big[: limit // 4], big[limit // 4 :]])
        assert receive(conn)["id"] == "big"
        far = '{"type": "step", "id": "far", "data": {"message": "' + "h" * (2 * limit) + '"}}'
        conn.send(far)  # passed over, then a small one in the same burst
        conn.send(json.dumps({"type": "state", "id": "after"}))
        replies = [receive(conn), receive(conn)]
        assert [(r["id"], r["type"]) for r in replies] == [("far", "error"), ("after", "state")], replies
        assert replies[0]["data"]["code"] == "MESSAGE_TOO_LARGE"
