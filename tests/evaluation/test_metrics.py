"""pass@k against its definition (the chance that a random k-subset of the n attempts holds a pass),
and the summary's handling of failed episodes."""

from __future__ import annotations

import itertools

import pytest

from openenv_sdk import evaluation
from openenv_sdk.evaluation import EpisodeRecord, default_ks, pass_at_k, summarize


@pytest.mark.parametrize(("n", "c"), [(n, c) for n in range(1, 7) for c in range(n + 1)])
def test_pass_at_k_is_the_share_of_k_subsets_with_a_pass(n: int, c: int) -> None:
    attempts = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(attempts, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(2, 3, 1)


def test_default_ks() -> None:
    assert default_ks(1) == [1]
    assert default_ks(5) == [1, 2, 4, 5]
    assert default_ks(8) == [1, 2, 4, 8]


def record(task: str, attempt: int, reward: float | None, error: str | None = None) -> EpisodeRecord:
    return EpisodeRecord(key=f"{task}#{attempt}", task_id=task, attempt=attempt, reward=reward,
                         passed=None if reward is None else reward >= 1, error=error)  # fmt: skip


def test_failed_episodes_are_left_out_of_every_number() -> None:
    records = [record("a", 0, 1.0), record("a", 1, None, "boom"), record("b", 0, 0.0), record("b", 1, 1.0)]
    summary = summarize(records, ks=[1, 2], pass_threshold=1.0, command="eval", env="e", policy="p", model="m",
                        split=None, tasks=2, rollouts_per_task=2)  # fmt: skip
    assert (summary.episodes, summary.graded, summary.errors) == (4, 3, 1)
    assert summary.mean_reward == pytest.approx(2 / 3)
    a, b = summary.per_task
    assert (a.graded, a.passed, a.errors, a.pass_at_k) == (1, 1, 1, {"1": 1.0, "2": None})
    assert b.pass_at_k == {"1": 0.5, "2": 1.0}
    assert summary.pass_at_k == {"1": 0.75, "2": 1.0}  # pass@2 only over the tasks with 2 graded attempts


def test_the_package_api() -> None:
    assert sorted(evaluation.__all__) == [
        "ChatPolicy", "DEFAULT_SYSTEM_PROMPT", "EPISODES_FILE", "EnvTarget", "EpisodeConfig", "EpisodeLog",
        "EpisodeRecord", "OutputMismatch", "PROFILE_FILE", "PassRateProfile", "PlannedEpisode", "Policy", "PolicyTurn",
        "ProfileError", "REPORT_FILE", "RunConfig", "RunResult", "RunSummary", "SUMMARY_FILE", "ScriptedPolicy",
        "TaskPassRate", "TaskSummary", "TurnContext", "TurnTokens",
        "arun", "chat_messages", "dataset_rows", "default_ks", "load_grader", "load_policy", "markdown_report", "observation_text",
        "openai_tools", "pass_at_k", "plan_episodes", "play_episode", "run_episodes", "save_dataset", "summarize",
        "task_profile", "tool_result_text",
    ]  # fmt: skip
