"""`GenericEnvClient` / `AsyncGenericEnvClient`: dict actions checked against the server's `/schema`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from openenv_reference import OPENENV_PYTHON, require

from openenv_sdk.client import AsyncGenericEnvClient, GenericEnvClient, StepResult
from openenv_sdk.errors import InvalidActionError, ServerError
from openenv_sdk.providers.base import Provider
from openenv_sdk.providers.health import wait_for_health

ROOT = Path(__file__).resolve().parents[2]


def test_dict_actions_and_observations(echo_server: str) -> None:
    with GenericEnvClient(echo_server) as env:
        first = env.reset(seed=4)
        assert isinstance(first, StepResult)
        assert first.observation == {"metadata": {}, "echoed_message": "Echo environment ready!", "message_length": 0}
        result = env.step({"message": "abc"})
        assert result.observation["echoed_message"] == "abc"
        assert result.reward == pytest.approx(0.3)
        assert env.state() == {"episode_id": "echo-4", "step_count": 1, "messages": ["abc"]}
        assert env.trajectory.actions == [{"message": "abc"}]
        schema = env.schema()
        assert schema.action["title"] == "EchoAction"
        assert [t.name for t in schema.tools] == ["echo"]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({}, "action.message: 'message' is a required property"),
        ({"message": 3}, "action.message: 3 is not of type 'string'"),
        (
            {"messag": "x"},
            "action.messag: unexpected field 'messag'. Did you mean 'message'? Allowed: ['message', 'metadata']; "
            "action.message: 'message' is a required property",
        ),
        ({"message": "x", "metadata": []}, "action.metadata: [] is not of type 'object'"),
    ],
)
def test_a_bad_action_names_the_field(echo_server: str, action: dict[str, Any], message: str) -> None:
    with GenericEnvClient(echo_server) as env:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.step(action)
        assert caught.value.args[0] == message
        assert caught.value.code == "VALIDATION_ERROR"
        assert caught.value.details["checked"] == "action"
        assert env.state()["step_count"] == 0  # refused before sending


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ({"tool": "echo", "arguments": []}, "action.arguments: arguments must be an object"),
        ({"tool": 3, "arguments": {}}, "action.tool: the tool's name must be a string"),
    ],
)
def test_a_malformed_tool_call_is_refused_before_sending(echo_server: str, action: dict[str, Any], message: str) -> None:
    with GenericEnvClient(echo_server) as env:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.step(action)
        assert caught.value.args[0] == message


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (
            {"tool": "ecko", "arguments": {}},
            {"error_type": "tool_not_found", "message": "Unknown tool 'ecko'. Did you mean 'echo'? Available: ['echo']"},
        ),
        (
            {"type": "call_tool", "tool_name": "echo", "arguments": {"message": 1}},
            {"error_type": "invalid_args", "message": "Invalid arguments for tool 'echo': message: Input should be a valid string"},
        ),
    ],
)
def test_a_tool_call_the_agent_got_wrong_is_the_observations_error(
    echo_server: str, action: dict[str, Any], error: dict[str, str]
) -> None:
    """The server's typed failure, as over MCP (tests/test_error_transports.py): not raised."""
    with GenericEnvClient(echo_server) as env:
        env.reset()
        observation = env.step(action).observation
        assert (observation["result"], observation["error"]) == (None, error)


def test_good_tool_calls_go_through(echo_server: str) -> None:
    with GenericEnvClient(echo_server) as env:
        env.reset()
        called = env.step({"tool": "echo", "arguments": {"message": "hi"}})
        assert called.observation["result"]["data"] == "hi"
        spelled = env.step({"type": "call_tool", "tool_name": "echo", "arguments": {"message": "yo"}})
        assert spelled.observation["tool_name"] == "echo"
        listed = env.step({"type": "list_tools"})
        assert [t["name"] for t in listed.observation["tools"]] == ["echo"]


def test_without_validation_the_server_still_refuses(echo_server: str) -> None:
    with GenericEnvClient(echo_server, validate_actions=False) as env:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.step({"messag": "x"})
        assert caught.value.args[0].startswith("Invalid action for EchoEnvironment: message: Field required")
        assert [e["loc"] for e in caught.value.details["errors"]] == [["message"], ["messag"]]


def test_generic_clients_take_no_env_cls(echo_server: str, echo_module: Any) -> None:
    with pytest.raises(TypeError, match="GenericEnvClient takes dicts and needs no env_cls"):
        GenericEnvClient(echo_server, env_cls=echo_module.EchoEnvironment)


@pytest.mark.anyio
async def test_the_async_generic_client(echo_server: str) -> None:
    async with AsyncGenericEnvClient(echo_server) as env:
        await env.reset()
        with pytest.raises(InvalidActionError, match="action.message: 'message' is a required property"):
            await env.step({})
        assert (await env.step({"message": "a"})).observation["echoed_message"] == "a"
        assert (await env.state())["messages"] == ["a"]


class ScriptProvider(Provider):
    """Runs a server script (`SCRIPT --port P`) as a process group; the `provider=` contract."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [*self.argv, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        assert wait_for_health(url, timeout_s=60, is_alive=self.is_alive) == "healthy"
        return url

    def stop(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            self.process = None

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def test_against_openenv_own_server() -> None:
    require(OPENENV_PYTHON)
    provider = ScriptProvider([str(OPENENV_PYTHON), str(ROOT / "tests/conformance/openenv_reference_server.py")])
    with GenericEnvClient(provider=provider) as env:
        assert env.reset(seed=5).observation["echoed_message"] == "Echo environment ready!"
        assert env.step({"message": "hi"}).reward == pytest.approx(0.2)
        assert env.state()["episode_id"] == "echo-5"
        with pytest.raises(InvalidActionError, match="action.message: 'message' is a required property"):
            env.step({})
        with pytest.raises(ServerError) as caught:
            env.session()  # OpenEnv has no session message (and no MCP binding)
        assert caught.value.code == "UNKNOWN_TYPE"
        assert env.step({"message": "again"}).observation["message_length"] == 5
        assert provider.is_alive()
    assert not provider.is_alive()
