"""The sampler-trainer mismatch: how far the trainer's logprobs are from the sampler's, and TRL's correction for it.

Every sampled token carries the logprob the sampler (vLLM) drew it with; the trainer computes its
own logprob of the same token in its forward pass. `logprob_diff` is the per-step figure
(`|trainer - sampler|` over the trained tokens: mean and max). `importance_weights` is TRL's
`vllm_importance_sampling_correction` as `GRPOTrainer` defines it (`trl/trainer/grpo_trainer.py`),
token for token: the ratio `exp(trainer - sampler)`, per token or per sequence (the sum of its
tokens' differences), truncated to `[clip_min, clip_max]` (`*_truncate`) or zeroed outside it
(`*_mask`); a token without a sampler logprob (NaN) counts as no difference.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["IS_MODES", "importance_weights", "logprob_diff"]

IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
"""TRL's `vllm_importance_sampling_mode` values."""


def logprob_diff(trainer_logps: Any, sampler_logps: Any) -> tuple[float, int, float]:
    """`(sum, count, max)` of `|trainer - sampler|` over the tokens where both are known.

    Args:
        trainer_logps: the trainer's logprob of each trained token (a 1-d tensor).
        sampler_logps: the sampler's logprob of the same tokens; NaN where it has none.
    """
    import torch

    delta = (trainer_logps.detach().float() - sampler_logps.float()).abs()
    delta = delta[~torch.isnan(delta)]
    if delta.numel() == 0:
        return 0.0, 0, 0.0
    return float(delta.sum()), int(delta.numel()), float(delta.max())


def importance_weights(
    trainer_logps: Any,
    sampler_logps: Any,
    segment_id: Any,
    *,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> Any:
    """TRL's importance-sampling ratio of each trained token (detached), as `GRPOTrainer` computes it.

    Args:
        trainer_logps: the trainer's logprob of each trained token (1-d).
        sampler_logps: the sampler's logprob of the same tokens (NaN: none).
        segment_id: which sequence each token belongs to (0..n-1), for the sequence modes.
        mode: one of `IS_MODES`.
        clip_min: the lower bound (None: none).
        clip_max: the upper bound (None: none).

    Raises:
        ValueError: an unknown mode.
    """
    import torch

    if mode not in IS_MODES:
        raise ValueError(f"vllm_importance_sampling_mode must be one of {IS_MODES}; got {mode!r}")
    diff = torch.nan_to_num(trainer_logps.detach().float() - sampler_logps.float(), nan=0.0)
    if mode.startswith("sequence"):
        count = int(segment_id.max()) + 1 if segment_id.numel() else 0
        per_sequence = torch.zeros(count, dtype=diff.dtype, device=diff.device).index_add_(0, segment_id, diff)
        diff = per_sequence[segment_id]
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return ratio if clip_min is None and clip_max is None else torch.clamp(ratio, min=clip_min, max=clip_max)
    low = clip_min if clip_min is not None else -math.inf
    high = clip_max if clip_max is not None else math.inf
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
