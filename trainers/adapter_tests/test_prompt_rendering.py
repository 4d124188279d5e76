"""Every trainer adapter prompts the policy with the same text as `openenv eval` and `openenv
collect` for the same observation: all of them render through `openenv_sdk.prompt.observation_text`
(a copy in any one would break the identity below)."""

import openenv_trainers.adapters.art as art_adapter
import openenv_trainers.adapters.skyrl as skyrl_adapter
import openenv_trainers.adapters.verifiers as verifiers_adapter
import pytest

import openenv_sdk.evaluation._episode as eval_episode
from openenv_sdk.prompt import observation_text

OBSERVATION = {"message": "Guess the word.", "attempts_left": 6, "done": False, "reward": None, "metadata": {"k": 1}}


@pytest.mark.parametrize("module", [eval_episode, art_adapter, skyrl_adapter, verifiers_adapter], ids=lambda m: m.__name__)
def test_each_renders_the_observation_identically(module: object) -> None:
    render = module.observation_text  # type: ignore[attr-defined]
    assert render is observation_text
    assert render(OBSERVATION) == "Guess the word.\n\nattempts_left: 6"
