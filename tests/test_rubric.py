"""Host-side rubrics, over real episodes on a real echo server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from openenv_sdk.client import AsyncGenericEnvClient, GenericEnvClient
from openenv_sdk.rubric import (
    EnvReward,
    FunctionRubric,
    Gate,
    Grader,
    Score,
    Sequence,
    WeightedSum,
    agrade,
    grade,
    reward,
)


@pytest.fixture
def played(echo_server: str) -> Iterator[GenericEnvClient]:
    """An echo episode: two plain steps (own rewards 0.5 and 0.2) and one tool call."""
    with GenericEnvClient(echo_server) as env:
        env.reset(seed=1, topic="greetings")
        env.step({"message": "hello"})
        env.step({"message": "hi"})
        env.step({"tool": "echo", "arguments": {"message": "tool"}})
        yield env


def constant(value: float, name: str) -> FunctionRubric:
    return FunctionRubric(lambda: value, name=name)


class EchoGrader(Grader):
    @reward(weight=1.0)
    def said_hello(self, state: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        return "hello" in state["messages"], {"messages": state["messages"]}

    @reward(weight=0.5, name="brevity")
    def short(self, actions: list[Any]) -> float:
        return 1.0 if len(actions) <= 4 else 0.0


def test_grader_sums_tagged_rewards_with_weights_and_keeps_evidence(played: GenericEnvClient) -> None:
    score = grade(EchoGrader(), played)
    assert score.value == pytest.approx(1.5)
    assert score.components == {"said_hello": 1.0, "brevity": 1.0}
    assert score.evidence == {"said_hello": {"messages": ["hello", "hi", "tool"]}}


def test_parameters_are_filled_by_name_from_the_episode(played: GenericEnvClient) -> None:
    seen: dict[str, Any] = {}

    def look(task: dict[str, Any], rewards: list[Any], transcript: list[dict[str, Any]], env: Any) -> float:
        seen.update(task=task, rewards=rewards, transcript=transcript, env=env)
        return 0.0

    grade(look, played)
    assert seen["task"] == {"seed": 1, "topic": "greetings"}
    assert seen["rewards"] == [pytest.approx(0.5), pytest.approx(0.2), None]
    assert [call["tool"] for call in seen["transcript"]] == ["echo"]
    assert seen["env"] is played


def test_env_reward_passes_the_environments_own_reward_through(played: GenericEnvClient) -> None:
    assert grade(EnvReward(), played).value == pytest.approx(0.7)
    assert grade(EnvReward(reduce="last"), played).value == pytest.approx(0.2)


def test_weighted_sum_gate_and_sequence_compose(played: GenericEnvClient) -> None:
    total = WeightedSum({"a": (constant(1.0, "a"), 2.0), "b": (constant(0.5, "b"), -1.0)})
    assert grade(total, played).value == pytest.approx(1.5)

    passed = Gate(constant(1.0, "tests"), constant(0.25, "style"))
    assert grade(passed, played).model_dump() == {
        "value": 0.25,
        "components": {"tests": 1.0, "style": 0.25},
        "evidence": {"gate": {}, "then": {}},
    }
    blocked = Gate(constant(0.5, "tests"), constant(1.0, "style"), otherwise=-1.0)
    assert grade(blocked, played).value == -1.0

    stages = Sequence([constant(1.0, "builds"), constant(0.0, "unit"), constant(1.0, "integration")])
    score = grade(stages, played)
    assert score.value == pytest.approx(1 / 3)
    assert score.components == {"builds": 1.0, "unit": 0.0}  # grading stopped at the first failure


def test_bad_reward_functions_fail_with_messages_that_say_why(played: GenericEnvClient) -> None:
    with pytest.raises(TypeError, match="reward functions take parameters named episode, task"):
        grade(lambda answer: 1.0, played)
    with pytest.raises(TypeError, match=r"reward 'nan' returned nan: return a finite number"):
        grade(FunctionRubric(lambda: float("nan"), name="nan"), played)
    with pytest.raises(TypeError, match="has no @reward methods"):
        grade(Grader(), played)


@pytest.mark.anyio
async def test_async_grading_with_an_async_client(echo_server: str) -> None:
    async with AsyncGenericEnvClient(echo_server) as env:
        await env.reset()
        await env.step({"message": "hello"})

        async def said(state: dict[str, Any]) -> float:
            return float("hello" in state["messages"])

        assert (await agrade(said, env)) == Score(value=1.0)


@pytest.mark.anyio
async def test_sync_grade_works_inside_a_running_event_loop(played: GenericEnvClient) -> None:
    # As in a notebook: grade() is called from code running on an event loop.
    assert asyncio.get_running_loop() is not None
    assert grade(EchoGrader(), played).value == pytest.approx(1.5)
