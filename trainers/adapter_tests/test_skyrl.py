"""The SkyRL adapter through skyrl-gym's own registry (`skyrl_gym.register` / `skyrl_gym.make`),
driven as SkyRL's generator drives an env (`SkyRLGymGenerator.agent_loop`: make, `init(prompt)`,
`step(text)` until done, `get_metrics()`, `close()`), with the scripted model answering in text
over HTTP. The generator itself needs `skyrl[skyrl-train]` (torch, ray, vLLM, transformers<=5.8),
which does not install beside this stack on CPU."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import skyrl_gym
from openenv_trainers.adapters.skyrl import (
    OpenEnvSkyRLEnv,
    close_sources,
    parse_tool_calls,
    register_openenv,
    tools_system_prompt,
)

from openenv_sdk.errors import OpenEnvError

from .conftest import ECHO_GRADER, WORDLE_DIR, echo_grade, health, serve
from .scripted_chat import echo_prompt, said_for, tool_call_text

ENV_ID = "openenv-test"


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    register_openenv(ENV_ID)
    yield
    skyrl_gym.envs.registration.registry.pop(ENV_ID, None)
    close_sources()


def agent_loop(
    model_url: str, env_config: dict[str, Any], extras: dict[str, Any], prompt: list[dict[str, Any]]
) -> tuple[float, list[dict[str, Any]], dict[str, Any], OpenEnvSkyRLEnv]:
    """One trajectory, calling the env as `SkyRLGymGenerator.agent_loop` does; returns the
    final reward, the chat history, the env's metrics, and the env."""
    env = skyrl_gym.make(ENV_ID, env_config=env_config, extras={**extras, "max_turns": 4})
    chat, _ = env.init(json.loads(json.dumps(prompt)))
    reward, done = 0.0, False
    while not done:
        body = {"model": "scripted", "messages": chat}
        reply = httpx.post(f"{model_url}/chat/completions", json=body, timeout=30).json()
        text = reply["choices"][0]["message"]["content"]
        out = env.step(text)
        chat = [*chat, {"role": "assistant", "content": text}, *out["observations"]]
        reward, done = out["reward"], out["done"]
    metrics = env.get_metrics()
    env.close()
    return reward, chat, metrics, env


def test_episodes_through_skyrl_gym_are_graded_by_the_grader_and_close_their_sessions(
    scripted: Any, echo_url: str
) -> None:
    _, model_url = scripted
    config = {"base_url": echo_url, "grader": ECHO_GRADER}
    for text in ("apple river", "typo stone"):
        prompt = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": echo_prompt(text)}]
        reward, chat, metrics, env = agent_loop(model_url, config, {"reset": {"text": text}}, prompt)
        assert isinstance(env, OpenEnvSkyRLEnv)
        assert reward == pytest.approx(echo_grade(echo_url, text, said_for(text)))
        assert env.score is not None and env.score.value == reward
        assert metrics["tool_calls"] == 1 and metrics["tool_errors"] == 0 and metrics["openenv/called"] == 1.0
        # The tools in the prompt are the server's, in the Hermes format; the call ran in the episode.
        schema = httpx.get(f"{echo_url}/schema", timeout=10).json()
        assert chat[0]["content"].startswith("You are a helpful assistant.\n\n# Tools")
        listed = json.loads(chat[0]["content"].split("<tools>\n")[1].split("\n</tools>")[0])
        assert listed["function"]["name"] == "echo"
        assert listed["function"]["parameters"] == schema["tools"][0]["input_schema"]
        assert chat[3] == {"role": "tool", "content": said_for(text)}
    assert health(echo_url)["active_sessions"] == 0


def test_an_environment_folder_is_served_once_per_process_and_its_grader_is_the_folders(scripted: Any) -> None:
    _, model_url = scripted
    config = {"env_dir": str(WORDLE_DIR)}
    one = skyrl_gym.make(ENV_ID, env_config=config, extras={"reset": {"task_id": 3}})
    two = skyrl_gym.make(ENV_ID, env_config=config, extras={"reset": {"task_id": 4}})
    assert one.source is two.source and one.grader is two.grader
    assert type(one.grader).__name__ == "WordleGrader"
    chat, info = one.init([])  # no user message: the reset observation is the prompt
    assert [t["function"]["name"] for t in info["tools"]] == ["guess"]
    assert chat[-1]["role"] == "user" and "5-letter word" in chat[-1]["content"]
    out = one.step("I give up.")  # no tool call: the episode ends, graded
    assert out["done"] and out["reward"] == one.score.value
    with pytest.raises(RuntimeError, match="after the episode ended"):
        one.step("again")
    two.close()


def test_malformed_calls_are_the_policys_to_see_and_a_failed_reset_is_typed(echo_url: str) -> None:
    env = skyrl_gym.make(ENV_ID, env_config={"base_url": echo_url, "grader": ECHO_GRADER}, extras={"reset": {"text": "hi"}})
    env.init([{"role": "user", "content": echo_prompt("hi")}])
    bad = "<tool_call>\nnot json\n</tool_call>" + tool_call_text("nope", {}) + tool_call_text("echo", {"message": 3})
    out = env.step(bad)
    assert not out["done"] and out["reward"] == 0.0
    texts = [o["content"] for o in out["observations"]]
    assert texts[0].startswith("error: the tool call does not parse")
    assert texts[1].startswith("error: ") and "nope" in texts[1]
    assert "Invalid arguments for tool 'echo'" in texts[2]  # the server's own refusal, as the tool's result
    assert env.get_metrics()["tool_errors"] == 3
    env.close()
    assert health(echo_url)["active_sessions"] == 0

    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    with serve(create_app(load_environment(WORDLE_DIR).env_cls, config=ServerConfig())) as url:
        env = skyrl_gym.make(ENV_ID, env_config={"base_url": url, "grader": ECHO_GRADER}, extras={"reset": {"task_id": 99999}})
        with pytest.raises(OpenEnvError, match=r"task_id must be in \[0, 1200\)"):
            env.init([])
        assert env.session is None
        assert health(url)["active_sessions"] == 0

    with pytest.raises(ValueError, match="exactly one of"):
        OpenEnvSkyRLEnv({}, {})
    with pytest.raises(ValueError, match="is not an environment folder"):
        OpenEnvSkyRLEnv({"base_url": echo_url}, {})


def test_tool_calls_parse_as_hermes_models_write_them() -> None:
    text = "thinking...\n" + tool_call_text("echo", {"message": "a"}) + '<tool_call>{"name": "echo", "arguments": "{\\"message\\": \\"b\\"}"}</tool_call>'
    assert parse_tool_calls(text) == [("echo", {"message": "a"}), ("echo", {"message": "b"})]
    assert parse_tool_calls("no calls") == []
    assert parse_tool_calls("<tool_call>[1]</tool_call>") == [("", "[1]")]
    assert "<tools>\n{" in tools_system_prompt([{"type": "function", "function": {"name": "x"}}])
