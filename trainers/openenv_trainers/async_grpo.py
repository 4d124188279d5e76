"""TRL's `AsyncGRPOTrainer` with the sampler-trainer mismatch as a metric, and TRL's importance-sampling correction.

    config = ISAsyncGRPOConfig(..., vllm_importance_sampling_correction=True)   # TRL's defaults
    trainer = ISAsyncGRPOTrainer(model=..., args=config, rollout_worker=EnvRolloutWorker(...), ...)

In TRL's async trainer each sample's `old_log_probs` are the sampler's (vLLM's) logprobs, and
`compute_loss` takes the PPO ratio `exp(trainer - sampler)` against them: the numerical mismatch
between the two engines and the policy's drift since a stale sample was drawn are one number there,
and nothing corrects for either. This subclass keeps TRL's forward and metrics as they are and:

- logs, per step, `logprob_diff/mean` and `logprob_diff/max`: `|trainer - sampler|` over the
  trained tokens (the positions TRL takes the loss over: `token_index >= 0`, i.e. the sampled
  tokens, mask 1). On a sample drawn with the trainer's current weights (staleness 0) this is the
  engines' mismatch alone; on a stale one it includes the drift (`sample/staleness_mean` says how
  many of those there are);
- with `vllm_importance_sampling_correction` (`GRPOConfig`'s option, its defaults: on,
  `sequence_mask`, `clip_max=3.0`), takes the loss as TRL's `GRPOTrainer` defines it: the trainer's
  own logprobs (current weights, no gradient) are the PPO's old policy, and each token's loss is
  multiplied by the importance weight `exp(trainer - sampler)`, per token or sequence, truncated or
  masked (`mismatch.importance_weights`); also logs `sampling/importance_sampling_ratio/{min,mean,max}`
  and `sampling/is_masked_frac`. Off, the loss is TRL's async one, unchanged.

The loss is normalized as TRL's async trainer does (per trained token, over ranks and gradient
accumulation), so the two settings differ only by the weights.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, cast

from .mismatch import IS_MODES, importance_weights, logprob_diff

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

__all__ = ["ISAsyncGRPOConfig", "ISAsyncGRPOTrainer"]


@dataclass
class ISAsyncGRPOConfig(AsyncGRPOConfig):
    """`AsyncGRPOConfig` with `GRPOConfig`'s importance-sampling options (same names, same defaults)."""

    vllm_importance_sampling_correction: bool = field(
        default=True,
        metadata={"help": "Weight each token's loss by the truncated/masked ratio exp(trainer - sampler) (TRL's IS)."},
    )
    vllm_importance_sampling_mode: str = field(
        default="sequence_mask",
        metadata={"help": "token_truncate, token_mask, sequence_truncate or sequence_mask, as in GRPOConfig."},
    )
    vllm_importance_sampling_clip_max: float | None = field(
        default=3.0, metadata={"help": "Upper bound of the ratio (truncate: clipped; mask: zeroed above)."}
    )
    vllm_importance_sampling_clip_min: float | None = field(
        default=None, metadata={"help": "Lower bound of the ratio (truncate: clipped; mask: zeroed below)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vllm_importance_sampling_mode not in IS_MODES:
            raise ValueError(
                f"vllm_importance_sampling_mode must be one of {IS_MODES}; got {self.vllm_importance_sampling_mode!r}"
            )


class ISAsyncGRPOTrainer(AsyncGRPOTrainer):
    """`AsyncGRPOTrainer` that logs the mismatch per step and honours TRL's IS correction (see the module docstring)."""

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        captured: dict[str, Any] = {}

        def forward(**kwargs: Any) -> Any:
            outputs = model(**kwargs)
            captured["outputs"] = outputs
            return outputs

        # TRL's own loss and metrics, from one forward pass that we keep a hold of.
        loss = super().compute_loss(forward, inputs, return_outputs=False, num_items_in_batch=num_items_in_batch)
        outputs = captured["outputs"]
        selected = inputs["token_index"] >= 0
        token_index = inputs["token_index"][selected]
        sampler = inputs["old_log_probs"][selected]
        log_probs = outputs.log_probs.flatten()[token_index]
        metrics = self._metrics["train"]
        total, count, largest = self._reduced_diff(log_probs, sampler)
        metrics["logprob_diff/mean"].append((total, count))
        metrics["logprob_diff/max"].append(largest)
        args = self.args
        if getattr(args, "vllm_importance_sampling_correction", False):
            loss = self._is_loss(outputs, log_probs, sampler, inputs, selected)
        return loss

    def _reduced_diff(self, log_probs: Any, sampler: Any) -> tuple[float, float, float]:
        import torch

        total, count, largest = logprob_diff(log_probs, sampler)
        stats = torch.tensor([total, float(count)], device=log_probs.device)
        stats = self.accelerator.reduce(stats, reduction="sum")
        peak = self.accelerator.gather(torch.tensor([largest], device=log_probs.device)).max()
        return float(stats[0]), float(stats[1]), float(peak)

    def _is_loss(self, outputs: Any, log_probs: Any, sampler: Any, inputs: dict[str, Any], selected: Any) -> Any:
        """TRL `GRPOTrainer`'s per-token loss with the IS weight, normalized as TRL's async trainer normalizes."""
        import torch

        args = cast(ISAsyncGRPOConfig, self.args)  # the IS options are on (compute_loss), so it is ours
        segment_id = inputs["segment_id"][selected]
        weights = importance_weights(
            log_probs,
            sampler,
            segment_id,
            mode=args.vllm_importance_sampling_mode,
            clip_min=args.vllm_importance_sampling_clip_min,
            clip_max=args.vllm_importance_sampling_clip_max,
        )
        advantages = inputs["advantages"][selected]
        coef_1 = torch.exp(log_probs - log_probs.detach())  # old policy = the trainer now: 1, with its gradient
        coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
        per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages) * weights
        world_size = self.accelerator.num_processes
        tokens_per_rank = (inputs["global_n_tokens"][0] / world_size).clamp(min=1.0)
        loss = per_token_loss.sum() / tokens_per_rank.to(torch.float32) / self.current_gradient_accumulation_steps
        if self.aux_loss_enabled:
            loss = loss + self.router_aux_loss_coef * outputs.aux_loss / self.current_gradient_accumulation_steps
        with torch.no_grad():
            metrics = self._metrics["train"]
            if args.vllm_importance_sampling_mode.startswith("sequence") and segment_id.numel():
                count = int(segment_id.max()) + 1  # one weight per sequence, as TRL reports the sequence modes
                per_sequence = torch.zeros(count, dtype=weights.dtype, device=weights.device).scatter_(0, segment_id, weights)
                present = torch.zeros(count, dtype=torch.bool, device=weights.device).scatter_(0, segment_id, True)
                flat = per_sequence[present]
            else:
                flat = weights
            if flat.numel():
                metrics["sampling/importance_sampling_ratio/min"].append(float(flat.min()))
                metrics["sampling/importance_sampling_ratio/mean"].append(float(flat.mean()))
                metrics["sampling/importance_sampling_ratio/max"].append(float(flat.max()))
                metrics["sampling/is_masked_frac"].append((float((flat == 0).sum()), float(flat.numel())))
        return loss
