"""Multi-turn token accounting: one conversation as the exact token sequence the policy saw.

A `TokenLedger` starts from the rendered prompt and only ever *appends*:

- the tokens the policy sampled, exactly as sampled (mask 1, with their logprobs), the
  end-of-turn token included;
- the tokens the environment contributes between two turns (mask 0): the chat template's
  rendering of the tool results and of the next generation prompt, computed as the difference
  of two renders of the real conversation (`render(history + results, add_generation_prompt)`
  minus `render(history)`, cut after the sampled end-of-turn token, as TRL's
  `_get_tool_suffix_ids` does).

Nothing already in the ledger is ever re-rendered or re-tokenized, so each generation prompt is
the ledger itself, and training sees the very tokens that were sampled from, whatever the
template does to older turns. What the difference needs is a *prefix-preserving* template
(appending messages never changes how earlier ones render); for templates that are not (Qwen3
drops old reasoning, for instance), `training_chat_template` gives TRL's prefix-preserving
training variant, and `add_messages` checks the property every turn and raises
`AccountingError` where it fails rather than train on a misaligned sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .errors import AccountingError

__all__ = ["TokenLedger", "training_chat_template"]


def training_chat_template(tokenizer: Any) -> str | None:
    """The chat template multi-turn accounting should use: None (the tokenizer's own) when it is
    prefix-preserving, else TRL's prefix-preserving training variant of it.

    Raises:
        AccountingError: the template is not prefix-preserving and TRL has no variant of it.
    """
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_prefix_preserving,
    )

    if is_chat_template_prefix_preserving(tokenizer):
        return None
    try:
        return str(get_training_chat_template(tokenizer))
    except ValueError as e:
        raise AccountingError(
            f"the chat template is not prefix-preserving and TRL has no training variant of it ({e}); give a "
            f"prefix-preserving template (e.g. openenv_trainers.chat.use_tool_chat_template)"
        ) from e


class TokenLedger:
    """The token record of one conversation: `ids`, `mask` (1 on sampled tokens) and `logprobs`.

    `logprobs[i]` is the sampling logprob of `ids[i]` where `mask[i] == 1`, and NaN elsewhere
    (prompt and environment tokens have none; NaN makes any use of them visible).
    """

    def __init__(
        self,
        tokenizer: Any,
        messages: Sequence[dict[str, Any]],
        *,
        tools: list[Any] | None = None,
        chat_template: str | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        end_of_turn_ids: Sequence[int] | None = None,
    ) -> None:
        """Render the prompt (with the generation prompt) as the ledger's first tokens.

        Args:
            tokenizer: the policy's tokenizer, with a chat template.
            messages: the prompt messages.
            tools: tool schemas (or callables) rendered into the prompt.
            chat_template: a template to use instead of the tokenizer's (see `training_chat_template`).
            chat_template_kwargs: extra arguments for `apply_chat_template`.
            end_of_turn_ids: the tokens that end an assistant turn; default the tokenizer's eos.
        """
        self.tokenizer = tokenizer
        self.tools = tools or None
        self.chat_template = chat_template
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.end_of_turn_ids = tuple(end_of_turn_ids) if end_of_turn_ids is not None else (tokenizer.eos_token_id,)
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self.prompt_ids: list[int] = self._render(self.messages, add_generation_prompt=True)
        self.ids: list[int] = list(self.prompt_ids)
        self.mask: list[int] = [0] * len(self.ids)
        self.logprobs: list[float] = [math.nan] * len(self.ids)
        self._open_turn = True  # the ledger ends with a generation prompt

    @property
    def completion_length(self) -> int:
        """Tokens after the prompt (sampled and environment)."""
        return len(self.ids) - len(self.prompt_ids)

    @property
    def completion_ids(self) -> list[int]:
        return self.ids[len(self.prompt_ids) :]

    @property
    def completion_mask(self) -> list[int]:
        return self.mask[len(self.prompt_ids) :]

    @property
    def completion_logprobs(self) -> list[float]:
        return self.logprobs[len(self.prompt_ids) :]

    @property
    def sampled_count(self) -> int:
        return sum(self.mask)

    def add_sampled(self, token_ids: Sequence[int], logprobs: Sequence[float], message: dict[str, Any]) -> None:
        """Append one sampled assistant turn exactly as sampled, and its parsed message.

        Raises:
            AccountingError: no turn is open (the last turn has not been answered), or the
                counts of tokens and logprobs differ.
        """
        if not self._open_turn:
            raise AccountingError("add_sampled() needs an open turn: call add_messages() with the tool results first")
        if len(token_ids) != len(logprobs) or not token_ids:
            raise AccountingError(f"{len(token_ids)} sampled tokens with {len(logprobs)} logprobs")
        self.ids += list(token_ids)
        self.mask += [1] * len(token_ids)
        self.logprobs += [float(x) for x in logprobs]
        self.messages.append(dict(message))
        self._open_turn = False

    def add_messages(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Append the environment's messages (tool results) and the next generation prompt.

        The last sampled turn must have ended with an end-of-turn token.

        Returns:
            The tokens appended (mask 0).

        Raises:
            AccountingError: the last turn did not end with an end-of-turn token, or the chat
                template rendered the history differently once the messages were appended.
        """
        if self._open_turn:
            raise AccountingError("add_messages() follows a sampled turn: call add_sampled() first")
        if self.ids[-1] not in self.end_of_turn_ids:
            raise AccountingError(
                "the last sampled turn did not end with an end-of-turn token (it was truncated): nothing can follow it"
            )
        before = self._render(self.messages, add_generation_prompt=False)
        after = self._render([*self.messages, *messages], add_generation_prompt=True)
        if after[: len(before)] != before:
            at = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b) if any(
                a != b for a, b in zip(before, after, strict=False)
            ) else min(len(before), len(after))
            raise AccountingError(
                f"the chat template is not prefix-preserving: appending {len(messages)} message(s) changed the "
                f"rendered history at token {at} ({self.tokenizer.decode(before[max(0, at - 8) : at + 8])!r} became "
                f"{self.tokenizer.decode(after[max(0, at - 8) : at + 8])!r}); use training_chat_template()"
            )
        ends = [i for i, t in enumerate(before) if t in self.end_of_turn_ids]
        if not ends:
            raise AccountingError("the rendered history has no end-of-turn token after the assistant's turn")
        added = before[ends[-1] + 1 :] + after[len(before) :]
        self.ids += added
        self.mask += [0] * len(added)
        self.logprobs += [math.nan] * len(added)
        self.messages += [dict(m) for m in messages]
        self._open_turn = True
        return added

    def _render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=True,
            return_dict=False,
            **self.chat_template_kwargs,
        )
        if ids and isinstance(ids[0], list):  # processors answer batched
            ids = ids[0]
        return list(ids)
