"""Group-relative advantages and group filters."""

from __future__ import annotations

import math

import pytest
from openenv_trainers.advantages import GroupFilter, group_advantages


@pytest.mark.parametrize("rewards", [[0.0, 1.0], [0.2, 0.5, 0.9, 0.1], [3.0, -1.0, 2.5, 2.5, 0.0, 7.0]])
def test_advantages_sum_to_zero_and_have_unit_std(rewards: list[float]) -> None:
    advantages = group_advantages(rewards)
    assert math.isclose(sum(advantages), 0.0, abs_tol=1e-9)
    std = math.sqrt(sum(a * a for a in advantages) / len(advantages))
    assert math.isclose(std, 1.0, rel_tol=1e-6)
    assert [a > 0 for a in advantages] == [r > sum(rewards) / len(rewards) for r in rewards]


def test_a_zero_variance_group_gets_zero_advantages_not_nan() -> None:
    assert group_advantages([0.5, 0.5, 0.5]) == [0.0, 0.0, 0.0]


def test_unscaled_advantages_keep_only_the_mean_baseline() -> None:
    assert group_advantages([1.0, 3.0], scale=False) == [-1.0, 1.0]


def test_non_finite_rewards_are_refused() -> None:
    with pytest.raises(ValueError, match="rewards must be finite"):
        group_advantages([1.0, float("nan")])
    with pytest.raises(ValueError, match="at least one reward"):
        group_advantages([])


def test_group_filter() -> None:
    keep_all = GroupFilter(drop_zero_variance=False, min_group_size=1)
    assert keep_all.keep_group([1.0, 1.0]) is None
    default = GroupFilter()
    assert default.keep_group([1.0, 1.0]) == "zero_variance"
    assert default.keep_group([1.0]) == "too_small"
    assert default.keep_group([0.0, 1.0]) is None
    assert default.keep_episode(truncated=True)
    assert not GroupFilter(drop_truncated=True).keep_episode(truncated=True)
