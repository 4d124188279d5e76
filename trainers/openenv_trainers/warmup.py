"""A short supervised warm-up on tool-calling conversations (loss on the policy's own tokens only).

GRPO learns from differences between samples; a policy that never emits a parseable tool call
earns the same reward on every sample and learns nothing. A few dozen steps of SFT on worked
conversations (an environment's oracle episodes from `openenv collect`, or made-up ones) make the
format possible, and GRPO takes it from there. `tiny_model` uses it to teach the tiny test model;
`train_env` runs it on an environment's collected oracle episodes; the demo uses it with
`--warmup-steps` for SmolLM2-135M.

The labels are exactly the tokens a policy samples in an episode: each assistant turn's tokens
after the generation prompt (`<|im_start|>assistant\\n`), up to and including its end-of-turn
token. The chat scaffolding around a turn (its header, the newline after the end-of-turn token)
is the template's, never sampled, and is masked like the prompt and the tool results.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["assistant_labels", "sft_warmup"]


def _render(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: list[Any] | None, *, generation_prompt: bool
) -> list[int]:
    ids = tokenizer.apply_chat_template(
        list(messages), tools=tools, tokenize=True, return_dict=False, add_generation_prompt=generation_prompt
    )
    return list(ids)


def assistant_labels(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], *, tools: list[Any] | None = None
) -> tuple[list[int], list[int]]:
    """`(input_ids, labels)` of a conversation: labels are the ids a policy samples (each assistant
    turn after its generation prompt, end-of-turn token included), -100 elsewhere.

    Each turn's tokens are the difference of two renders (the template must be prefix-preserving,
    as the tool-calling template is: `chat.use_tool_chat_template` checks it).

    Raises:
        ValueError: a render does not extend the previous one (the template is not
            prefix-preserving for this conversation).
    """
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    labels: list[int] = []
    for k, message in enumerate(messages, start=1):
        if message["role"] == "assistant":
            head = _render(tokenizer, messages[: k - 1], tools, generation_prompt=True)
            _check_prefix(ids, head, k)
            labels += [-100] * (len(head) - len(ids))
            ids = head
        full = _render(tokenizer, messages[:k], tools, generation_prompt=False)
        _check_prefix(ids, full, k)
        new = full[len(ids) :]
        if message["role"] == "assistant":
            # What the policy samples ends with the end-of-turn token; what follows is scaffolding.
            cut = new.index(eos) + 1 if eos in new else len(new)
            labels += new[:cut] + [-100] * (len(new) - cut)
        else:
            labels += [-100] * len(new)
        ids = full
    return ids, labels


def _check_prefix(ids: list[int], longer: list[int], k: int) -> None:
    if longer[: len(ids)] != ids:
        raise ValueError(
            f"the chat template re-renders the conversation before message {k}: it is not prefix-preserving "
            "(use chat.use_tool_chat_template, or accounting.training_chat_template for Qwen3-style templates)"
        )


def sft_warmup(
    model: Any,
    tokenizer: Any,
    examples: Sequence[tuple[list[int], list[int]]],
    *,
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 8,
    seed: int = 0,
    max_grad_norm: float | None = None,
    lr_decay: bool = False,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """`steps` AdamW steps on random batches of `(input_ids, labels)`; returns the losses.

    Args:
        model: a causal LM (its parameters' device is used); left in eval mode.
        tokenizer: gives the padding id.
        examples: `(input_ids, labels)` pairs, as `assistant_labels` makes them.
        steps: optimizer steps.
        lr: the learning rate. 3e-3 suits the tiny test model; a pretrained model such as
            SmolLM2-135M wants about 1e-5 to 5e-5.
        batch_size: examples per step (drawn without replacement within a step).
        seed: seeds the batches.
        max_grad_norm: clip the gradients to this norm (a high learning rate on a few examples
            may spike); None does not clip.
        lr_decay: decay the learning rate linearly to 0 over the steps (a short run at a high
            rate then ends on a settled model rather than on its last noisy step).
        on_step: called after each step with (step, loss), for progress.

    Raises:
        ValueError: no examples, or an example with no label to train on.
    """
    import torch

    if not examples:
        raise ValueError("sft_warmup needs at least one example")
    if any(all(t == -100 for t in labels) for _, labels in examples):
        raise ValueError("an example has no assistant token to train on (every label is -100)")
    rng = random.Random(seed)
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / steps if lr_decay else 1.0)
    model.train()
    losses = []
    for step in range(steps):
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
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step + 1, losses[-1])
    model.eval()
    return losses
