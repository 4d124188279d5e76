"""SFT on tool outputs: the gradient is alpha x plain cross-entropy on tool outputs, and GRPO trains with it."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from openenv_trainers.echo_task import echo_rows
from openenv_trainers.errors import TrainerError
from openenv_trainers.rollout import EnvRolloutFunc, env_reward
from openenv_trainers.sft import (
    SFTOnToolOutputsGRPOTrainer,
    ToolOutputSFT,
    _select_tools,
    tool_output_sft_loss,
)
from openenv_trainers.sources import EnvSource
from torch.testing import assert_close

from .conftest import cpu_grpo_args, echo_rubric
from .tokens import mask_runs

# Two sequences of 8 positions: 1 = sampled (RL loss), 2 = tool-output body (SFT), 0 = neither
# (scaffolding, padding).
LAYOUT = torch.tensor([[0, 1, 1, 2, 2, 2, 0, 1], [1, 1, 0, 2, 0, 2, 2, 0]])
SAMPLED, TOOL = LAYOUT == 1, LAYOUT == 2


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logits (with grad), targets, and the RL loss's inputs: old and reference logprobs, advantages."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(*LAYOUT.shape, 11, generator=g, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 11, LAYOUT.shape, generator=g)
    logps = torch.log_softmax(logits.detach(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    old = logps + 0.4 * torch.randn(LAYOUT.shape, generator=g, dtype=torch.float64)  # some ratios get clipped
    ref = logps + 0.3 * torch.randn(LAYOUT.shape, generator=g, dtype=torch.float64)
    advantages = torch.tensor([[1.5], [-0.7]], dtype=torch.float64)
    return logits, targets, old, ref, advantages


def _logps(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _rl_loss(logps: torch.Tensor, old: torch.Tensor, ref: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """A clipped-ratio policy loss with a KL penalty, on the sampled tokens only (as GRPO's)."""
    ratio = torch.exp(logps - old)
    surrogate = -torch.min(ratio * advantages, torch.clamp(ratio, 0.8, 1.2) * advantages)
    kl = torch.exp(ref - logps) - (ref - logps) - 1
    mask = SAMPLED.double()
    return ((surrogate + 0.1 * kl) * mask).sum() / mask.sum()


@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_the_gradient_on_tool_outputs_is_alpha_times_the_plain_cross_entropy_gradient(alpha: float) -> None:
    logits, targets, old, ref, advantages = _batch()
    config = ToolOutputSFT(alpha=alpha)

    logps = _logps(logits, targets)
    total = _rl_loss(logps, old, ref, advantages) + tool_output_sft_loss(logps, TOOL.long(), config, loss_mask=SAMPLED.long())
    (grad,) = torch.autograd.grad(total, logits)
    (rl_only,) = torch.autograd.grad(_rl_loss(_logps(logits, targets), old, ref, advantages), logits)
    (cross_entropy,) = torch.autograd.grad(F.cross_entropy(logits[TOOL], targets[TOOL]), logits)

    # Tool outputs: alpha x the mean cross-entropy's gradient, no ratio, clipping or KL.
    assert_close(grad[TOOL], alpha * cross_entropy[TOOL], rtol=1e-12, atol=1e-12)
    if alpha == 0:
        assert torch.equal(grad[TOOL], torch.zeros_like(grad[TOOL]))
    else:
        assert grad[TOOL].abs().max() > 1e-3
    # Sampled tokens: the RL gradient, nothing added; elsewhere: nothing at all.
    assert_close(grad[SAMPLED], rl_only[SAMPLED], rtol=1e-12, atol=1e-12)
    assert grad[SAMPLED].abs().max() > 1e-3
    assert torch.equal(grad[LAYOUT == 0], torch.zeros_like(grad[LAYOUT == 0]))


def test_the_all_tokens_normalization_divides_by_every_loss_token() -> None:
    logits, targets, *_ = _batch(seed=1)
    logps = _logps(logits, targets)
    config = ToolOutputSFT(alpha=0.5, normalization="all_tokens")
    loss = tool_output_sft_loss(logps, TOOL.long(), config, loss_mask=SAMPLED.long())
    summed = F.cross_entropy(logits[TOOL], targets[TOOL], reduction="sum")
    n_loss_tokens = int(SAMPLED.sum() + TOOL.sum())
    assert n_loss_tokens == 11
    assert_close(loss, 0.5 * summed / n_loss_tokens)
    (grad,) = torch.autograd.grad(loss, logits)
    (expected,) = torch.autograd.grad(0.5 * summed / n_loss_tokens, logits)
    assert_close(grad, expected)
    # An explicit normalizer (a count over several micro-batches) replaces the batch's own count.
    assert_close(tool_output_sft_loss(logps, TOOL.long(), config, normalizer=40.0), 0.5 * summed / 40)


def test_no_tool_output_gives_zero_with_a_graph_and_a_zero_gradient() -> None:
    logits, targets, *_ = _batch()
    logps = _logps(logits, targets)
    loss = tool_output_sft_loss(logps, torch.zeros_like(TOOL, dtype=torch.long), ToolOutputSFT(alpha=1.0))
    assert loss.requires_grad and loss.item() == 0.0
    (grad,) = torch.autograd.grad(loss, logits)
    assert torch.equal(grad, torch.zeros_like(grad))


def test_misuse_is_refused() -> None:
    logits, targets, *_ = _batch()
    logps = _logps(logits, targets)
    on = ToolOutputSFT(alpha=0.1)
    with pytest.raises(ValueError, match="RL loss mask covers tool-output tokens"):
        tool_output_sft_loss(logps, TOOL.long(), on, loss_mask=(LAYOUT > 0).long())
    with pytest.raises(ValueError, match='"all_tokens" normalization needs loss_mask'):
        tool_output_sft_loss(logps, TOOL.long(), ToolOutputSFT(alpha=0.1, normalization="all_tokens"))
    with pytest.raises(ValueError, match=r"tool_output_mask has shape \(2, 7\), the logps \(2, 8\)"):
        tool_output_sft_loss(logps, TOOL[:, :7].long(), on)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        ToolOutputSFT(alpha=-0.1)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        ToolOutputSFT(alpha=math.nan)
    with pytest.raises(TypeError, match=r"use \('echo',\)"):
        ToolOutputSFT(tool_names="echo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool_names is empty"):
        ToolOutputSFT(tool_names=())
    with pytest.raises(ValueError, match="normalization must be one of"):
        ToolOutputSFT(normalization="per_rollout")  # type: ignore[arg-type]
    assert ToolOutputSFT(tool_names=["a", "b"]).tool_names == ("a", "b")  # type: ignore[arg-type]
    assert not ToolOutputSFT().enabled and on.enabled


def test_the_trainer_limits_the_rollouts_mask_to_the_named_tools() -> None:
    masks = [[0, 1, 1, 0, 1], [1, 0]]
    names = [[None, "read", "read", None, "run"], ["run", None]]
    ids = [[5] * 5, [5] * 2]
    assert _select_tools(masks, names, None, ids) == masks
    assert _select_tools(masks, names, ("run",), ids) == [[0, 0, 0, 0, 1], [1, 0]]
    with pytest.raises(TrainerError, match="returned no tool_output_names column"):
        _select_tools(masks, None, ("run",), ids)
    with pytest.raises(TrainerError, match="row 1 has 2 values for 3 completion tokens"):
        _select_tools(masks, names, None, [[5] * 5, [5] * 3])


class RecordingRollouts(EnvRolloutFunc):
    """Keeps every call's output (and episodes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outputs: list[dict[str, list[Any]]] = []

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        output = super().__call__(prompts, trainer)
        self.outputs.append(copy.deepcopy(output))
        return output


def _train_one_step(model: Any, tokenizer: Any, rollout_func: Any, config: ToolOutputSFT, seen: list[set[str]]) -> Any:
    from datasets import Dataset

    def reward(completions: list[Any], env_reward: list[float], **kwargs: Any) -> list[float]:
        seen.append(set(kwargs))
        return [float(r) for r in env_reward]

    args = cpu_grpo_args(
        "sft",
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=128,
        max_steps=1,
        # Plain SGD with no clipping: the update is -lr x the gradient, so two runs' difference is
        # -lr x the difference of their gradients.
        optim="sgd",
        learning_rate=1.0,
        lr_scheduler_type="constant",
        max_grad_norm=0.0,
        temperature=1.0,  # TRL's logprobs are of logits / temperature: 1 keeps them the plain ones
    )
    trainer = SFTOnToolOutputsGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_list(echo_rows(8)),
        rollout_func=rollout_func,
        tool_output_sft=config,
    )
    trainer.train()
    return trainer


def test_grpo_with_sft_on_tool_outputs_adds_exactly_alpha_times_the_cross_entropy_gradient(
    tiny_model_dir: Path, tokenizer: Any, echo_url: str
) -> None:
    from transformers import AutoModelForCausalLM

    def fresh() -> Any:
        return AutoModelForCausalLM.from_pretrained(tiny_model_dir)

    alpha = 0.5
    # Run A: real episodes in the echo environment, SFT on. Run B: the same rollouts replayed, SFT off.
    rollouts = RecordingRollouts(EnvSource(echo_url), rubric=echo_rubric(), max_turns=3, max_turn_tokens=48)
    seen_a: list[set[str]] = []
    model_a = fresh()
    try:
        trainer_a = _train_one_step(model_a, tokenizer, rollouts, ToolOutputSFT(alpha=alpha), seen_a)
    finally:
        rollouts.close()
    (output,) = rollouts.outputs

    def replay(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        return copy.deepcopy(output)

    seen_b: list[set[str]] = []
    model_b = fresh()
    trainer_b = _train_one_step(model_b, tokenizer, replay, ToolOutputSFT(alpha=0.0), seen_b)

    # The rollouts' tool-output tokens are exactly the echo results' bodies.
    n_tool = 0
    for i, episode in enumerate(rollouts.last_episodes):
        ids, mask, names = output["completion_ids"][i], output["tool_output_mask"][i], output["tool_output_names"][i]
        assert len(mask) == len(names) == len(ids)
        assert {name for name, m in zip(names, mask, strict=True) if m} <= {"echo"}
        bodies = [m["content"] for m in episode.completion_messages if m["role"] == "tool"]
        assert [tokenizer.decode(ids[s:e]) for s, e in mask_runs(mask)] == [b for b in bodies if b]
        n_tool += sum(mask)
    assert n_tool > 0, "no episode called the tool: nothing to test"
    # The columns reach the trainer, not the reward functions.
    assert seen_a and all("tool_output_mask" not in keys and "tool_output_names" not in keys for keys in seen_a + seen_b)

    # What run A must have added: alpha x the mean cross-entropy of the tool-output tokens, at the
    # starting weights, computed here independently (one sequence at a time, no padding).
    reference = fresh()
    nll = torch.zeros(())
    for prompt_ids, ids, mask in zip(output["prompt_ids"], output["completion_ids"], output["tool_output_mask"], strict=True):
        logits = reference(torch.tensor([prompt_ids + ids])).logits[0, len(prompt_ids) - 1 : -1]
        nll = nll + F.cross_entropy(logits, torch.tensor(ids), reduction="none")[torch.tensor(mask, dtype=torch.bool)].sum()
    (alpha * nll / n_tool).backward()
    expected = torch.cat([-p.grad.flatten() for p in reference.parameters()])  # SGD, lr 1: -gradient
    difference = torch.cat([(a - b).detach().flatten() for a, b in zip(model_a.parameters(), model_b.parameters(), strict=True)])
    assert expected.abs().max() > 1e-4
    assert_close(difference, expected, rtol=1e-3, atol=1e-4 * float(expected.abs().max()))

    for trainer in (trainer_a, trainer_b):
        (logged,) = [h for h in trainer.state.log_history if "sft/tool_nll" in h]
        assert math.isfinite(logged["sft/tool_nll"])
        assert logged["sft/tool_nll"] == pytest.approx(nll.item() / n_tool, rel=1e-4)
        assert logged["sft/tool_tokens"] == n_tool


def test_the_trainer_refuses_sft_without_a_mask(model: Any, tokenizer: Any) -> None:
    from datasets import Dataset

    args = cpu_grpo_args("sft", per_device_train_batch_size=2, num_generations=2, max_steps=1)
    with pytest.raises(TrainerError, match="needs a rollout_func"):
        SFTOnToolOutputsGRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[env_reward], args=args,
                                    train_dataset=Dataset.from_list(echo_rows(2)), tool_output_sft=ToolOutputSFT(alpha=0.1))


