"""A short supervised warm-up on tool-calling conversations (loss on the assistant's tokens only).

GRPO learns from differences between samples; a policy that never emits a parseable tool call
earns the same reward on every sample and learns nothing. A few steps of SFT on a handful of
worked conversations (with texts other than the training tasks') make the format possible, and
GRPO takes it from there. `tiny_model` uses it to teach the tiny test model; the demo uses it
with `--warmup-steps` for SmolLM2-135M.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = ["assistant_labels", "sft_warmup"]


def assistant_labels(
    tokenizer: Any, messages: Sequence[dict[str, Any]], *, tools: list[Any] | None = None
) -> tuple[list[int], list[int]]:
    """`(input_ids, labels)` of a conversation: labels are the ids on assistant messages, -100 elsewhere.

    Each message's tokens are the difference of two renders (the template is prefix-preserving).
    """
    ids: list[int] = []
    labels: list[int] = []
    for k in range(1, len(messages) + 1):
        full = tokenizer.apply_chat_template(list(messages[:k]), tools=tools, tokenize=True, return_dict=False)
        new = full[len(ids) :]
        ids = list(full)
        labels += new if messages[k - 1]["role"] == "assistant" else [-100] * len(new)
    return ids, labels


def sft_warmup(
    model: Any,
    tokenizer: Any,
    examples: Sequence[tuple[list[int], list[int]]],
    *,
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 8,
    seed: int = 0,
) -> list[float]:
    """`steps` AdamW steps on random batches of `(input_ids, labels)`; returns the losses.

    The model is left in eval mode.
    """
    import torch

    rng = random.Random(seed)
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(steps):
        batch = rng.sample(list(examples), min(batch_size, len(examples)))
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, lab) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, : len(lab)] = torch.tensor(lab)
            mask[row, : len(ids)] = 1
        loss = model(input_ids=input_ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    return losses
