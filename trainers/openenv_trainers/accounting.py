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
template does to older turns.

Incremental tokenization. The two renders are compared and cut as *text*, and only the new
suffix is tokenized: from the last end-of-turn token of the rendered history (`<|im_end|>`) to
the end of the new generation prompt. A tokenizer splits its added tokens (the end-of-turn
token is one) out of a text before anything else, so the suffix's tokens are exactly those the
whole rendered conversation would have there; each turn then costs a render of the
conversation (Jinja, cheap) and the tokenization of the turn alone, instead of tokenizing the
whole conversation several times (which made the accounting a third of a trainer process's
Python time on a GPU run; issue 23). Where the end-of-turn token is not an added token, or the
suffix does not start with it, the ledger falls back to tokenizing the whole conversation as
before (`incremental=False` forces that; the tests compare both token for token). What the difference needs is a *prefix-preserving* template
(appending messages never changes how earlier ones render); for templates that are not (Qwen3
drops old reasoning, for instance), `training_chat_template` gives TRL's prefix-preserving
training variant, and `add_messages` checks the property every turn and raises
`AccountingError` where it fails rather than train on a misaligned sequence.

Tool outputs. Among the environment tokens, the *body* of each tool message (its content text,
not the template's scaffolding around it such as `<|im_start|>user\n<tool_response>\n`) is
marked with the tool's name, for the optional supervised term on tool outputs (`sft`):
`tool_output_mask(tool_names)` is 1 on those tokens. The bodies are found by rendering the same
conversation as text, once as it is and once with each tool message's content replaced by a
marker: the text between the markers is the scaffolding, so each body's character span is known
exactly; the text is then tokenized with character offsets, and a token is a body token when its
span lies inside a body's span. This relies on two things, both checked: the template writes the
content verbatim (or stripped of surrounding whitespace), and tokenizing the rendered text gives
the very tokens the template rendered. Where either fails, that step's tool outputs get no body
tokens (they are simply not trained on), a `RuntimeWarning` says why, and
`unlocated_tool_outputs` counts such steps: the RL accounting itself is never affected.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection, Mapping, Sequence
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
    `tool_output_names[i]` is the name of the tool whose output body `ids[i]` belongs to, and
    None on every other token (see `tool_output_mask`).
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
        incremental: bool = True,
    ) -> None:
        """Render the prompt (with the generation prompt) as the ledger's first tokens.

        Args:
            tokenizer: the policy's tokenizer, with a chat template.
            messages: the prompt messages.
            tools: tool schemas (or callables) rendered into the prompt.
            chat_template: a template to use instead of the tokenizer's (see `training_chat_template`).
            chat_template_kwargs: extra arguments for `apply_chat_template`.
            end_of_turn_ids: the tokens that end an assistant turn; default the tokenizer's eos.
            incremental: tokenize only each turn's new suffix (see the module docstring); False
                re-tokenizes the whole conversation every turn (the reference the tests compare with).
        """
        self.tokenizer = tokenizer
        self.tools = tools or None
        self.chat_template = chat_template
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.end_of_turn_ids = tuple(end_of_turn_ids) if end_of_turn_ids is not None else (tokenizer.eos_token_id,)
        self._end_of_turn_texts = _added_token_texts(tokenizer, self.end_of_turn_ids) if incremental else None
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self.prompt_ids: list[int] = self._render(self.messages, add_generation_prompt=True)
        self.ids: list[int] = list(self.prompt_ids)
        self.mask: list[int] = [0] * len(self.ids)
        self.logprobs: list[float] = [math.nan] * len(self.ids)
        self.tool_output_names: list[str | None] = [None] * len(self.ids)
        self.unlocated_tool_outputs = 0
        """Steps whose tool-output bodies could not be located (they have no tool-output tokens)."""
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
    def completion_tool_output_names(self) -> list[str | None]:
        return self.tool_output_names[len(self.prompt_ids) :]

    @property
    def sampled_count(self) -> int:
        return sum(self.mask)

    def tool_output_mask(self, tool_names: Collection[str] | None = None) -> list[int]:
        """1 on the tool-output body tokens of the named tools, 0 elsewhere (parallel to `ids`).

        Args:
            tool_names: the tools whose outputs count; None counts every tool. A tool message
                whose tool cannot be named (no `name`, no matching `tool_call_id`) has the name "".

        Raises:
            TypeError: `tool_names` is a single string (give a collection of names).
        """
        if isinstance(tool_names, str):
            raise TypeError(f"tool_names is a collection of names, not one string: use ({tool_names!r},)")
        if tool_names is None:
            return [int(name is not None) for name in self.tool_output_names]
        wanted = set(tool_names)
        return [int(name is not None and name in wanted) for name in self.tool_output_names]

    def completion_tool_output_mask(self, tool_names: Collection[str] | None = None) -> list[int]:
        """`tool_output_mask` over the completion (parallel to `completion_ids`)."""
        return self.tool_output_mask(tool_names)[len(self.prompt_ids) :]

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
        self.tool_output_names += [None] * len(token_ids)
        self.messages.append(dict(message))
        self._open_turn = False

    def add_messages(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Append the environment's messages (tool results) and the next generation prompt.

        The last sampled turn must have ended with an end-of-turn token. The body tokens of
        each `tool` message are marked with its tool's name (see the module docstring); where
        they cannot be located, a `RuntimeWarning` is issued and none are marked.

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
        new = [dict(m) for m in messages]
        extended = self._extend_incremental(new) if self._end_of_turn_texts else None
        added, names = extended if extended is not None else self._extend_full(new)
        self.ids += added
        self.mask += [0] * len(added)
        self.logprobs += [math.nan] * len(added)
        self.tool_output_names += names
        self.messages += new
        self._open_turn = True
        return added

    def _extend_full(self, messages: list[dict[str, Any]]) -> tuple[list[int], list[str | None]]:
        """The appended tokens and their tool names, from two tokenized renders of the whole conversation."""
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
        first = ends[-1] + 1
        added = after[first:]  # == before[first:] + after[len(before):], as after extends before
        names = self._locate_tool_outputs(messages, after, first=first)
        return added, names

    def _extend_incremental(self, messages: list[dict[str, Any]]) -> tuple[list[int], list[str | None]] | None:
        """The appended tokens and their tool names, tokenizing only the new suffix; None where the
        suffix does not start with the end-of-turn token (the caller then tokenizes the whole)."""
        before = self._render_text(self.messages, add_generation_prompt=False)
        after = self._render_text([*self.messages, *messages])
        if not after.startswith(before):
            at = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after)))
            raise AccountingError(
                f"the chat template is not prefix-preserving: appending {len(messages)} message(s) changed the "
                f"rendered history at character {at} ({before[max(0, at - 24) : at + 24]!r} became "
                f"{after[max(0, at - 24) : at + 24]!r}); use training_chat_template()"
            )
        cut = max(before.rfind(text) for text in self._end_of_turn_texts or ())
        if cut < 0:
            raise AccountingError("the rendered history has no end-of-turn token after the assistant's turn")
        suffix = after[cut:]
        has_tools = any(m.get("role") == "tool" for m in messages)
        tokenizer = getattr(self.tokenizer, "tokenizer", self.tokenizer)  # a processor's tokenizer
        offsets: list[tuple[int, int]] | None = None
        try:
            encoded = tokenizer(suffix, add_special_tokens=False, return_offsets_mapping=has_tools)
            if has_tools:
                offsets = [(cut + a, cut + b) for a, b in encoded["offset_mapping"]]
        except (NotImplementedError, TypeError, ValueError):
            encoded = tokenizer(suffix, add_special_tokens=False)
        ids = list(encoded["input_ids"])
        if not ids or ids[0] not in self.end_of_turn_ids:
            return None
        added = ids[1:]
        names: list[str | None] = [None] * len(added)
        if not has_tools:
            return added, names
        try:
            if offsets is None:
                raise _Unlocated("the tokenizer gives no character offsets")
            _, spans = self._tool_body_spans(messages, text=after)
        except _Unlocated as e:
            self._warn_unlocated(e)
            return added, names
        for k, (start, end) in enumerate(offsets[1:]):
            if end <= start:
                continue
            for body_start, body_end, name in spans:
                if body_start <= start and end <= body_end:
                    names[k] = name
                    break
        return added, names

    def _locate_tool_outputs(self, messages: list[dict[str, Any]], rendered: list[int], *, first: int) -> list[str | None]:
        """The tool name on each body token of `rendered[first:]`, None elsewhere."""
        names: list[str | None] = [None] * (len(rendered) - first)
        if not any(m.get("role") == "tool" for m in messages):
            return names
        try:
            text, spans = self._tool_body_spans(messages)
            offsets = self._offsets(text, rendered)
        except _Unlocated as e:
            self._warn_unlocated(e)
            return names
        for j in range(first, len(rendered)):
            start, end = offsets[j]
            if end <= start:
                continue
            for body_start, body_end, name in spans:
                if body_start <= start and end <= body_end:
                    names[j - first] = name
                    break
        return names

    def _warn_unlocated(self, e: Exception) -> None:
        # Not an AccountingError: the sequence itself is right, only the optional SFT mask is
        # missing for this step, so training goes on without SFT on these outputs.
        self.unlocated_tool_outputs += 1
        warnings.warn(
            f"the tool outputs of this step cannot be located in its tokens ({e}): they get no tool-output mask, "
            f"so no SFT term",
            RuntimeWarning,
            stacklevel=4,
        )

    def _tool_body_spans(self, messages: list[dict[str, Any]], *, text: str | None = None) -> tuple[str, list[tuple[int, int, str]]]:
        """The rendered text of history + `messages` (with the generation prompt), and the
        character span and tool name of each new tool message's body in it.

        Raises:
            _Unlocated: the template does not write each tool message's content verbatim.
        """
        if text is None:
            text = self._render_text([*self.messages, *messages])
        markers: list[str] = []
        marked: list[dict[str, Any]] = []
        bodies: list[str] = []
        names: list[str] = []
        for i, message in enumerate(messages):
            if message.get("role") != "tool":
                marked.append(message)
                continue
            # NUL never occurs in a template's own text, so a marker cannot match scaffolding.
            marker = f"\x00openenv-tool-output-{len(markers)}\x00"
            markers.append(marker)
            marked.append({**message, "content": marker})
            bodies.append(_content_text(message.get("content")))
            names.append(_tool_name(message, [*self.messages, *messages[:i]]))
        template = self._render_text([*self.messages, *marked])
        pieces: list[str] = []
        at = 0
        for marker in markers:
            found = template.find(marker, at)
            if found < 0 or template.count(marker) != 1:
                raise _Unlocated("the chat template does not render each tool message's content once")
            pieces.append(template[at:found])
            at = found + len(marker)
        pieces.append(template[at:])
        # Templates that trim content (as some do) write the stripped text: try both.
        for candidate in (bodies, [b.strip() for b in bodies]):
            spans: list[tuple[int, int, str]] = []
            rebuilt = pieces[0]
            for body, piece, name in zip(candidate, pieces[1:], names, strict=True):
                spans.append((len(rebuilt), len(rebuilt) + len(body), name))
                rebuilt += body + piece
            if rebuilt == text:
                return text, spans
        raise _Unlocated("the chat template does not write tool message contents verbatim")

    def _offsets(self, text: str, rendered: list[int]) -> list[tuple[int, int]]:
        """The character span of each token of `rendered` in `text`.

        Raises:
            _Unlocated: the tokenizer gives no offsets, or tokenizing `text` does not give `rendered`.
        """
        tokenizer = getattr(self.tokenizer, "tokenizer", self.tokenizer)  # a processor's tokenizer
        try:
            encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        except (NotImplementedError, TypeError, ValueError) as e:
            raise _Unlocated(f"the tokenizer gives no character offsets: {e}") from e
        if list(encoded["input_ids"]) != rendered:
            raise _Unlocated("tokenizing the rendered text does not give the tokens the chat template rendered")
        return [tuple(span) for span in encoded["offset_mapping"]]

    def _render_text(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> str:
        text = self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            **self.chat_template_kwargs,
        )
        if isinstance(text, list):  # processors answer batched
            text = text[0]
        return str(text)

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


