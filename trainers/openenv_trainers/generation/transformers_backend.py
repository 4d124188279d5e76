"""`TransformersBackend`: sampling with a transformers model in this process (CPU or GPU, no vLLM).

It batches prompts (left-padded) through `model.generate` and reads each sampled token's logprob
from the scores the sampler used: `processed_logprobs` (after temperature, top-k and top-p,
vLLM's `--logprobs-mode processed_logprobs`) by default, `raw_logprobs` on request. Concurrent
`agenerate` calls are gathered into one batch: a batch closes once no new request has come for
`batch_window_s`, or `max_batch_wait_s` after its first request, or at `max_batch_size` prompts.
The window restarts with each request because the episodes of a step ask for their next turn
one after the other, as each finishes its accounting and tool calls: a window counted from the
first request closed on a few of them and split the step's turns into many small batches, each
paying a whole `model.generate` (docs/benchmarks.md).

The model object is used as is: when it is the trainer's model, every batch samples from the
current weights (no weight sync needed).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import GenerationError
from .base import LOGPROBS_MODES, Completion, SamplingParams, check_completion

__all__ = ["TransformersBackend"]


class TransformersBackend:
    """Samples from a transformers causal LM; safe to share between threads and event loops.

    Example:
        >>> backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)  # doctest: +SKIP
        >>> [completion] = backend.generate([prompt_ids], SamplingParams(max_tokens=32))
    """

    def __init__(
        self,
        model: Any,
        *,
        pad_token_id: int,
        logprobs_mode: str = "processed_logprobs",
        batch_window_s: float = 0.005,
        max_batch_wait_s: float = 0.25,
        max_batch_size: int = 64,
    ) -> None:
        """Wrap a model; nothing runs until the first request.

        Args:
            model: a transformers causal LM (its device is used for inputs).
            pad_token_id: the token that left-pads prompts in a batch.
            logprobs_mode: `processed_logprobs` (after temperature/top-k/top-p) or `raw_logprobs`.
            batch_window_s: a batch closes when no request has come for this long, in seconds.
            max_batch_wait_s: the longest a request waits for its batch to close, in seconds.
            max_batch_size: the most prompts in one `model.generate` call.
        """
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
        if batch_window_s < 0 or max_batch_wait_s < batch_window_s or max_batch_size < 1:
            raise ValueError(
                "batch_window_s must be >= 0, max_batch_wait_s >= batch_window_s and max_batch_size >= 1, got "
                f"{batch_window_s}, {max_batch_wait_s}, {max_batch_size}"
            )
        self.model = model
        self.pad_token_id = pad_token_id
        self.logprobs_mode = logprobs_mode
        self.batch_window_s = batch_window_s
        self.max_batch_wait_s = max_batch_wait_s
        self.max_batch_size = max_batch_size
        self._lock = threading.Lock()
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = weakref.WeakKeyDictionary()

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt (batched `max_batch_size` at a time)."""
        out: list[Completion] = []
        for start in range(0, len(prompts), self.max_batch_size):
            out += self._generate_batch(prompts[start : start + self.max_batch_size], params)
        return out

    async def agenerate(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        """One completion; requests made within `batch_window_s` of each other share a batch."""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self)
        return await batcher.submit(list(prompt), params)

    def _generate_batch(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        import torch
        from transformers import GenerationConfig

        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise GenerationError("a prompt is empty: generation needs at least one prompt token")
        stop = list(params.stop_token_ids)
        config = GenerationConfig(
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,  # 0 is off (None would mean the default, 50)
            min_p=None,
            repetition_penalty=None,
            max_new_tokens=params.max_tokens,
            eos_token_id=stop or None,
            pad_token_id=self.pad_token_id,
            output_scores=True,
            output_logits=True,
            return_dict_in_generate=True,
        )
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention[row, width - len(prompt) :] = 1
        with self._lock, torch.no_grad():
            if params.seed is not None:
                torch.manual_seed(params.seed)
            try:
                output = self.model.generate(
                    input_ids=input_ids.to(device), attention_mask=attention.to(device), generation_config=config
                )
            except Exception as e:
                raise GenerationError(f"model.generate failed: {type(e).__name__}: {e}") from e
        steps = output.scores if self.logprobs_mode == "processed_logprobs" else output.logits
        new_tokens = output.sequences[:, width:].cpu()
        step_logprobs = torch.stack([s.float() for s in steps], dim=1).log_softmax(dim=-1).cpu()  # (B, T, V)
        completions = []
        for row in range(len(prompts)):
            ids = new_tokens[row].tolist()
            end = next((i + 1 for i, t in enumerate(ids) if t in stop), None)
            finish: Literal["stop", "length"] = "stop" if end is not None else "length"
            ids = ids[: end if end is not None else params.max_tokens]
            chosen = step_logprobs[row, torch.arange(len(ids)), torch.tensor(ids, dtype=torch.long)].tolist()
            top = None
            if params.top_logprobs:
                values, indices = step_logprobs[row, : len(ids)].topk(params.top_logprobs, dim=-1)
                top = [dict(zip(i.tolist(), v.tolist(), strict=True)) for i, v in zip(indices, values, strict=True)]
            completion = Completion(token_ids=ids, logprobs=chosen, finish_reason=finish, top_logprobs=top)
            completions.append(check_completion(completion, params, where="TransformersBackend"))
        return completions


class _Batcher:
    """Gathers the `agenerate` calls of one event loop into batches (one per distinct SamplingParams).

    While a batch is generating, the next one keeps gathering past its window (its requests would
    wait for the model anyway) and closes the moment the model is free.
    """

    def __init__(self, backend: TransformersBackend) -> None:
        self.backend = backend
        self.pending: dict[SamplingParams, list[tuple[list[int], asyncio.Future[Completion]]]] = {}
        self.first_at: float | None = None  # loop time of the open batch's first request
        self.timer: asyncio.TimerHandle | None = None
        self.generating: asyncio.Task[None] | None = None  # the batch on the model now
        self.due = False  # the open batch's window has passed while the model was busy

    async def submit(self, prompt: list[int], params: SamplingParams) -> Completion:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Completion] = loop.create_future()
        self.pending.setdefault(params, []).append((prompt, future))
        now = loop.time()
        if self.first_at is None:
            self.first_at = now
        if self.timer is not None:
            self.timer.cancel()
        if sum(len(items) for items in self.pending.values()) >= self.backend.max_batch_size:
            delay = 0.0
        else:
            delay = min(self.backend.batch_window_s, self.first_at + self.backend.max_batch_wait_s - now)
        self.timer = loop.call_later(max(delay, 0.0), self._close)
        return await future

    def _close(self) -> None:
        self.timer = None
        if self.generating is not None:
            self.due = True
            return
        pending, self.pending, self.first_at, self.due = self.pending, {}, None, False
        self.generating = asyncio.get_running_loop().create_task(self._generate(pending))

    async def _generate(self, pending: dict[SamplingParams, list[tuple[list[int], asyncio.Future[Completion]]]]) -> None:
        try:
            for params, items in pending.items():
                live = [(p, f) for p, f in items if not f.done()]
                if not live:
                    continue
                try:
                    results = await asyncio.to_thread(self.backend.generate, [p for p, _ in live], params)
                except BaseException as e:
                    for _, future in live:
                        if not future.done():
                            future.set_exception(e)
                    continue
                for (_, future), result in zip(live, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self.generating = None
            if self.due and self.pending:
                if self.timer is not None:
                    self.timer.cancel()
                self._close()
