"""`GymEnv` over a real echo server: Gymnasium's own checker, and the step semantics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import ModuleType

import pytest
from gymnasium.utils.env_checker import check_env

from openenv_sdk.client import EnvClient, GenericEnvClient
from openenv_sdk.errors import InvalidActionError
from openenv_sdk.gym import GymEnv, JsonText


@pytest.fixture
def gym_env(echo_server: str) -> Iterator[GymEnv]:
    env = GymEnv(GenericEnvClient(echo_server))
    yield env
    env.close()


def test_check_env_passes_over_a_generic_client(gym_env: GymEnv) -> None:
    check_env(gym_env, skip_render_check=True)


def test_check_env_passes_over_a_typed_client(echo_server: str, echo_module: ModuleType) -> None:
    env = GymEnv(EnvClient(echo_server, env_cls=echo_module.EchoEnvironment))
    check_env(env, skip_render_check=True)
    env.close()
    assert env.client.is_closed


def test_reset_and_step(gym_env: GymEnv) -> None:
    obs, info = gym_env.reset(seed=5, options={"task_id": "t1"})
    assert json.loads(obs) == {"echoed_message": "Echo environment ready!", "message_length": 0, "metadata": {}}
    assert info == {"metadata": {}, "reward": None}
    assert gym_env.client.trajectory.task == {"task_id": "t1", "seed": 5}
    assert obs in gym_env.observation_space

    obs, reward, terminated, truncated, info = gym_env.step('{"message": "hello"}')
    assert json.loads(obs)["echoed_message"] == "hello"
    assert reward == pytest.approx(0.5)
    assert (terminated, truncated) == (False, False)
    assert info["reward"] == pytest.approx(0.5)

    obs, reward, *_ = gym_env.step({"tool": "echo", "arguments": {"message": "tool"}})
    assert json.loads(obs)["result"]["data"] == "tool"
    assert reward == 0.0  # a tool call has no reward: None counts as 0.0


def test_an_invalid_action_is_observed_not_raised(gym_env: GymEnv) -> None:
    before, _ = gym_env.reset()
    for action, error in [
        ("not json", "The action is not JSON: Expecting value: line 1 column 1 (char 0)"),
        ("[1]", "An action is a JSON object, got list"),
        ('{"messag": "x"}', "action.messag: unexpected field 'messag'. Did you mean 'message'?"),
    ]:
        obs, reward, terminated, truncated, info = gym_env.step(action)
        assert (obs, reward, terminated, truncated) == (before, 0.0, False, False)
        assert info["error"].startswith(error)
    assert gym_env.client.state()["step_count"] == 0


def test_invalid_action_raise(echo_server: str) -> None:
    env = GymEnv(GenericEnvClient(echo_server), invalid_action="raise", invalid_action_reward=-1.0)
    env.reset()
    with pytest.raises(InvalidActionError, match="action.message: 'message' is a required property"):
        env.step("{}")
    with pytest.raises(InvalidActionError, match="The action is not JSON"):
        env.step("{")
    env.close()


def test_the_action_space_samples_valid_actions(gym_env: GymEnv) -> None:
    gym_env.action_space.seed(0)
    gym_env.reset()
    for _ in range(10):
        action = gym_env.action_space.sample()
        assert action in gym_env.action_space
        assert set(json.loads(action)) == {"message"}
        _, _, _, _, info = gym_env.step(action)
        assert "error" not in info
    assert gym_env.client.state()["step_count"] == 10


def test_json_text_space() -> None:
    space = JsonText(16)
    assert '{"a": 1}' in space
    assert "{" not in space  # not JSON
    assert '"' + "x" * 20 + '"' not in space  # too long
    assert '"\u00e9"' not in space  # not ASCII: the observations are dumped with ensure_ascii
    assert isinstance(space.sample(), str)


def test_a_tool_only_schema_samples_tool_calls() -> None:
    from openenv_sdk.types import ToolSchema

    tool = ToolSchema(
        name="bump",
        input_schema={
            "type": "object",
            "properties": {"by": {"type": "integer", "minimum": 1, "maximum": 3}},
            "required": ["by"],
        },
    )
    space = JsonText(schema={"type": "object", "properties": {"metadata": {"type": "object"}}}, tools=[tool], seed=1)
    for _ in range(5):
        action = json.loads(space.sample())
        assert action["tool"] == "bump"
        assert 1 <= action["arguments"]["by"] <= 3
