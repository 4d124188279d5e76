"""The `rollout_func` adapter: multi-turn episodes with exact tokens, masks and logprobs, in GRPOTrainer."""

from __future__ import annotations

import math
from typing import Any

import torch
from openenv_trainers.echo_task import echo_rows
from openenv_trainers.rollout import EnvRolloutFunc, env_reward
from openenv_trainers.sources import EnvSource

from .conftest import cpu_grpo_args, echo_rubric
from .tokens import mask_runs


class RecordingRollouts(EnvRolloutFunc):
    """Keeps every call's prompts and output."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list[Any], dict[str, Any], list[Any]]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        output = super().__call__(prompts, trainer)
        self.calls.append((prompts, output, list(self.last_episodes)))
        return output


def test_grpo_trainer_trains_through_the_rollout_func(model: Any, tokenizer: Any, echo_url: str) -> None:
    from datasets import Dataset
    from trl import GRPOTrainer

    rollouts = RecordingRollouts(EnvSource(echo_url), rubric=echo_rubric(), max_turns=3, max_turn_tokens=48)
    before = [p.detach().clone() for p in model.parameters()]
    args = cpu_grpo_args(
        "rollout",
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=128,
        max_steps=2,
        learning_rate=1e-3,
        temperature=0.8,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[env_reward],
        args=args,
        train_dataset=Dataset.from_list(echo_rows(16)),
        rollout_func=rollouts,
        callbacks=[rollouts.closer()],
    )
    trainer.train()
    assert len(rollouts.calls) == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    logged = [h["rewards/env_reward/mean"] for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logged) == 2

    eos = tokenizer.eos_token_id
    multi_turn = 0
    for prompts, output, episodes in rollouts.calls:
        n = len(prompts)
        assert all(len(output[k]) == n for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"))
        for i, episode in enumerate(episodes):
            ids, mask, logprobs = output["completion_ids"][i], output["env_mask"][i], output["logprobs"][i]
            assert len(ids) == len(mask) == len(logprobs) <= 128
            # mask 1 exactly where logprobs exist; every sampled run ends with the end-of-turn token
            assert [m == 1 for m in mask] == [not math.isnan(lp) for lp in logprobs]
            runs = mask_runs(mask)
            assert len(runs) == episode.turns
            for _start, end in runs[:-1]:
                assert ids[end - 1] == eos
            for start, end in mask_runs([1 - m for m in mask]):  # environment tokens: a tool result, then the next prompt
                text = tokenizer.decode(ids[start:end])
                assert text.startswith("\n<|im_start|>user\n<tool_response>\n") and text.endswith("<|im_start|>assistant\n")
            multi_turn += episode.turns > 1
            assert output["env_reward"][i] == episode.reward
        # groups: consecutive rollouts of one prompt share the task and the seed
        for g in range(0, n, 4):
            group = episodes[g : g + 4]
            assert len({e.seed for e in group}) == 1 and len({e.task["text"] for e in group}) == 1
        assert len({e.seed for e in episodes[::4]}) == n // 4
    assert multi_turn > 0  # some episodes called the tool and went on after its result
    assert rollouts._loop is None  # closed at the end of training


