"""`openenv validate --deep --learn` (`openenv_sdk.checks._learn.check_learn`) in the trainers'
environment: GRPO steps of the tiny model on wordle through TRL's environment_factory, graded by
the folder's grader, and a verdict on whether the reward moved."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_sdk.checks._learn import check_learn

WORDLE = Path(__file__).resolve().parents[2] / "environments" / "wordle"


@pytest.mark.timeout(900)
def test_learn_runs_grpo_steps_and_says_whether_the_reward_moved(tiny_model_dir: Path) -> None:
    result, figures = check_learn(WORDLE, steps=2, tasks=4, model_dir=tiny_model_dir)
    assert figures is not None and figures["steps"] == 2, (result, figures)
    assert len(figures["rewards"]) == len(figures["reward_std"]) == len(figures["tool_calls"]) == 2
    assert result.name == "deep.learn" and result.status in ("pass", "warn")
    if result.status == "warn":  # the tiny model plays wordle badly: the reward may stay flat
        assert result.message.startswith("the reward never moved in 2 GRPO steps")
        assert result.fix is not None and "warm the model up on the oracle's episodes" in result.fix
    else:
        assert result.message.startswith("the reward moved over 2 GRPO steps")
