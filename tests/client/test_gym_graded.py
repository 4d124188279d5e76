"""`GymEnv` over a host-graded environment (Wordle, served on a real port or from its folder):
the last step of an episode gives the host grader's reward, the others the environment's own,
and Gymnasium's `check_env` still passes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env

from openenv_sdk import create_app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.gym import GymEnv
from openenv_sdk.loader import load_environment
from openenv_sdk.testing import serve_app
from tests.evaluation.policy_server import WORDLE_DIR, answer, miss

WIN = 1.7  # WordleGrader: solved (1.0) + 0.5 x speed (1.0 for one guess) + 0.2 x greens (1.0)
TASK = "1001"


@pytest.fixture(scope="module")
def wordle_url() -> Iterator[str]:
    with serve_app(create_app(load_environment(WORDLE_DIR).env_cls)) as url:
        yield url


def _guess(env: GymEnv, word: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    return env.step(json.dumps({"guess": word}))


def test_the_last_step_gives_the_host_graders_reward(wordle_url: str) -> None:
    env = GymEnv(GenericEnvClient(wordle_url), grader=WORDLE_DIR)
    try:
        env.reset(options={"task_id": int(TASK)})
        obs, reward, terminated, truncated, info = _guess(env, answer(TASK))
        assert (terminated, truncated) == (True, False)
        assert reward == pytest.approx(WIN)
        assert info["score"].value == pytest.approx(WIN) and info["score"].components
        assert info["env_reward"] == 0.0  # the server sends none: before, this was the episode's reward

        env.reset(options={"task_id": int(TASK)})
        rewards = []
        for _ in range(6):
            _, reward, terminated, truncated, info = _guess(env, miss(TASK))
            rewards.append(reward)
            if terminated:
                break
        assert terminated and rewards == [0.0] * 6 and info["score"].value == 0.0
    finally:
        env.close()


def test_without_a_grader_a_url_client_gets_the_environments_rewards_only(wordle_url: str) -> None:
    env = GymEnv(GenericEnvClient(wordle_url))
    try:
        assert env.grader is None
        env.reset(options={"task_id": int(TASK)})
        _, reward, terminated, _, info = _guess(env, answer(TASK))
        assert terminated and reward == 0.0 and "score" not in info
        with pytest.raises(ValueError, match="no grader"):
            env.grade()
    finally:
        env.close()


def test_a_served_folder_brings_its_grader(tmp_path: Any) -> None:
    env = GymEnv(GenericEnvClient(env_dir=WORDLE_DIR))
    try:
        assert env.grader is not None  # openenv.yaml's grader: grader:WordleGrader
        env.reset(options={"task_id": int(TASK)})
        _, reward, terminated, _, _ = _guess(env, answer(TASK))
        assert terminated and reward == pytest.approx(WIN)
    finally:
        env.close()


def test_max_steps_truncates_and_grades(wordle_url: str) -> None:
    env = GymEnv(GenericEnvClient(wordle_url), grader=WORDLE_DIR, max_steps=2)
    try:
        env.reset(options={"task_id": int(TASK)})
        assert _guess(env, miss(TASK))[2:4] == (False, False)
        _, reward, terminated, truncated, info = _guess(env, answer(TASK))
        assert (terminated, truncated) == (True, False)  # solved on the last allowed step: terminated
        assert reward == pytest.approx(info["score"].value) and 1.0 < reward < WIN  # slower: less speed bonus
        env.reset(options={"task_id": int(TASK)})
        _guess(env, miss(TASK))
        _, reward, terminated, truncated, info = _guess(env, miss(TASK))
        assert (terminated, truncated, reward) == (False, True, 0.0) and "score" in info
    finally:
        env.close()


def test_per_step_rewards_then_the_grade(echo_server: str) -> None:
    def graded(transcript: list[dict[str, Any]]) -> float:
        return 0.25 * len(transcript)

    env = GymEnv(GenericEnvClient(echo_server), grader=graded, max_steps=3)
    try:
        env.reset(seed=0)
        assert env.step('{"message": "hi"}')[1] == pytest.approx(0.2)  # the echo environment's own reward
        assert env.step({"tool": "echo", "arguments": {"message": "a"}})[1] == 0.0
        _, reward, _, truncated, info = env.step({"tool": "echo", "arguments": {"message": "b"}})
        assert truncated and reward == pytest.approx(0.5) and info["env_reward"] == 0.0  # two tool calls graded
    finally:
        env.close()
    env = GymEnv(GenericEnvClient(echo_server), grader=graded, max_steps=2, step_rewards=False)
    try:
        env.reset(seed=0)
        assert env.step('{"message": "hi"}')[1] == 0.0
    finally:
        env.close()


def test_check_env_passes_with_a_grader(wordle_url: str) -> None:
    env = GymEnv(GenericEnvClient(wordle_url), grader=WORDLE_DIR, max_steps=6)
    check_env(env, skip_render_check=True)
    env.close()


def test_bad_options_are_clear_errors(wordle_url: str) -> None:
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        GymEnv(GenericEnvClient(wordle_url), max_steps=0)
    with pytest.raises(ValueError, match="a grader is an environment folder or"):
        GymEnv(GenericEnvClient(wordle_url), grader="no-such-thing")
