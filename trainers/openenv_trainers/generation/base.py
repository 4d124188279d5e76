"""The generation contract: a backend samples token ids and reports each sampled token's logprob.

Every backend (`TransformersBackend` in process, `CompletionsClient` for a vLLM or other
OpenAI-compatible `/v1/completions` server) takes prompts as token ids and returns
`Completion`s. Training needs the logprob the sampler actually used: the *processed* logprob,
after temperature (and top-k/top-p), which is what the trainer's forward pass recomputes as
`log_softmax(logits / temperature)`. `check_completion` enforces the contract on every
completion: one finite logprob per sampled token, never a filled-in value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ..errors import GenerationError, LogprobError

__all__ = ["LOGPROBS_MODES", "Completion", "GenerationBackend", "SamplingParams", "check_completion"]

LOGPROBS_MODES = ("processed_logprobs", "raw_logprobs")
"""As vLLM's `--logprobs-mode`: after the sampler's temperature/top-k/top-p, or of the raw logits."""


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """How to sample one completion."""

    max_tokens: int = 256
    """The most tokens to sample."""
    temperature: float = 1.0
    """Sampling temperature; must be positive (training samples, it never decodes greedily)."""
    top_p: float = 1.0
    """Nucleus sampling; 1.0 is off (the trainer's recomputed logprobs know nothing of it)."""
    top_k: int = 0
    """Top-k sampling; 0 is off."""
    stop_token_ids: tuple[int, ...] = ()
    """Tokens that end the turn (sampled, kept in the completion, and trained on)."""
    seed: int | None = None
    """Seeds the sampler for this request; None draws a fresh sample."""
    top_logprobs: int = 0
    """Also return the `top_logprobs` most likely tokens' logprobs at each step (0: none)."""

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be positive (training samples), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be 0 (off) or positive, got {self.top_k}")


@dataclass(frozen=True)
class Completion:
    """One sampled completion: its tokens, each token's logprob, and why sampling stopped."""

    token_ids: list[int]
    """The sampled tokens, the stop token included when sampling stopped on one."""
    logprobs: list[float]
    """`logprobs[i]` is the logprob of `token_ids[i]` under the sampling distribution."""
    finish_reason: Literal["stop", "length"]
    """`stop`: a stop token was sampled (it is the last token); `length`: `max_tokens` was reached."""
    top_logprobs: list[dict[int, float]] | None = field(default=None, compare=False)
    """When asked for (`SamplingParams.top_logprobs`), the most likely tokens' logprobs at each step."""


@runtime_checkable
class GenerationBackend(Protocol):
    """Samples completions of token-id prompts. Implementations are safe to call from several threads."""

    logprobs_mode: str
    """`processed_logprobs` (what training needs) or `raw_logprobs`."""

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt, in order.

        Raises:
            GenerationError: the backend failed; `LogprobError` when logprobs are unusable.
        """
        ...

    async def agenerate(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        """One completion of one prompt; concurrent calls may be batched together."""
        ...


def check_completion(completion: Completion, params: SamplingParams, *, where: str = "the backend") -> Completion:
    """Check that a completion can be trained on; returns it unchanged.

    Raises:
        LogprobError: a logprob is missing, not a finite number, above 0, or the counts differ.
        GenerationError: no tokens, more than `max_tokens`, or a `stop` without a stop token last.
    """
    ids, logprobs = completion.token_ids, completion.logprobs
    if not ids:
        raise GenerationError(f"{where} returned an empty completion (finish_reason={completion.finish_reason!r})")
    if len(ids) > params.max_tokens:
        raise GenerationError(f"{where} returned {len(ids)} tokens; max_tokens was {params.max_tokens}")
    if logprobs is None or len(logprobs) != len(ids):
        got = "none" if logprobs is None else len(logprobs)
        raise LogprobError(f"{where} returned {len(ids)} tokens but {got} logprobs: they must align one to one")
    for i, value in enumerate(logprobs):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise LogprobError(f"{where}: the logprob of token {i} (id {ids[i]}) is {value!r}, not a finite number")
        if value > 1e-4:
            raise LogprobError(f"{where}: the logprob of token {i} (id {ids[i]}) is {value}, above 0")
    if completion.finish_reason == "stop":
        if params.stop_token_ids and ids[-1] not in params.stop_token_ids:
            raise GenerationError(
                f"{where} stopped (finish_reason='stop') on token {ids[-1]}, not a stop token "
                f"{list(params.stop_token_ids)}: the end-of-turn token must be in the completion"
            )
    elif completion.finish_reason != "length":  # `length`: max_tokens, or the server's context, was reached
        raise GenerationError(f"{where}: unknown finish_reason {completion.finish_reason!r}")
    return completion
