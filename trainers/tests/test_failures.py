"""A failure is never a reward, in the async worker and TRL's rollout_func: fault injection.

Real parts: `openenv_sdk.fault_injection.FaultyEnvironment` served on a real port (each session a
bubblewrap sandbox), its judge a real HTTP server on another; the tiny model's tokenizer; a
scripted backend that writes the tool calls as token ids (right word, wrong word, right word, a
command past the tool's limit: the policy's own timeout). The faults are the next resets' (a
group's episodes share their task): 5 % reset failures, 10 % sandboxes killed while the check
runs, 10 % judge HTTP 500. Each failed episode is counted by its cause and never trained on; the
advantages of a group are those of its surviving episodes alone.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import queue
import re
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from openenv_trainers.advantages import GroupFilter, group_advantages, surviving_advantages
from openenv_trainers.episode import EpisodeConfig
from openenv_trainers.generation import Completion, SamplingParams
from openenv_trainers.rollout import EnvRolloutFunc, env_reward
from openenv_trainers.sources import EnvSource
from openenv_trainers.tasks import task_row
from openenv_trainers.worker import EnvRolloutWorker, WorkerConfig

from openenv_sdk import ServerConfig, create_app
from openenv_sdk.fault_injection import FaultyEnvironment, fault_plan, faulty_grader, judge_app

from .conftest import serve

EPISODES = 500
GROUP = 4
EXPECTED_FAILURES = {"reset": 25, "sandbox": 50, "judge": 50}


class ScriptedBackend:
    """The policy: on its first turn, calls `answer` (right or wrong word) or `run` with a command
    past the tool's limit, in turn; after a tool result, answers "Done."."""

    logprobs_mode = "processed_logprobs"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.behaviours = itertools.cycle(["right", "wrong", "right", "timeout"])

    def generate(self, prompts: Any, params: Any) -> list[Completion]:
        raise NotImplementedError("agenerate only")

    async def agenerate(self, prompt: Any, params: SamplingParams) -> Completion:
        text = self.tokenizer.decode(list(prompt))
        if "<tool_response>" in text:
            reply = "Done."
        else:
            target = re.search(r"Answer the word '(\w+)'", text)
            assert target is not None, text[-300:]
            behaviour = next(self.behaviours)
            if behaviour == "timeout":
                call = {"name": "run", "arguments": {"command": "sleep 5"}}
            else:
                call = {"name": "answer", "arguments": {"text": target.group(1) if behaviour == "right" else "wrong"}}
            reply = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        ids = self.tokenizer.encode(reply, add_special_tokens=False) + [self.eos]
        return Completion(token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop")


def _rows(groups: int) -> list[dict[str, Any]]:
    plan = fault_plan(groups * GROUP, group_size=GROUP)
    words = [plan[g * GROUP].target for g in range(groups)]
    return [
        task_row([{"role": "user", "content": f"Answer the word '{w}' with the answer tool."}], target=w, fault="scheduled")
        for w in words
    ]


def _schedule() -> None:
    FaultyEnvironment.schedule([p.fault for p in fault_plan(EPISODES, group_size=GROUP, seed=3)])


@pytest.fixture(scope="module")
def urls() -> Iterator[tuple[str, str]]:
    with serve(judge_app()) as judge, serve(create_app(FaultyEnvironment, config=ServerConfig(max_sessions=64))) as env:
        yield env, f"{judge}/v1"


def _episode_config() -> EpisodeConfig:
    return EpisodeConfig(sampling=SamplingParams(max_tokens=64, temperature=1.0), max_turns=3, max_completion_tokens=256)


@pytest.mark.timeout(400)
def test_the_worker_trains_on_surviving_episodes_alone(tokenizer: Any, urls: tuple[str, str]) -> None:
    env_url, judge_url = urls
    _schedule()
    config = WorkerConfig(
        num_generations=GROUP, max_inflight_episodes=16, buffer_size=64, episode=_episode_config(),
        episode_timeout_s=60.0, episode_retries=0, group_filter=GroupFilter(drop_zero_variance=False),
        poll_interval_s=0.01, breaker_failures=10_000,
    )  # fmt: skip
    worker = EnvRolloutWorker(
        sources=EnvSource(env_url), backend=ScriptedBackend(tokenizer), tokenizer=tokenizer, tasks=_rows(EPISODES // GROUP),
        rubric=faulty_grader(judge_url), config=config,
    )  # fmt: skip
    samples: list[Any] = []
    started = time.monotonic()
    worker.start()
    try:
        deadline = time.monotonic() + 360
        while FaultyEnvironment.scheduled_left() or len(worker.failures) < sum(EXPECTED_FAILURES.values()):
            assert time.monotonic() < deadline, (FaultyEnvironment.scheduled_left(), worker.counters)
            try:
                samples.append(worker.rollout_buffer.get(timeout=0.2))
            except queue.Empty:
                worker.check_health(120)
        finished = worker.counters["groups"]
    finally:
        worker.stop()
    while not worker.rollout_buffer.empty():
        samples.append(worker.rollout_buffer.get_nowait())
    took_s = time.monotonic() - started

    causes = collections.Counter(f.cause.value for _, f in worker.failures)
    assert causes == EXPECTED_FAILURES
    assert {f"failures/{c}": n for c, n in causes.items()} == {k: v for k, v in worker.counters.items() if k.startswith("failures/")}
    failed_in: collections.Counter[int] = collections.Counter(g for g, _ in worker.failures)
    by_group: dict[int, list[Any]] = collections.defaultdict(list)
    for sample in samples:
        by_group[sample.group_id].append(sample)
    assert len(by_group) > 80
    timeouts_scored_0 = 0
    for group_id, group in by_group.items():
        assert len(group) + failed_in[group_id] == GROUP, (group_id, len(group), failed_in[group_id])
        rewards = [s.metrics["reward"] for s in group]
        assert set(rewards) <= {0.0, 0.5, 1.0}
        expected = group_advantages(rewards)  # the survivors alone
        assert [s.advantage for s in group] == pytest.approx(expected, abs=1e-9)
        timeouts_scored_0 += rewards.count(0.0)
    assert timeouts_scored_0 > 0  # the policy's own timeout: a graded 0, trained on
    too_small = worker.counters["groups_dropped_too_small"]
    assert too_small == sum(1 for g, n in failed_in.items() if n > GROUP - 2 and g not in by_group) > 0
    print(f"\nworker: {finished} groups in {took_s:.1f} s; failures {dict(causes)}; {too_small} groups dropped (< 2 survivors)")


def _trl_advantages(rewards: list[float | None], num_generations: int) -> list[float]:
    """TRL 1.16's GRPO advantages (`GRPOTrainer._generate_and_score_completions`,
    `sum_then_normalize`, scale_rewards="group") over `env_reward`'s column, as TRL computes them."""
    from trl.trainer.utils import nanstd

    per_func = torch.tensor([[math.nan if r is None else r] for r in env_reward([], rewards)], dtype=torch.float32)
    unscorable = torch.isnan(per_func).all(dim=1)
    total = per_func.nansum(dim=1)
    total[unscorable] = torch.nan
    mean = torch.nanmean(total.view(-1, num_generations), dim=1).repeat_interleave(num_generations)
    std = nanstd(total.view(-1, num_generations), dim=1).repeat_interleave(num_generations)
    return torch.nan_to_num((total - mean) / (std + 1e-4), nan=0.0).tolist()


@pytest.mark.timeout(400)
def test_the_rollout_func_gives_failed_rows_no_reward(tokenizer: Any, urls: tuple[str, str]) -> None:
    env_url, judge_url = urls
    _schedule()
    rollouts = EnvRolloutFunc(
        EnvSource(env_url), rubric=faulty_grader(judge_url), backend=ScriptedBackend(tokenizer), max_turns=3,
        episode_retries=0, episode_timeout_s=60.0,
    )  # fmt: skip
    trainer = SimpleNamespace(
        args=SimpleNamespace(max_completion_length=256), processing_class=tokenizer, temperature=1.0, top_p=1.0,
        top_k=0, eos_token_ids=[tokenizer.convert_tokens_to_ids("<|im_end|>")], state=SimpleNamespace(global_step=0),
    )  # fmt: skip
    rows = _rows(EPISODES // GROUP)
    rewards: list[float | None] = []
    failures: list[str | None] = []
    started = time.monotonic()
    try:
        for step in range(0, len(rows), 8):  # steps of 8 prompts x 4 generations
            prompts = [row["prompt"] for row in rows[step : step + 8] for _ in range(GROUP)]
            trainer.state.global_step = step
            out = rollouts(prompts, trainer)
            assert len(out["env_reward"]) == len(prompts)
            for mask, failure in zip(out["env_mask"], out["env_failure"], strict=True):
                assert failure is None or not any(mask)  # nothing of a failed row is trained on
            rewards += out["env_reward"]
            failures += out["env_failure"]
    finally:
        rollouts.close()
    took_s = time.monotonic() - started
    assert collections.Counter(f for f in failures if f is not None) == EXPECTED_FAILURES
    assert all((r is None) == (f is not None) for r, f in zip(rewards, failures, strict=True))
    assert rollouts.failures == sum(EXPECTED_FAILURES.values())
    trl = _trl_advantages(rewards, GROUP)
    dropped = 0
    for g in range(0, len(rewards), GROUP):
        group = rewards[g : g + GROUP]
        survivors = [r for r in group if r is not None]
        alone = iter(_trl_advantages(survivors, len(survivors)) if survivors else [])  # TRL on the survivors alone
        for r, got in zip(group, trl[g : g + GROUP], strict=True):
            assert got == (0.0 if r is None else pytest.approx(next(alone), abs=1e-6)), (group, trl[g : g + GROUP])
        if surviving_advantages(group) is None:  # fewer than 2 survive: every advantage 0, nothing learnt
            dropped += 1
            assert trl[g : g + GROUP] == [0.0] * GROUP
    print(f"\nrollout_func: {len(rewards)} episodes in {took_s:.1f} s; {dropped} groups with < 2 survivors")
