"""The shipped agent specs render and are refused clearly where an environment cannot host them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from openenv_sdk.agents import AgentHost, AgentLaunch, known, render_agent_command
from openenv_sdk.sandbox import CommandResult


def test_anthropic_agents_get_the_base_url_without_v1() -> None:
    launch = AgentLaunch(spec=known.CLAUDE_CODE, base_url="http://127.0.0.1:9/rollout/abc/v1", api_key=SecretStr("k"))
    _, _, env, _ = render_agent_command(launch, workdir="/w", task_file="/t", python="python3")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/rollout/abc" and env["ANTHROPIC_API_KEY"] == "k"
    assert "OPENAI_BASE_URL" not in env
    launch = AgentLaunch(spec=known.PI_ANTHROPIC, base_url="http://127.0.0.1:9/rollout/abc/v1", api_key=SecretStr("sk-secret-123"))
    _, _, _, config = render_agent_command(launch, workdir="/w", task_file="/t", python="python3")
    assert config is not None and '"baseUrl": "http://127.0.0.1:9/rollout/abc"' in config and '"apiKey": "OPENAI_API_KEY"' in config
    assert "sk-secret-123" not in config  # the key itself never goes in a file


class _OldHost(AgentHost):
    """An environment written before `memory_bytes` existed."""

    def agent_exec(self, command: str, *, env: dict[str, str], timeout_s: float, stdin: str | None = None) -> CommandResult:
        return CommandResult(exit_code=0, stdout="", stderr="", duration_s=0.0)

    def agent_home(self) -> str:
        return "/tmp/home"

    def agent_instruction(self) -> str:
        return "task"


def test_a_node_agent_in_an_environment_that_cannot_raise_its_address_space_is_refused_clearly() -> None:
    launch: Any = AgentLaunch(spec=known.PI, base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"))
    with pytest.raises(ValueError, match="memory_bytes"):
        _OldHost().run_agent(launch.to_wire())
    plain = launch.model_copy(update={"spec": known.PI.model_copy(update={"memory_bytes": None, "install": None})})
    assert _OldHost().run_agent(plain.to_wire())["exit_code"] == 0  # without it, the old signature still works
