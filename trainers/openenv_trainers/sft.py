"""Supervised training on tool outputs beside the RL loss (the ECHO objective's auxiliary term).

The tokens an environment sends back (a file's content, a compiler's error, a test's output) are
not the policy's to choose, so the RL loss masks them out. They are still good supervised
targets: predicting them teaches the model how its environment behaves. This module adds, beside
the RL loss, a cross-entropy term on the *body* tokens of tool outputs (`TokenLedger`'s
`tool_output_mask`, which leaves out the chat template's scaffolding):

    loss = rl_loss + tool_output_sft_loss(per_token_logps, tool_output_mask, ToolOutputSFT(alpha=0.05))

with `tool_output_sft_loss = -alpha * sum(logp * mask) / n`. The term is deliberately plain:

- it is computed from the same forward pass's logprobs as the RL loss, and never goes through
  the importance ratio, the clipping or the KL penalty: those belong to the RL loss, whose mask
  (`env_mask`, 1 on sampled tokens only) already excludes every tool-output token;
- it is normalized once, by its own count `n` (`ToolOutputSFT.normalization`), not per rollout
  *and* again by the RL loss's batch normalizer;
- nothing masks it with `torch.where(mask, zeros, x)`, which would cut its gradient: the gradient
  on a tool-output token is exactly `alpha / n` times the plain cross-entropy gradient, and 0
  when `alpha` is 0.

`SFTOnToolOutputsGRPOTrainer` wires it into TRL's `GRPOTrainer` with a `rollout_func` that returns
a `tool_output_mask` column (`EnvRolloutFunc` does); other trainers add `tool_output_sft_loss` to
their own loss (see docs/trainers/sft-tool-outputs.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from trl import GRPOConfig, GRPOTrainer

from .errors import TrainerError

__all__ = ["SFTOnToolOutputsGRPOTrainer", "ToolOutputSFT", "tool_output_sft_loss"]

_NORMALIZATIONS = ("tool_tokens", "all_tokens")


@dataclass(frozen=True, kw_only=True)
class ToolOutputSFT:
    """The supervised term on tool outputs: on or off, which tools, how it is normalized."""

    alpha: float = 0.0
    """The weight of the term; 0 turns it off (the loss is then the RL loss exactly). Keep it
    small (0.01 to 0.1): the aim is a policy that knows its environment, not one that prefers
    predicting outputs to acting."""
    tool_names: tuple[str, ...] | None = None
    """The tools whose outputs are trained on; None trains on every tool's output. A tool message
    whose tool cannot be named (no `name`, no matching `tool_call_id`) has the name ""."""
    normalization: Literal["tool_tokens", "all_tokens"] = "tool_tokens"
    """What the summed log-likelihood of the tool-output tokens is divided by.

    - `"tool_tokens"`: the number of tool-output tokens in the batch, so the term is `alpha`
      times the plain mean cross-entropy over them, whatever their number (each batch with tool
      outputs gets the same total supervised weight).
    - `"all_tokens"`: the number of tokens that carry any loss in the batch (the RL loss's tokens
      plus the tool-output tokens), as ECHO does: a tool-output token then weighs `alpha` times
      what a sampled token weighs under a token-level RL loss, and the term grows with the share
      of the batch that tool outputs take.
    """

    def __post_init__(self) -> None:
        if not (isinstance(self.alpha, int | float) and math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0 (0 turns the term off), got {self.alpha!r}")
        if isinstance(self.tool_names, str):
            raise TypeError(f"tool_names is a tuple of names, not one string: use ({self.tool_names!r},)")
        if self.tool_names is not None:
            names = tuple(self.tool_names)
            if not names:
                raise ValueError("tool_names is empty, so nothing would be trained on: give None for every tool")
            object.__setattr__(self, "tool_names", names)
        if self.normalization not in _NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {_NORMALIZATIONS}, got {self.normalization!r}")

    @property
    def enabled(self) -> bool:
        """Whether the term is on (`alpha > 0`)."""
        return self.alpha > 0


def tool_output_sft_loss(
    per_token_logps: torch.Tensor,
    tool_output_mask: torch.Tensor,
    config: ToolOutputSFT,
    *,
    loss_mask: torch.Tensor | None = None,
    normalizer: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """The supervised term on tool outputs, to add to an RL loss: `-alpha * sum(logp * mask) / n`.

    Its gradient on a tool-output token is `alpha / n` times the plain cross-entropy gradient, 0
    elsewhere, and exactly 0 everywhere when `alpha` is 0 or the mask is empty (the value is then
    0, still attached to the graph).

    Args:
        per_token_logps: the policy's log-probability of each token, from the forward pass the RL
            loss uses (`(B, T)`, with its graph).
        tool_output_mask: 1 on the tool-output body tokens to train on, 0 elsewhere (padding
            included), the shape of `per_token_logps`.
        config: alpha, and the normalization; the tool selection is already in the mask.
        loss_mask: the RL loss's mask (1 on sampled tokens). Needed by the `"all_tokens"`
            normalization; when given, it is also checked to exclude every tool-output token.
        normalizer: `n`, overriding the count `config.normalization` takes from this batch (for
            a count over several micro-batches or processes, as `SFTOnToolOutputsGRPOTrainer` uses).

    Returns:
        A scalar tensor.

    Raises:
        ValueError: the shapes differ, `"all_tokens"` has no `loss_mask`, or the RL loss mask
            covers tool-output tokens (they would go through its ratio, clipping and KL).
    """
    if tool_output_mask.shape != per_token_logps.shape:
        raise ValueError(f"tool_output_mask has shape {tuple(tool_output_mask.shape)}, the logps {tuple(per_token_logps.shape)}")
    if loss_mask is not None:
        if loss_mask.shape != per_token_logps.shape:
            raise ValueError(f"loss_mask has shape {tuple(loss_mask.shape)}, the logps {tuple(per_token_logps.shape)}")
        if bool((loss_mask.bool() & tool_output_mask.bool()).any()):
            raise ValueError(
                "the RL loss mask covers tool-output tokens: they would go through the importance ratio, clipping "
                "and KL; mask them out of the RL loss (env_mask = 0 on environment tokens)"
            )
    if normalizer is None:
        normalizer = _batch_count(tool_output_mask, config, loss_mask)
    mask = tool_output_mask.to(per_token_logps.dtype)
    # A product, not torch.where(mask, 0, logp): the gradient must reach logp where mask is 1.
    return -config.alpha * (per_token_logps * mask).sum() / normalizer


def _batch_count(tool_output_mask: torch.Tensor, config: ToolOutputSFT, loss_mask: torch.Tensor | None) -> torch.Tensor:
    if config.normalization == "tool_tokens":
        count = tool_output_mask.bool().sum()
    elif loss_mask is None:
        raise ValueError('the "all_tokens" normalization needs loss_mask (the RL loss\'s mask)')
    else:
        count = (tool_output_mask.bool() | loss_mask.bool()).sum()
    return count.clamp(min=1).float()  # no tokens: the sum is 0 too, and the term 0


class SFTOnToolOutputsGRPOTrainer(GRPOTrainer):
    """TRL's `GRPOTrainer` with the supervised term on tool outputs added to its loss.

    The `rollout_func` must return a `tool_output_mask` column (and `tool_output_names` when
    `tool_names` is set), parallel to `completion_ids`: `EnvRolloutFunc` does. The columns are
    taken out of the reward functions' inputs, padded like the completions, and multiplied by the
    completion mask (padding, truncated completions). The term reuses the per-token logprobs of
    the RL loss's own forward pass (no second forward); the RL loss is TRL's, unchanged, and
    already excludes tool outputs (`env_mask` is 0 there). The term is normalized over the whole
    generation batch and rescaled to one accumulation window as TRL does for its token-level
    losses, so that one optimizer step gets `alpha` times the mean cross-entropy over its
    tool-output tokens (`"tool_tokens"`), or their summed cross-entropy over its loss tokens
    (`"all_tokens"`).

    Logged: `sft/tool_nll` (the mean negative log-likelihood of the tool-output tokens, logged
    whenever the column is there, even with `alpha` 0, to watch it) and `sft/tool_tokens` (their
    number per micro-batch).

    Note: TRL's logprobs are those of the temperature-scaled logits (`GRPOConfig.temperature`),
    so with a temperature other than 1 the term is the cross-entropy of that distribution.

    Example:
        >>> rollouts = EnvRolloutFunc(EnvSource(env_dir="environments/echo"), rubric=grader)  # doctest: +SKIP
        >>> trainer = SFTOnToolOutputsGRPOTrainer(model, reward_funcs=[env_reward], rollout_func=rollouts,
        ...     args=args, train_dataset=rows, tool_output_sft=ToolOutputSFT(alpha=0.05))
    """

    args: GRPOConfig  # what it is given (transformers' Trainer annotates its base, TrainingArguments)

    def __init__(self, *args: Any, tool_output_sft: ToolOutputSFT | None = None, **kwargs: Any) -> None:
        """Args and keyword arguments are `GRPOTrainer`'s, plus:

        Args:
            tool_output_sft: the supervised term; default off (then only the metrics are added).

        Raises:
            TrainerError: the term is on and there is no `rollout_func` to give the mask.
        """
        self.tool_output_sft = tool_output_sft if tool_output_sft is not None else ToolOutputSFT()
        self._pending_tool_output_mask: list[list[int]] | None = None
        self._capturing_logps = False
        self._captured_logps: torch.Tensor | None = None
        super().__init__(*args, **kwargs)
        if self.tool_output_sft.enabled and self.rollout_func is None:
            raise TrainerError(
                "SFT on tool outputs needs a rollout_func that returns a tool_output_mask column (EnvRolloutFunc does)"
            )

    # --- the mask: from the rollout_func's output to the loss inputs ---------------------------

    def _generate(self, prompts: list[Any]) -> Any:
        (prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, tool_images) = (
            super()._generate(prompts)
        )
        masks = extra_fields.pop("tool_output_mask", None)
        names = extra_fields.pop("tool_output_names", None)
        self._pending_tool_output_mask = (
            None if masks is None else _select_tools(masks, names, self.tool_output_sft.tool_names, completion_ids)
        )
        return prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, tool_images

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._pending_tool_output_mask = None
        output = super()._generate_and_score_completions(inputs)
        rows, self._pending_tool_output_mask = self._pending_tool_output_mask, None
        if rows is None:
            if self.tool_output_sft.enabled:
                raise TrainerError(
                    "SFT on tool outputs is on but the rollout_func returned no tool_output_mask column "
                    "(EnvRolloutFunc returns one)"
                )
            return output
        completion_mask = output["completion_mask"]
        mask = torch.zeros_like(completion_mask)
        for i, row in enumerate(rows):
            mask[i, : len(row)] = torch.tensor(row, dtype=mask.dtype)
        mask = mask * completion_mask  # padding, and completions TRL masks out (truncated)
        output["tool_output_mask"] = mask
        # Over the whole generation batch and every process, as TRL's `num_items_in_batch`.
        output["num_tool_output_tokens"] = self.accelerator.gather(mask.sum()).sum()
        return output

    # --- the loss ------------------------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._capturing_logps:  # the policy's forward inside _compute_loss: its only call there
            self._captured_logps = result[0]
            self._capturing_logps = False
        return result

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        mask = inputs.get("tool_output_mask")
        if mask is None:
            return super()._compute_loss(model, inputs)
        self._capturing_logps, self._captured_logps = True, None
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._capturing_logps = False
        per_token_logps, self._captured_logps = self._captured_logps, None
        if per_token_logps is None:
            raise TrainerError("GRPOTrainer._compute_loss computed no per-token logprobs (a TRL version this does not support)")
        mode = "train" if self.model.training else "eval"
        self._log_tool_outputs(per_token_logps.detach(), mask, mode)
        if not self.tool_output_sft.enabled:
            return loss
        return loss + tool_output_sft_loss(per_token_logps, mask, self.tool_output_sft, normalizer=self._sft_normalizer(inputs, mode))

    def _sft_normalizer(self, inputs: dict[str, Any], mode: str) -> torch.Tensor:
        count = inputs["num_tool_output_tokens"]
        if self.tool_output_sft.normalization == "all_tokens":
            count = count + inputs["num_items_in_batch"]  # the RL loss's tokens: disjoint from tool outputs
        # The counts span the generation batch on every process: rescale them to one accumulation
        # window of one process, as TRL does for its token-level losses (DDP averages over processes).
        normalizer = count.clamp(min=1).float() / self.accelerator.num_processes
        if mode == "train":
            normalizer = normalizer * self.current_gradient_accumulation_steps / self.args.steps_per_generation
        return normalizer

    def _log_tool_outputs(self, per_token_logps: torch.Tensor, mask: torch.Tensor, mode: str) -> None:
        weights = mask.to(per_token_logps.dtype)
        local = torch.stack([-(per_token_logps * weights).sum(), weights.sum()])
        nll, count = self.accelerator.reduce(local, reduction="sum").tolist()
        self._metrics[mode]["sft/tool_tokens"].append(count)
        if count > 0:  # no tool output in this micro-batch: no NLL to average in
            self._metrics[mode]["sft/tool_nll"].append(nll / count)


def _select_tools(
    masks: Sequence[Sequence[int]],
    names: Sequence[Sequence[str | None]] | None,
    tool_names: tuple[str, ...] | None,
    completion_ids: Sequence[Sequence[int]],
) -> list[list[int]]:
    """The rollout's tool-output masks, limited to `tool_names`, checked against the completions.

    Raises:
        TrainerError: a mask (or its names) is not parallel to its completion, or `tool_names` is
            set and the rollout gave no `tool_output_names`.
    """
    if len(masks) != len(completion_ids):
        raise TrainerError(f"the rollout_func returned {len(masks)} tool_output_mask rows for {len(completion_ids)} completions")
    if tool_names is not None and names is None:
        raise TrainerError("tool_names is set but the rollout_func returned no tool_output_names column")
    rows = []
    for i, (mask, ids) in enumerate(zip(masks, completion_ids, strict=True)):
        if len(mask) != len(ids):
            raise TrainerError(f"tool_output_mask row {i} has {len(mask)} values for {len(ids)} completion tokens")
        row = [int(bool(m)) for m in mask]
        if tool_names is not None and names is not None:
            if len(names[i]) != len(ids):
                raise TrainerError(f"tool_output_names row {i} has {len(names[i])} values for {len(ids)} completion tokens")
            row = [m if name in tool_names else 0 for m, name in zip(row, names[i], strict=True)]
        rows.append(row)
    return rows
