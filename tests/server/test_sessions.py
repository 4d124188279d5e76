"""Sessions: capacity, the idle reaper, close() on every ending, threads, async environments."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest
from fixtures.envs import (
    AsyncEnv,
    OpenEnvStyleAsyncEnv,
    ProbeEnv,
    ProbeObservation,
    Recorder,
    probe_class,
    probe_factory,
)
from fixtures.servers import ask, receive, serve, wait_until, ws_url
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv_sdk import ServerConfig, create_app

HEADER = "X-OpenEnv-Session"


def active(base_url: str) -> int:
    return int(httpx.get(f"{base_url}/health", timeout=5).json()["active_sessions"])


# --- capacity ----------------------------------------------------------------------------------


def test_capacity_refuses_the_third_socket_and_frees_a_slot_on_close() -> None:
    app = create_app(ProbeEnv, config=ServerConfig(max_sessions=2))
    with serve(app) as url:
        first, second = connect(ws_url(url)), connect(ws_url(url))
        assert wait_until(lambda: active(url) == 2)
        with connect(ws_url(url)) as third:
            reply = receive(third)
            assert reply == {
                "type": "error",
                "data": {
                    "message": "Server at capacity: 2 of 2 sessions in use",
                    "code": "CAPACITY_REACHED",
                    "active_sessions": 2,
                    "max_sessions": 2,
                },
            }
            with pytest.raises(ConnectionClosed) as closed:
                third.recv(timeout=5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        first.close()
        assert wait_until(lambda: active(url) == 1)
        with connect(ws_url(url)) as fourth:
            assert ask(fourth, "reset", {})["type"] == "observation"
        second.close()


def test_capacity_over_http_is_503() -> None:
    app = create_app(ProbeEnv, config=ServerConfig(max_sessions=1))
    with serve(app) as url:
        assert httpx.post(f"{url}/sessions").status_code == 201
        refused = httpx.post(f"{url}/reset", json={})
        assert refused.status_code == 503
        assert refused.json()["detail"]["code"] == "CAPACITY_REACHED"


def test_environment_without_concurrent_sessions_holds_one() -> None:
    single = probe_class("SingleSession", SUPPORTS_CONCURRENT_SESSIONS=False)
    app = create_app(single, config=ServerConfig(max_sessions=10))
    with serve(app) as url:
        assert httpx.get(f"{url}/health").json()["max_sessions"] == 1
        with connect(ws_url(url)) as first:
            ask(first, "reset", {})
            with connect(ws_url(url)) as second:
                assert receive(second)["data"]["code"] == "CAPACITY_REACHED"


# --- ending a session calls close() --------------------------------------------------------------


def test_idle_reaper_closes_socket_with_a_message_and_calls_close() -> None:
    recorder = Recorder()
    app = create_app(ProbeEnv, factory=probe_factory(recorder=recorder), config=ServerConfig(idle_timeout_s=0.3))
    with serve(app) as url, connect(ws_url(url)) as ws:
        ask(ws, "reset", {"episode_id": "idle-ws"})
        notice = receive(ws, timeout_s=5)
        assert notice == {
            "type": "error",
            "data": {"message": "Session closed after 0.3 s idle", "code": "SESSION_ERROR"},
        }
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert recorder.wait_closed_episode("idle-ws")


def test_idle_reaper_ends_http_sessions() -> None:
    recorder = Recorder()
    app = create_app(ProbeEnv, factory=probe_factory(recorder=recorder), config=ServerConfig(idle_timeout_s=0.3))
    with serve(app) as url:
        response = httpx.post(f"{url}/reset", json={"episode_id": "idle-http"})
        headers = {HEADER: response.headers[HEADER]}
        assert recorder.wait_closed_episode("idle-http")
        gone = httpx.get(f"{url}/state", headers=headers)
        assert gone.status_code == 404
        assert gone.json()["detail"]["code"] == "SESSION_NOT_FOUND"


def test_active_sessions_are_not_reaped() -> None:
    app = create_app(ProbeEnv, config=ServerConfig(idle_timeout_s=0.3))
    with serve(app) as url, connect(ws_url(url)) as ws:
        ask(ws, "reset", {})
        for _ in range(6):  # 0.6 s in all, never 0.3 s apart
            assert ask(ws, "step", {"message": "x"})["type"] == "observation"
            threading.Event().wait(0.1)


def test_server_shutdown_closes_every_session() -> None:
    recorder = Recorder()
    app = create_app(ProbeEnv, factory=probe_factory(recorder=recorder))
    with serve(app) as url:
        httpx.post(f"{url}/reset", json={"episode_id": "http-at-shutdown"})
        httpx.post(f"{url}/sessions")
    assert recorder.wait_closed(2)
    assert "http-at-shutdown" in recorder.closed


def test_close_raising_does_not_break_the_server() -> None:
    class BadClose(ProbeEnv):
        def close(self) -> None:
            raise RuntimeError("close failed")

    with serve(create_app(BadClose)) as url:
        with connect(ws_url(url)) as ws:
            ask(ws, "reset", {})
        assert wait_until(lambda: active(url) == 0)
        assert httpx.get(f"{url}/health").json()["status"] == "healthy"


# --- threads ---------------------------------------------------------------------------------------


def test_thread_affinity_runs_a_session_on_one_thread() -> None:
    recorder = Recorder()
    pinned = probe_class("Pinned", THREAD_AFFINITY=True)
    app = create_app(pinned, factory=probe_factory(pinned, recorder=recorder))
    with serve(app) as url:
        seen: list[set[int]] = []
        for _ in range(2):
            with recorder.lock:
                recorder.threads.clear()
            with connect(ws_url(url)) as ws:
                ask(ws, "reset", {})
                for _ in range(3):
                    ask(ws, "step", {"message": "x"})
                    ask(ws, "step", {"tool": "echo", "arguments": {"message": "y"}})
                ask(ws, "mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami"}})
            with recorder.lock:
                kinds = {what for what, _ in recorder.threads}
                seen.append({ident for _, ident in recorder.threads})
            assert kinds == {"reset", "step", "echo", "whoami"}
        assert [len(threads) for threads in seen] == [1, 1]
        assert threading.get_ident() not in seen[0] | seen[1]


def test_blocking_sync_code_runs_off_the_event_loop() -> None:
    def sleepy(env: ProbeEnv, action: Any) -> ProbeObservation:
        time.sleep(0.5)
        return ProbeObservation(echoed="slept")

    with serve(create_app(ProbeEnv, factory=probe_factory(step_func=sleepy))) as url:
        with connect(ws_url(url)) as slow, connect(ws_url(url)) as fast:
            ask(slow, "reset", {})
            ask(fast, "reset", {})
            slow.send(json.dumps({"type": "step", "data": {"message": "x"}}))
            time.sleep(0.05)
            # the other session answers while a thread of the first one sleeps
            assert ask(fast, "state", timeout_s=0.4)["type"] == "state"
            assert receive(slow)["data"]["observation"]["echoed"] == "slept"


def _server_threads() -> int:
    return sum(t.name.startswith("openenv-") for t in threading.enumerate())


def test_sessions_between_calls_hold_no_thread() -> None:
    free = probe_class("FreeThreaded", THREAD_AFFINITY=False)
    with serve(create_app(free)) as url:
        sockets = [connect(ws_url(url)) for _ in range(40)]
        try:
            for ws in sockets:
                ask(ws, "reset", {})
                ask(ws, "step", {"message": "x"})
            # the pool keeps at most max_idle (16) threads waiting, not one per session
            assert 1 <= _server_threads() <= 16
        finally:
            for ws in sockets:
                ws.close()
    with serve(create_app(ProbeEnv)) as url:  # the default: pinned, a thread each under 64 sessions
        sockets = [connect(ws_url(url)) for _ in range(40)]
        try:
            for ws in sockets:
                ask(ws, "reset", {})
            assert sum(t.name.startswith("openenv-pinned-") for t in threading.enumerate()) == 40
        finally:
            for ws in sockets:
                ws.close()
    pinned = probe_class("PinnedThreads", THREAD_AFFINITY=True)
    with serve(create_app(pinned)) as url:
        sockets = [connect(ws_url(url)) for _ in range(20)]
        try:
            for ws in sockets:
                ask(ws, "reset", {})
            assert _server_threads() >= 20  # THREAD_AFFINITY: a thread per session
        finally:
            for ws in sockets:
                ws.close()


# --- async environments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env_cls", "reset_text", "step_text"),
    [(AsyncEnv, "async-ready", "async:hi"), (OpenEnvStyleAsyncEnv, "reset_async", "step_async:hi")],
)
def test_async_reset_and_step(env_cls: type, reset_text: str, step_text: str) -> None:
    with serve(create_app(env_cls)) as url:
        with connect(ws_url(url)) as ws:
            assert ask(ws, "reset", {})["data"]["observation"]["echoed"] == reset_text
            assert ask(ws, "step", {"message": "hi"})["data"]["observation"]["echoed"] == step_text
            assert ask(ws, "state")["data"]["step_count"] == 1
        with httpx.Client(base_url=url) as client:
            assert client.post("/reset", json={}).json()["observation"]["echoed"] == reset_text
            assert client.post("/step", json={"action": {"message": "hi"}}).json()["observation"]["echoed"] == step_text


def test_sessions_are_isolated() -> None:
    with serve(create_app(ProbeEnv)) as url, connect(ws_url(url)) as a, connect(ws_url(url)) as b:
        ask(a, "reset", {"episode_id": "a"})
        ask(b, "reset", {"episode_id": "b"})
        ask(a, "step", {"message": "only-a"})
        assert ask(a, "state")["data"]["messages"] == ["only-a"]
        assert ask(b, "state")["data"] == {"episode_id": "b", "step_count": 0, "messages": []}


def test_step_and_tool_calls_before_reset_are_refused_and_the_session_goes_on(echo_server: str) -> None:
    import json

    import httpx
    from websockets.sync.client import connect

    with connect(echo_server.replace("http", "ws") + "/ws") as ws:
        ws.send(json.dumps({"type": "step", "data": {"message": "early"}, "id": 1}))
        reply = json.loads(ws.recv(timeout=10))
        assert reply == {
            "type": "error",
            "data": {"message": "step before reset: call reset first to start an episode", "code": "NOT_RESET"},
            "id": 1,
        }
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        ws.send(json.dumps({"type": "step", "data": {"message": "now"}}))
        assert json.loads(ws.recv(timeout=10))["data"]["observation"]["echoed_message"] == "now"
    with httpx.Client(base_url=echo_server, timeout=10) as http:
        info = http.post("/sessions").json()
        headers = {"X-OpenEnv-Session": info["session_id"]}
        refused = http.post("/step", json={"action": {"message": "early"}}, headers=headers)
        assert (refused.status_code, refused.json()["detail"]["code"]) == (409, "NOT_RESET")
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "x"}}}
        reply = http.post(f"/mcp?session={info['mcp_token']}", json=call).json()
        assert reply["error"]["message"] == "tool call 'echo' before reset: call reset first to start an episode"
