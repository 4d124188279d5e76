"""The ART adapter through ART's own gathering (`art.gather_trajectory_groups` over
`art.TrajectoryGroup`s of our rollouts), with an `art.Model` whose inference endpoint is the
scripted model over HTTP. ART's training backends (`LocalBackend`: unsloth and vLLM on a GPU,
or its serverless service) do not run here; what they consume is the trajectory groups."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import art
import httpx
import pytest
from openai.types.chat.chat_completion import Choice
from openenv_trainers.adapters.art import OpenEnvRollout
from openenv_trainers.sources import EnvSource

from openenv_sdk import ServerConfig, create_app
from openenv_sdk.errors import OpenEnvError
from openenv_sdk.loader import load_environment

from .conftest import ECHO_GRADER, WORDLE_DIR, echo_grade, health, serve
from .scripted_chat import echo_prompt, said_for

TEXTS = ["apple river", "typo stone"]
T = TypeVar("T")


def play(url: str, tmp_path: Path, rollouts: Callable[[art.Model], Awaitable[T]]) -> T:
    """Run `rollouts(model)` in a fresh event loop with an `art.Model` served by the model at
    `url`, closing the model's OpenAI client (ART's own, cached on the model) after."""
    model = art.Model(
        name="scripted", project="openenv-test", inference_base_url=url, inference_api_key="unused", base_path=str(tmp_path / ".art")
    )

    async def run() -> T:
        try:
            return await rollouts(model)
        finally:
            await model.openai_client().close()

    return asyncio.run(run())


def test_gathered_groups_are_trajectories_graded_by_the_grader(scripted: Any, echo_url: str, tmp_path: Path) -> None:
    chat, model_url = scripted
    rollout = OpenEnvRollout(EnvSource(echo_url), grader=ECHO_GRADER, system_prompt="You are a helpful assistant.")
    tasks = [{"reset": {"text": t}, "prompt": echo_prompt(t)} for t in TEXTS]

    async def gather(model: art.Model) -> list[art.TrajectoryGroup]:
        return await art.gather_trajectory_groups(
            (art.TrajectoryGroup(rollout(model, task) for _ in range(2)) for task in tasks), pbar_desc=None
        )

    groups = play(model_url, tmp_path, gather)
    assert len(groups) == 2
    schema = httpx.get(f"{echo_url}/schema", timeout=10).json()
    for group, text in zip(groups, TEXTS, strict=True):
        assert len(group.trajectories) == 2 and not group.exceptions
        for trajectory in group.trajectories:
            assert trajectory.reward == pytest.approx(echo_grade(echo_url, text, said_for(text)))
            assert trajectory.metrics["tool_calls"] == 1 and trajectory.metrics["openenv/called"] == 1.0
            assert trajectory.tools == [
                {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
                for t in schema["tools"]
            ]
            # The model's turns are `Choice`s (what ART trains on); the tool ran in the episode.
            choices = [m for m in trajectory.messages_and_choices if isinstance(m, Choice)]
            assert len(choices) == 2 and choices[0].message.tool_calls[0].function.name == "echo"
            roles = [m["role"] for m in trajectory.messages()]
            assert roles == ["system", "user", "assistant", "tool", "assistant"]
            assert trajectory.messages()[3]["content"] == said_for(text)
    assert groups[0].trajectories[0].reward == 1.0 and groups[1].trajectories[0].reward < 1.0
    assert all(r["logprobs"] is True and r["tools"][0]["function"]["name"] == "echo" for r in chat.requests)
    assert health(echo_url)["active_sessions"] == 0


def test_a_failed_reset_is_the_rollouts_exception_and_its_session_is_closed(scripted: Any, tmp_path: Path) -> None:
    _, model_url = scripted
    with serve(create_app(load_environment(WORDLE_DIR).env_cls, config=ServerConfig())) as url:
        # The grader defaults to the folder's; a bare URL has none, so it is named here.
        rollout = OpenEnvRollout(EnvSource(url), grader=ECHO_GRADER)

        async def gather(model: art.Model) -> list[art.TrajectoryGroup]:
            group = art.TrajectoryGroup([rollout(model, {"reset": {"task_id": 99999}})])
            return await art.gather_trajectory_groups([group], pbar_desc=None, max_exceptions=1)

        (group,) = play(model_url, tmp_path, gather)
        assert group.trajectories == []
        (error,) = group.exceptions
        assert "task_id must be in [0, 1200)" in error.message and "openenv_sdk.errors.EpisodeFailed" in error.type
        assert error.message.startswith("reset failure at reset: ")  # the cause first: never a reward
        with pytest.raises(OpenEnvError, match="task_id must be in"):
            play(model_url, tmp_path, lambda model: rollout(model, {"reset": {"task_id": -1}}))
        assert health(url)["active_sessions"] == 0

    folder = OpenEnvRollout(EnvSource(env_dir=WORDLE_DIR))
    assert type(folder.grader).__name__ == "WordleGrader"
    with pytest.raises(ValueError, match="is not an environment folder"):
        OpenEnvRollout(EnvSource("http://127.0.0.1:9"))
    with pytest.raises(ValueError, match="max_turns"):
        OpenEnvRollout(EnvSource(env_dir=WORDLE_DIR), max_turns=0)


def test_the_tiny_model_plays_and_its_rewards_are_the_graders(tiny_chat: Any, echo_url: str, tmp_path: Path) -> None:
    """Our tiny tool-calling model answering (sampled): each reward is the grader's for the call it made."""
    chat, model_url = tiny_chat
    rollout = OpenEnvRollout(EnvSource(echo_url), grader=ECHO_GRADER, system_prompt="You are a helpful assistant.", max_turns=2)
    text = "apple river"

    async def gather(model: art.Model) -> list[art.TrajectoryGroup]:
        task = {"reset": {"text": text}, "prompt": echo_prompt(text)}
        return await art.gather_trajectory_groups([art.TrajectoryGroup(rollout(model, task) for _ in range(2))], pbar_desc=None)

    (group,) = play(model_url, tmp_path, gather)
    assert len(group.trajectories) == 2
    for trajectory in group.trajectories:
        first = next(m for m in trajectory.messages_and_choices if isinstance(m, Choice))
        calls = [c for c in first.message.tool_calls or [] if c.function.name == "echo"]
        said = json.loads(calls[0].function.arguments).get("message") if calls else None
        assert trajectory.reward == pytest.approx(echo_grade(echo_url, text, said if isinstance(said, str) else None))
    assert any(r.get("tool_calls") for r in chat.replies)
    assert health(echo_url)["active_sessions"] == 0
