"""Helpers the tests use to read token sequences: runs of a mask, and logprobs from a forward pass."""

from __future__ import annotations

from typing import Any

import torch


def mask_runs(mask: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of 1s."""
    runs, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


def forward_logprobs(model: Any, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    """log p(completion[i] | prompt + completion[:i]) from one forward pass at `temperature`."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return logits.log_softmax(-1)[torch.arange(len(completion)), torch.tensor(completion)]
