"""Group-relative advantages (GRPO) and the filters applied to a group before training.

A group is the episodes of one task (same task, same seed), sampled from the same policy. Each
episode's advantage is its reward's distance from the group mean, in units of the group's
standard deviation, as TRL's `_score_group` computes it: `(r - mean) / (std + eps)` with the
population std. The advantages of a group sum to zero.

A failed episode (`openenv_sdk.failures`: a reset that failed, a sandbox killed while grading, a
judge that answered HTTP 500) has no reward, never a 0: `surviving_advantages` computes the
group's advantages on the episodes that survive alone, and drops a group left with fewer than
`min_group_size` of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GroupFilter", "group_advantages", "surviving_advantages"]


def group_advantages(rewards: Sequence[float], *, scale: bool = True, eps: float = 1e-8) -> list[float]:
    """The advantage of each reward in one group.

    Args:
        rewards: the group's rewards (finite numbers).
        scale: divide by the group's std (GRPO); False keeps only the mean baseline (Dr. GRPO).
        eps: added to the std so a zero-variance group gives zeros, not NaN.

    Raises:
        ValueError: the group is empty or a reward is not finite.
    """
    if not rewards:
        raise ValueError("a group needs at least one reward")
    if not all(math.isfinite(r) for r in rewards):
        raise ValueError(f"rewards must be finite, got {list(rewards)}")
    mean = math.fsum(rewards) / len(rewards)
    centered = [r - mean for r in rewards]
    if not scale:
        return centered
    std = math.sqrt(math.fsum(c * c for c in centered) / len(rewards))
    return [c / (std + eps) for c in centered]


def surviving_advantages(
    rewards: Sequence[float | None], *, scale: bool = True, eps: float = 1e-8, min_group_size: int = 2
) -> list[float | None] | None:
    """The advantages of one group whose failed episodes have no reward (None): each survivor's
    advantage is as if the failed ones had never run; failed ones get None. None when fewer than
    `min_group_size` survive (the group is dropped: counted, never trained on).

    Raises:
        ValueError: a surviving reward is not finite.
    """
    survivors = [r for r in rewards if r is not None]
    if len(survivors) < max(min_group_size, 1):
        return None
    advantages = iter(group_advantages(survivors, scale=scale, eps=eps))
    return [None if r is None else next(advantages) for r in rewards]


@dataclass(frozen=True, kw_only=True)
class GroupFilter:
    """Which groups (and episodes) to keep for training."""

    drop_zero_variance: bool = True
    """Drop a group whose rewards are all equal: every advantage is 0, so it teaches nothing."""
    drop_truncated: bool = False
    """Drop truncated episodes (a turn hit `max_tokens`, or the turn or token budget ran out) before
    computing advantages."""
    min_group_size: int = 2
    """Drop a group left with fewer episodes than this (after dropping truncated ones)."""
    zero_variance_tol: float = 1e-6
    """Rewards closer than this count as equal."""

    def keep_episode(self, truncated: bool) -> bool:
        return not (self.drop_truncated and truncated)

    def keep_group(self, rewards: Sequence[float]) -> str | None:
        """None to keep the group, else why it is dropped (`too_small` or `zero_variance`)."""
        if len(rewards) < self.min_group_size:
            return "too_small"
        if self.drop_zero_variance and max(rewards) - min(rewards) <= self.zero_variance_tol:
            return "zero_variance"
        return None
