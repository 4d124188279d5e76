"""`ToolOutcome`: a tool call's result and typed failure, from the session to `step` and MCP.

Driven through a real app (the session the server created), and pinned on the wire: a failure
reaches `step` as a `ToolError` and MCP as an `isError` result, and nothing internal leaks.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.envs import ProbeEnv, probe_factory
from starlette.testclient import TestClient

from openenv_sdk import ToolError, ToolErrorType, create_app
from openenv_sdk.server._outcome import ToolOutcome
from openenv_sdk.server._session import Session

HEADER = "X-OpenEnv-Session"


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(ProbeEnv, factory=probe_factory())) as c:
        yield c


def open_session(client: TestClient) -> tuple[dict[str, str], str, Session]:
    info = client.post("/sessions").json()
    headers = {HEADER: info["session_id"]}
    assert client.post("/reset", json={}, headers=headers).status_code == 200
    return headers, info["mcp_token"], client.app.state.openenv.sessions.get(info["session_id"])  # type: ignore[attr-defined]


def call_tool(client: TestClient, session: Session, name: str, arguments: dict[str, Any], source: str) -> Any:
    assert client.portal is not None
    verb = {"mcp": session.mcp_tool_call, "step": session.step_tool_call}[source]
    return client.portal.call(functools.partial(verb, name, arguments))


def test_a_failing_tool_is_an_outcome_with_a_typed_error(client: TestClient) -> None:
    _, _, session = open_session(client)
    outcome = call_tool(client, session, "explode", {"reason": "bang"}, "mcp")
    assert isinstance(outcome, ToolOutcome)
    message = "Tool 'explode' failed: ValueError: bang"
    assert outcome.error == ToolError(error_type=ToolErrorType.EXECUTION_ERROR, message=message)
    assert outcome.result == {"content": [{"type": "text", "text": message}], "isError": True}
    assert outcome.outcome == "execution_error"
    assert outcome.step_result() is None
    assert outcome.mcp_result() == outcome.result


def test_a_tool_that_works_is_an_outcome_without_error(client: TestClient) -> None:
    _, _, session = open_session(client)
    outcome = call_tool(client, session, "add", {"a": 2, "b": 3}, "mcp")
    assert isinstance(outcome, ToolOutcome)
    assert outcome.error is None and outcome.outcome == "ok"
    assert outcome.step_result() == {
        "content": [{"type": "text", "text": "5"}], "isError": False, "structuredContent": {"result": 5}, "data": 5,
    }  # fmt: skip
    assert outcome.mcp_result() == {
        "content": [{"type": "text", "text": "5"}], "isError": False, "structuredContent": {"result": 5},
    }  # fmt: skip


def test_an_unknown_tool_through_step_is_tool_not_found(client: TestClient) -> None:
    _, _, session = open_session(client)
    outcome = call_tool(client, session, "ecoh", {}, "step")
    assert isinstance(outcome, ToolOutcome)
    assert outcome.error is not None and outcome.error.error_type is ToolErrorType.TOOL_NOT_FOUND
    assert outcome.step_result() is None


def test_a_failure_on_the_wire_carries_no_internal_field(client: TestClient) -> None:
    headers, token, _ = open_session(client)
    message = "Tool 'explode' failed: ValueError: bang"
    step = client.post("/step", json={"action": {"tool": "explode", "arguments": {"reason": "bang"}}}, headers=headers)
    assert step.json() == {
        "observation": {
            "metadata": {},
            "tool_name": "explode",
            "result": None,
            "error": {"error_type": "execution_error", "message": message},
        },
        "reward": None,
        "done": False,
    }
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "explode", "arguments": {"reason": "bang"}}}
    mcp = client.post("/mcp", json=call, headers={"X-OpenEnv-MCP-Token": token})
    assert mcp.content == json.dumps(
        {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": message}], "isError": True}}
    ).encode()
    transcript = client.post("/call/transcript", headers=headers).json()["result"]
    assert transcript == [
        {"tool": "explode", "arguments": {"reason": "bang"}, "output": None, "error": message, "source": "step"},
        {"tool": "explode", "arguments": {"reason": "bang"}, "output": None, "error": message, "source": "mcp"},
    ]
    for body in (step.content, mcp.content):
        assert b'"_error"' not in body