def _added_token_texts(tokenizer: Any, ids: Sequence[int]) -> tuple[str, ...] | None:
    """The text of each token of `ids` where every one is an added token (split out of any text
    before the rest is tokenized), else None (the ledger then tokenizes whole conversations)."""
    inner = getattr(tokenizer, "tokenizer", tokenizer)
    added = getattr(inner, "added_tokens_decoder", None)
    if not isinstance(added, Mapping) or not ids:
        return None
    texts = []
    for i in ids:
        token = added.get(i)
        content = getattr(token, "content", None)
        if not content:
            return None
        texts.append(str(content))
    return tuple(texts)


class _Unlocated(Exception):
    """The tool-output bodies of one step cannot be located in its tokens (the mask falls back to none)."""


def _content_text(content: Any) -> str:
    """A message content as text: a string, or the text of its content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return "" if content is None else str(content)


def _tool_name(message: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> str:
    """A tool message's tool: its `name`, else the function of the assistant tool call its
    `tool_call_id` answers (the latest such call), else ""."""
    if message.get("name"):
        return str(message["name"])
    call_id = message.get("tool_call_id")
    if call_id is None:
        return ""
    for previous in reversed(history):
        if previous.get("role") != "assistant":
            continue
        for call in previous.get("tool_calls") or []:
            if isinstance(call, Mapping) and call.get("id") == call_id:
                function = call.get("function", call)
                return str(function.get("name", "")) if isinstance(function, Mapping) else ""
    return ""
