"""The one rendering of an observation as the policy's prompt, and `openenv eval`/`collect` using it."""

import openenv_sdk.evaluation as evaluation
import openenv_sdk.evaluation._episode as eval_episode
from openenv_sdk.prompt import observation_text

OBSERVATION = {
    "message": "Guess the five-letter word.",
    "attempts_left": 6,
    "history": [{"guess": "crane", "marks": "..x.."}],
    "hint": "",
    "done": False,
    "reward": None,
    "metadata": {"secret": "never shown"},
}


def test_text_fields_first_then_the_rest_as_name_value_protocol_fields_dropped() -> None:
    assert observation_text(OBSERVATION) == (
        'Guess the five-letter word.\n\nattempts_left: 6\nhistory: [{"guess": "crane", "marks": "..x.."}]'
    )


def test_several_text_fields_keep_their_order_and_an_empty_observation_says_start() -> None:
    assert observation_text({"text": "b", "prompt": "a", "done": True}) == "a\n\nb"
    assert observation_text({"done": False, "reward": 0.0, "metadata": {}}) == "Start."


def test_eval_and_collect_render_through_it() -> None:
    # `openenv eval` and `openenv collect` both play each episode through `play_episode`.
    assert eval_episode.observation_text is observation_text
    assert evaluation.observation_text is observation_text
