"""A run's numbers: mean reward, pass@k with the unbiased estimator, and per-task results.

pass@k is the chance that at least one of k attempts at a task passes, estimated from a task's
n attempts of which c passed as `1 - C(n-c, k) / C(n, k)` (Chen et al., 2021, the HumanEval
paper), then averaged over the tasks with at least k graded attempts. An episode that failed
(an `error`, not a low reward) is left out of every number and counted in `errors`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ._causes import cause_of, merge_causes
from ._records import EpisodeRecord

__all__ = ["RunSummary", "TaskSummary", "default_ks", "pass_at_k", "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from `n` attempts of which `c` passed.

    Raises:
        ValueError: not `0 <= c <= n` and `1 <= k <= n`.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def default_ks(rollouts: int) -> list[int]:
    """1, then powers of two up to `rollouts`, and `rollouts` itself: 8 gives [1, 2, 4, 8]."""
    ks = {1, rollouts}
    k = 2
    while k < rollouts:
        ks.add(k)
        k *= 2
    return sorted(ks)


class TaskSummary(BaseModel):
    """One task's attempts."""

    task_id: str
    split: str | None = None
    episodes: int = Field(description="Attempts planned and recorded.")
    graded: int = Field(description="Attempts that ended with a reward (no error).")
    passed: int
    errors: int
    tool_errors: int = Field(default=0, description="Tool calls that failed, in every attempt (failed ones too).")
    mean_reward: float | None
    pass_at_k: dict[str, float | None] = Field(description="By k (as a string); None where graded < k.")


class RunSummary(BaseModel):
    """A run of `openenv eval` or `openenv collect`: what ran, and its numbers."""

    command: str
    env: str
    policy: str
    model: str
    split: str | None
    tasks: int
    rollouts_per_task: int
    episodes: int
    graded: int
    errors: int
    errors_by_cause: dict[str, int] = Field(
        default_factory=dict, description="The failed episodes by cause (`cause_of` their error), most first."
    )
    failures_by_cause: dict[str, int] = Field(
        default_factory=dict,
        description="The failed episodes by `FailureCause` (reset, sandbox, judge, grader, timeout, infrastructure), most first.",
    )
    policy_timeouts: int = Field(default=0, description="Graded episodes that ran out of turns (the policy's own timeout).")
    tool_calls: int = Field(default=0, description="Tool calls made, in every episode (failed ones too).")
    tool_errors: int = Field(default=0, description="Tool calls that failed, in every episode (failed ones too).")
    tool_errors_by_cause: dict[str, int] = Field(
        default_factory=dict, description="The failed tool calls by cause, most first."
    )
    pass_threshold: float
    mean_reward: float | None
    std_reward: float | None
    pass_at_k: dict[str, float | None] = Field(description="By k: the mean over tasks with at least k graded attempts.")
    mean_turns: float | None
    mean_tool_calls: float | None
    per_task: list[TaskSummary]
    resumed: int = Field(default=0, description="Episodes taken from an earlier run of the same output.")
    skipped_lines: int = Field(
        default=0,
        description="Lines of the output's episodes.jsonl that were damaged or not well-formed records: "
        "skipped, their episodes played again.",
    )
    duration_s: float = 0.0
    started_at: str = ""
    finished_at: str = ""
    config: dict[str, Any] = Field(default_factory=dict)


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize(
    records: Iterable[EpisodeRecord],
    *,
    ks: Sequence[int],
    pass_threshold: float,
    **run: Any,
) -> RunSummary:
    """Summarise `records` (one per planned episode); `run` fills the descriptive fields
    (`command`, `env`, `policy`, `model`, `split`, `tasks`, `rollouts_per_task`, ...)."""
    records = list(records)
    by_task: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append(record)
    per_task = []
    for task_id, attempts in by_task.items():
        graded = [r for r in attempts if r.error is None and r.reward is not None]
        n, c = len(graded), sum(1 for r in graded if r.passed)
        per_task.append(
            TaskSummary(
                task_id=task_id,
                split=attempts[0].split,
                episodes=len(attempts),
                graded=n,
                passed=c,
                errors=len(attempts) - n,
                tool_errors=sum(r.tool_errors for r in attempts),
                mean_reward=_mean([r.reward for r in graded if r.reward is not None]),
                pass_at_k={str(k): pass_at_k(n, c, k) if n >= k else None for k in ks},
            )
        )
    graded_all = [r for r in records if r.error is None and r.reward is not None]
    rewards = [r.reward for r in graded_all if r.reward is not None]
    overall: dict[str, float | None] = {}
    for k in ks:
        values = [t.pass_at_k[str(k)] for t in per_task if t.pass_at_k[str(k)] is not None]
        overall[str(k)] = _mean([v for v in values if v is not None])
    return RunSummary(
        episodes=len(records),
        graded=len(graded_all),
        errors=len(records) - len(graded_all),
        errors_by_cause=merge_causes(
            {cause_of(r.error or "no reward"): 1} for r in records if r.error is not None or r.reward is None
        ),
        failures_by_cause=merge_causes(
            {(r.failure.cause.value if r.failure is not None else "infrastructure"): 1} for r in records if r.error is not None
        ),
        policy_timeouts=sum(1 for r in graded_all if r.policy_timeout),
        tool_calls=sum(r.tool_calls for r in records),
        tool_errors=sum(r.tool_errors for r in records),
        tool_errors_by_cause=merge_causes(r.tool_error_causes for r in records),
        pass_threshold=pass_threshold,
        mean_reward=_mean(rewards),
        std_reward=statistics.pstdev(rewards) if rewards else None,
        pass_at_k=overall,
        mean_turns=_mean([r.turns for r in graded_all]),
        mean_tool_calls=_mean([r.tool_calls for r in graded_all]),
        per_task=per_task,
        **run,
    )
