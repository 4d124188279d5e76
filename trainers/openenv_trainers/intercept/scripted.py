"""A scripted policy: a generation backend whose turns are written in advance, as tokens.

Tests and examples drive real agent programs through the interception server without a model:
`ScriptedBackend` answers each prompt (token ids) with the text a script chooses, tokenized
and ended with the end-of-turn token, with a logprob per token, exactly as a sampler would
return it. Every completion is kept (`produced`), so a test can check that the rows the
trainer records hold the very tokens the policy produced.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..generation.base import Completion, SamplingParams

__all__ = ["ScriptedBackend", "assistant_turn"]

Script = Callable[[str], str]
"""The conversation so far (the prompt, decoded) -> the next assistant turn's text."""


def assistant_turn(content: str = "", calls: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> str:
    """An assistant turn as the tool chat template (ChatML, `<tool_call>` blocks) renders it."""
    blocks = [
        f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(dict(arguments))}}}\n</tool_call>'
        for name, arguments in calls
    ]
    return "\n".join([content, *blocks] if content else blocks)


class ScriptedBackend:
    """A `GenerationBackend` that says what its script says (see the module docstring)."""

    logprobs_mode = "processed_logprobs"

    def __init__(self, tokenizer: Any, script: Script | Sequence[str]) -> None:
        """Args:
        tokenizer: the policy's tokenizer (its eos token ends every turn).
        script: a function of the decoded prompt, or the turns in order (the last one repeats).
        """
        self.tokenizer = tokenizer
        self._script = script
        self.prompts: list[list[int]] = []
        self.produced: list[list[int]] = []
        """Every completion's token ids, in order."""
        self.produced_logprobs: list[list[float]] = []

    def _text(self, prompt: Sequence[int]) -> str:
        if callable(self._script):
            return self._script(self.tokenizer.decode(list(prompt), skip_special_tokens=False))
        turns = list(self._script)
        return turns[min(len(self.produced), len(turns) - 1)]

    def _one(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        ids = [*self.tokenizer.encode(self._text(prompt), add_special_tokens=False), self.tokenizer.eos_token_id]
        finish = "stop"
        if len(ids) > params.max_tokens:
            ids, finish = ids[: params.max_tokens], "length"
        # Distinct, plausible logprobs, so a misplaced one shows in a comparison.
        logprobs = [-0.05 - ((len(self.produced) * 31 + i * 7) % 17) / 10 for i in range(len(ids))]
        self.prompts.append(list(prompt))
        self.produced.append(ids)
        self.produced_logprobs.append(logprobs)
        return Completion(ids, logprobs, finish)  # type: ignore[arg-type]

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        return [self._one(p, params) for p in prompts]

    async def agenerate(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        await asyncio.sleep(0)
        return self._one(prompt, params)
