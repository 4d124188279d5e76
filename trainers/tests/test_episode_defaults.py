"""Training and evaluation share one episode configuration: the same turn limit, its check, and one
retry default for the worker and the `rollout_func`."""

import inspect

import pytest
from openenv_trainers.episode import EpisodeConfig
from openenv_trainers.rollout import EnvRolloutFunc
from openenv_trainers.worker import WorkerConfig

from openenv_sdk.episode_config import EPISODE_RETRIES, EPISODE_TIMEOUT_S, MAX_TURNS, EpisodeLimits
from openenv_sdk.evaluation import EpisodeConfig as EvalEpisodeConfig


def test_train_and_eval_episodes_have_the_same_turn_limit_and_check() -> None:
    assert issubclass(EpisodeConfig, EpisodeLimits) and issubclass(EvalEpisodeConfig, EpisodeLimits)
    assert EpisodeConfig().max_turns == EvalEpisodeConfig().max_turns == MAX_TURNS
    for config in (EpisodeConfig, EvalEpisodeConfig):
        with pytest.raises(ValueError, match="max_turns must be at least 1, got 0"):
            config(max_turns=0)
    with pytest.raises(ValueError, match="max_completion_tokens must be at least 1"):
        EpisodeConfig(max_completion_tokens=0)


def test_the_worker_and_the_rollout_function_retry_alike() -> None:
    defaults = inspect.signature(EnvRolloutFunc.__init__).parameters
    assert defaults["episode_retries"].default == WorkerConfig.episode_retries == EPISODE_RETRIES
    assert defaults["episode_timeout_s"].default == WorkerConfig.episode_timeout_s == EPISODE_TIMEOUT_S
    assert defaults["max_turns"].default == MAX_TURNS
