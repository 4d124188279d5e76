"""`WS /ws`: the envelope, every bad input, tools through `step`, orchestrator calls."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.envs import ProbeEnv, Recorder, ToolOnlyEnv, probe_factory
from fixtures.servers import ask, receive, serve, wait_until, ws_url
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_sdk import ServerConfig, create_app

TOOLS = ["add", "aecho", "echo", "episode", "explode", "slow", "slow_sync", "whoami"]


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def base_url(recorder: Recorder) -> Iterator[str]:
    app = create_app(ProbeEnv, factory=probe_factory(recorder=recorder), config=ServerConfig(max_message_bytes=1024))
    with serve(app) as url:
        yield url


@pytest.fixture
def ws(base_url: str) -> Iterator[ClientConnection]:
    with connect(ws_url(base_url), open_timeout=10) as conn:
        assert ask(conn, "reset", {})["type"] == "observation"
        yield conn


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["type"] == "error", reply
    return reply["data"]  # type: ignore[no-any-return]


def step_works(conn: ClientConnection) -> None:
    reply = ask(conn, "step", {"message": "still here"})
    assert reply["type"] == "observation", reply
    assert reply["data"]["observation"]["echoed"] == "still here"


# --- the envelope ---------------------------------------------------------------------


def test_reset_step_state_round_trip(base_url: str) -> None:
    with connect(ws_url(base_url)) as conn:
        reset = ask(conn, "reset", {"seed": 3, "episode_id": "ep-1", "level": 2})
        assert reset == {
            "type": "observation",
            "data": {
                "observation": {"metadata": {"task": {"level": 2}}, "echoed": "ready", "thread_id": 0},
                "reward": None,
                "done": False,
                "metadata": {"task": {"level": 2}},
            },
        }
        step = ask(conn, "step", {"message": "ab", "count": 2})
        assert step["type"] == "observation"
        assert step["data"]["observation"]["echoed"] == "abab"
        assert step["data"]["reward"] == 2.0
        assert step["data"]["done"] is False
        state = ask(conn, "state")
        assert state == {"type": "state", "data": {"episode_id": "ep-1", "step_count": 1, "messages": ["ab"]}}


def test_reply_echoes_id_on_success_and_error(ws: ClientConnection) -> None:
    assert ask(ws, "step", {"message": "x"}, id="req-1")["id"] == "req-1"
    assert ask(ws, "state", id=7)["id"] == 7
    assert ask(ws, "bogus", id="req-3")["id"] == "req-3"
    ws.send(json.dumps({"type": "step", "data": {"message": ""}, "id": 9}))
    assert receive(ws)["id"] == 9


def test_reply_without_id_has_no_id_field(ws: ClientConnection) -> None:
    assert "id" not in ask(ws, "state")


def test_session_message_gives_token(ws: ClientConnection) -> None:
    data = ask(ws, "session")["data"]
    assert set(data) == {"session_id", "mcp_token", "mcp_path"}
    assert data["mcp_path"] == "/mcp"
    assert len(data["mcp_token"]) >= 32


# --- bad input: a typed error, and the session goes on --------------------------------


def test_invalid_json(ws: ClientConnection) -> None:
    ws.send("{bad")
    data = error_of(receive(ws))
    assert data == {"message": "Invalid JSON: key must be a string at line 1 column 2", "code": "INVALID_JSON"}
    step_works(ws)


def test_json_that_is_not_an_envelope(ws: ClientConnection) -> None:
    ws.send("[1, 2]")
    data = error_of(receive(ws))
    assert data["code"] == "VALIDATION_ERROR"
    assert data["message"].startswith("Invalid message: ")
    step_works(ws)


def test_unknown_type(ws: ClientConnection) -> None:
    data = error_of(ask(ws, "stepp", {}))
    assert data == {
        "message": "Unknown message type 'stepp'; expected one of reset, step, state, close, mcp, session, call, "
        "checkpoint, restore, drop_checkpoint",
        "code": "UNKNOWN_TYPE",
    }
    step_works(ws)


def test_invalid_action_lists_pydantic_field_errors(ws: ClientConnection) -> None:
    data = error_of(ask(ws, "step", {"message": "", "count": 0}))
    assert data["code"] == "VALIDATION_ERROR"
    assert data["message"] == (
        "Invalid action for ProbeEnv: message: String should have at least 1 character; "
        "count: Input should be greater than or equal to 1"
    )
    assert data["errors"] == [
        {"loc": ["message"], "msg": "String should have at least 1 character", "type": "string_too_short"},
        {"loc": ["count"], "msg": "Input should be greater than or equal to 1", "type": "greater_than_equal"},
    ]
    step_works(ws)


def test_unknown_action_field_is_refused(ws: ClientConnection) -> None:
    data = error_of(ask(ws, "step", {"message": "x", "mesage": "typo"}))
    assert data["errors"] == [{"loc": ["mesage"], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}]
    step_works(ws)


def test_step_without_data(ws: ClientConnection) -> None:
    assert error_of(ask(ws, "step")) == {"message": "step needs an action object in `data`", "code": "VALIDATION_ERROR"}
    step_works(ws)


def test_invalid_reset_arguments(ws: ClientConnection) -> None:
    data = error_of(ask(ws, "reset", {"seed": "abc"}))
    assert data["code"] == "VALIDATION_ERROR"
    assert data["errors"][0]["loc"] == ["seed"]
    step_works(ws)


def test_oversized_message(ws: ClientConnection) -> None:
    ws.send(json.dumps({"type": "step", "data": {"message": "x" * 2000}}))
    data = error_of(receive(ws))
    assert data["code"] == "MESSAGE_TOO_LARGE"
    assert data["message"].endswith("exceeds the limit of 1024 bytes (max_message_bytes)")
    assert data["max_message_bytes"] == 1024
    step_works(ws)


def test_environment_raising_in_step_is_execution_error() -> None:
    def broken(env: ProbeEnv, action: Any) -> Any:
        raise RuntimeError("kaput")

    app = create_app(ProbeEnv, factory=probe_factory(step_func=broken))
    with serve(app) as url, connect(ws_url(url)) as conn:
        ask(conn, "reset", {})
        assert error_of(ask(conn, "step", {"message": "x"})) == {
            "message": "step raised RuntimeError: kaput",
            "code": "EXECUTION_ERROR",
        }
        assert ask(conn, "state")["type"] == "state"


def test_step_returning_a_non_observation_is_execution_error() -> None:
    app = create_app(ProbeEnv, factory=probe_factory(step_func=lambda env, action: "oops"))
    with serve(app) as url, connect(ws_url(url)) as conn:
        ask(conn, "reset", {})
        data = error_of(ask(conn, "step", {"message": "x"}))
        assert data == {"message": "reset/step must return an Observation, got str", "code": "EXECUTION_ERROR"}


# --- tools through step ----------------------------------------------------------------


def tool_step(conn: ClientConnection, tool: str, **arguments: Any) -> dict[str, Any]:
    reply = ask(conn, "step", {"tool": tool, "arguments": arguments})
    assert reply["type"] == "observation", reply
    return reply["data"]["observation"]  # type: ignore[no-any-return]


def test_tool_call_through_step(ws: ClientConnection) -> None:
    obs = tool_step(ws, "add", a=2, b=3)
    assert obs["error"] is None
    assert obs["result"] == {
        "content": [{"type": "text", "text": "5"}],
        "isError": False,
        "structuredContent": {"result": 5},
        "data": 5,
    }


def test_openenv_call_tool_spelling(ws: ClientConnection) -> None:
    reply = ask(ws, "step", {"type": "call_tool", "tool_name": "aecho", "arguments": {"message": "hi"}})
    assert reply["data"]["observation"]["result"]["data"] == {"message": "hi"}


def test_openenv_list_tools_spelling(ws: ClientConnection) -> None:
    reply = ask(ws, "step", {"type": "list_tools"})
    assert sorted(t["name"] for t in reply["data"]["observation"]["tools"]) == TOOLS


def test_unknown_tool_suggests_a_name(ws: ClientConnection) -> None:
    obs = tool_step(ws, "ecoh", message="x")
    assert obs["result"] is None
    assert obs["error"] == {
        "error_type": "tool_not_found",
        "message": f"Unknown tool 'ecoh'. Did you mean 'echo'? Available: {TOOLS}",
    }
    step_works(ws)


def test_invalid_tool_arguments(ws: ClientConnection) -> None:
    obs = tool_step(ws, "add", a="x")
    assert obs["error"] == {
        "error_type": "invalid_args",
        "message": "Invalid arguments for tool 'add': a: Input should be a valid integer, "
        "unable to parse string as an integer",
    }


def test_raising_tool_is_a_result_and_session_goes_on(ws: ClientConnection) -> None:
    obs = tool_step(ws, "explode", reason="bang")
    assert obs["error"] == {"error_type": "execution_error", "message": "Tool 'explode' failed: ValueError: bang"}
    assert tool_step(ws, "echo", message="after")["result"]["data"] == "after"


@pytest.mark.parametrize("tool", ["slow", "slow_sync"])
def test_slow_tool_times_out_and_session_goes_on(ws: ClientConnection, tool: str) -> None:
    started = time.monotonic()
    obs = tool_step(ws, tool)
    assert time.monotonic() - started < 1.5
    assert obs["error"] == {"error_type": "timeout", "message": f"Tool {tool!r} timed out after 0.2 s"}
    if tool == "slow_sync":  # its thread runs on: the session is busy until the call really ends
        assert ask(ws, "step", {"tool": "echo", "arguments": {"message": "x"}})["data"]["code"] == "SESSION_BUSY"
        assert wait_until(lambda: ask(ws, "step", {"tool": "echo", "arguments": {"message": "x"}})["type"] != "error")
    assert tool_step(ws, "echo", message="after")["result"]["data"] == "after"


def test_mcp_message_runs_in_this_session(ws: ClientConnection) -> None:
    call = {"name": "echo", "arguments": {"message": "m"}}
    reply = ask(ws, "mcp", {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call})
    assert reply == {
        "type": "mcp",
        "data": {"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "m"}], "isError": False}},
    }
    assert ask(ws, "state")["data"]["messages"] == ["m"]


def test_mcp_message_unknown_tool_is_jsonrpc_error(ws: ClientConnection) -> None:
    reply = ask(ws, "mcp", {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "ecoh"}})
    assert reply["data"]["error"] == {
        "code": -32602,
        "message": f"Unknown tool 'ecoh'. Did you mean 'echo'? Available: {TOOLS}",
        "data": {"code": "VALIDATION_ERROR"},
    }


def test_mcp_message_unknown_method(ws: ClientConnection) -> None:
    reply = ask(ws, "mcp", {"jsonrpc": "2.0", "id": 6, "method": "resources/list"})
    assert reply["data"]["error"] == {"code": -32601, "message": "Method not found: 'resources/list'"}


# --- orchestrator-only calls -------------------------------------------------------------


def test_orchestrator_call(ws: ClientConnection) -> None:
    tool_step(ws, "echo", message="seen")
    reply = ask(ws, "call", {"name": "secret", "arguments": {"salt": "s"}}, id=1)
    assert reply == {
        "type": "result",
        "data": {"name": "secret", "result": {"answer": 42, "salt": "s", "messages": ["seen"]}},
        "id": 1,
    }


def test_transcript_call_lists_tool_calls(ws: ClientConnection) -> None:
    tool_step(ws, "echo", message="one")
    tool_step(ws, "explode")
    transcript = ask(ws, "call", {"name": "transcript"})["data"]["result"]
    assert transcript == [
        {"tool": "echo", "arguments": {"message": "one"}, "output": "one", "error": None, "source": "step"},
        {
            "tool": "explode",
            "arguments": {},
            "output": None,
            "error": "Tool 'explode' failed: ValueError: boom",
            "source": "step",
        },
    ]


def test_unknown_orchestrator_call_suggests_a_name(ws: ClientConnection) -> None:
    assert error_of(ask(ws, "call", {"name": "secrte"})) == {
        "message": "Unknown orchestrator call 'secrte'. Did you mean 'secret'? Available: ['secret', 'transcript']",
        "code": "UNKNOWN_CALL",
    }


def test_orchestrator_call_with_bad_arguments(ws: ClientConnection) -> None:
    data = error_of(ask(ws, "call", {"name": "secret", "arguments": {"pepper": 1}}))
    assert data == {
        "message": "Bad arguments for 'secret': got an unexpected keyword argument 'pepper'",
        "code": "VALIDATION_ERROR",
    }
    step_works(ws)


def test_orchestrator_call_with_arguments_not_an_object(ws: ClientConnection) -> None:
    assert error_of(ask(ws, "call", {"name": "secret", "arguments": ["x"]})) == {
        "message": "Bad arguments for 'secret': arguments must be an object, got list",
        "code": "VALIDATION_ERROR",
    }


def test_call_without_name(ws: ClientConnection) -> None:
    assert error_of(ask(ws, "call", {})) == {
        "message": "call needs data.name (the orchestrator call)",
        "code": "VALIDATION_ERROR",
    }


# --- ending the session ---------------------------------------------------------------------


def test_close_message_closes_socket_and_env(base_url: str, recorder: Recorder) -> None:
    with connect(ws_url(base_url)) as conn:
        ask(conn, "reset", {"episode_id": "to-close"})
        conn.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed) as closed:
            conn.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    assert recorder.wait_closed_episode("to-close"), recorder.closed


def test_disconnect_calls_close(base_url: str, recorder: Recorder) -> None:
    conn = connect(ws_url(base_url))
    ask(conn, "reset", {"episode_id": "dropped"})
    conn.close()
    assert recorder.wait_closed_episode("dropped"), recorder.closed


# --- an environment made only of tools --------------------------------------------------------


def test_tool_only_environment_steps_with_tool_calls() -> None:
    with serve(create_app(ToolOnlyEnv)) as url, connect(ws_url(url)) as conn:
        ask(conn, "reset", {})
        assert tool_step(conn, "bump", by=2)["result"]["data"] == {"counter": 2}
        assert ask(conn, "state")["data"]["step_count"] == 1
        finished = ask(conn, "step", {"tool": "finish", "arguments": {}})["data"]
        assert finished["done"] is True
        assert finished["reward"] is None
        assert error_of(ask(conn, "step", {"by": 1})) == {
            "message": "ToolOnlyEnv takes tool calls: send {'tool': name, 'arguments': {...}}; "
            "tools: ['bump', 'finish']",
            "code": "VALIDATION_ERROR",
        }
