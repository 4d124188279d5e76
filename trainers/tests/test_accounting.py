"""Multi-turn token accounting: exact tokens, masks on sampled tokens only, templates that re-render history."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from openenv_trainers.accounting import TokenLedger, training_chat_template
from openenv_trainers.chat import tool_call_text
from openenv_trainers.echo_task import echo_messages
from openenv_trainers.errors import AccountingError
from openenv_trainers.tiny_model import ECHO_TOOL

CALL = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "echo", "arguments": {"message": "a b"}}}]}
RESULT = {"role": "tool", "name": "echo", "content": "a b"}
ANSWER = {"role": "assistant", "content": "Done: a b"}


def _ids(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _qwen3(tokenizer: Any) -> Any:
    import trl

    other = copy.deepcopy(tokenizer)
    other.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return other


def test_two_turns_are_the_templates_rendering_with_mask_1_exactly_on_sampled_tokens(tokenizer: Any) -> None:
    ledger = TokenLedger(tokenizer, echo_messages("a b"), tools=[ECHO_TOOL])
    first = _ids(tokenizer, tool_call_text("echo", {"message": "a b"}) + "<|im_end|>")
    ledger.add_sampled(first, [-0.5] * len(first), CALL)
    added = ledger.add_messages([RESULT])
    second = _ids(tokenizer, "Done: a b<|im_end|>")
    ledger.add_sampled(second, [-0.25] * len(second), ANSWER)

    full = tokenizer.apply_chat_template(
        [*echo_messages("a b"), CALL, RESULT, ANSWER], tools=[ECHO_TOOL], tokenize=True, return_dict=False
    )
    # The ledger is the template's own rendering, up to the sampled end-of-turn token.
    assert ledger.ids == full[: len(ledger.ids)]
    assert tokenizer.decode(full[len(ledger.ids) :]) == "\n"
    assert tokenizer.decode(added) == "\n<|im_start|>user\n<tool_response>\na b\n</tool_response><|im_end|>\n<|im_start|>assistant\n"

    p = len(ledger.prompt_ids)
    expected_mask = [0] * p + [1] * len(first) + [0] * len(added) + [1] * len(second)
    assert ledger.mask == expected_mask
    assert ledger.ids[p + len(first) - 1] == tokenizer.eos_token_id  # the end-of-turn token is sampled: mask 1
    sampled_logprobs = [lp for lp, m in zip(ledger.logprobs, ledger.mask, strict=True) if m]
    assert sampled_logprobs == [-0.5] * len(first) + [-0.25] * len(second)
    assert all(math.isnan(lp) for lp, m in zip(ledger.logprobs, ledger.mask, strict=True) if not m)
    assert ledger.completion_length == len(first) + len(added) + len(second)
    assert ledger.sampled_count == len(first) + len(second)


def test_sampled_tokens_are_kept_even_where_the_template_would_render_them_differently(tokenizer: Any) -> None:
    """What the policy sampled is trained on as sampled; only the environment's part is rendered."""
    ledger = TokenLedger(tokenizer, echo_messages("a b"), tools=[ECHO_TOOL])
    odd = _ids(tokenizer, '<tool_call>\n{"name":"echo","arguments":{"message":"a b"}}\n</tool_call><|im_end|>')
    ledger.add_sampled(odd, [-1.0] * len(odd), CALL)
    ledger.add_messages([RESULT])
    p = len(ledger.prompt_ids)
    assert ledger.ids[p : p + len(odd)] == odd


def test_a_template_that_rewrites_history_is_refused_and_trls_training_variant_works(tokenizer: Any) -> None:
    qwen3 = _qwen3(tokenizer)
    first = _ids(qwen3, tool_call_text("echo", {"message": "a b"}) + "<|im_end|>")

    plain = TokenLedger(qwen3, echo_messages("a b"), tools=[ECHO_TOOL])
    plain.add_sampled(first, [-0.5] * len(first), CALL)
    with pytest.raises(AccountingError, match="not prefix-preserving.*use training_chat_template"):
        plain.add_messages([RESULT])

    template = training_chat_template(qwen3)
    assert template is not None
    fixed = TokenLedger(qwen3, echo_messages("a b"), tools=[ECHO_TOOL], chat_template=template)
    fixed.add_sampled(first, [-0.5] * len(first), CALL)
    added = fixed.add_messages([RESULT])
    assert qwen3.decode(added).endswith("<|im_start|>assistant\n")
    assert fixed.mask.count(1) == len(first)


def test_the_tool_template_needs_no_training_variant(tokenizer: Any) -> None:
    assert training_chat_template(tokenizer) is None


def test_nothing_can_follow_a_truncated_turn(tokenizer: Any) -> None:
    ledger = TokenLedger(tokenizer, echo_messages("a b"), tools=[ECHO_TOOL])
    cut = _ids(tokenizer, "<tool_call>\n{")
    ledger.add_sampled(cut, [-0.1] * len(cut), {"role": "assistant", "content": "<tool_call>\n{"})
    with pytest.raises(AccountingError, match="did not end with an end-of-turn token"):
        ledger.add_messages([RESULT])


def test_turns_alternate(tokenizer: Any) -> None:
    ledger = TokenLedger(tokenizer, echo_messages("a b"), tools=[ECHO_TOOL])
    with pytest.raises(AccountingError, match="follows a sampled turn"):
        ledger.add_messages([RESULT])
    ids = _ids(tokenizer, "hi<|im_end|>")
    ledger.add_sampled(ids, [-1.0] * len(ids), {"role": "assistant", "content": "hi"})
    with pytest.raises(AccountingError, match="needs an open turn"):
        ledger.add_sampled(ids, [-1.0] * len(ids), {"role": "assistant", "content": "hi"})
    with pytest.raises(AccountingError, match="2 sampled tokens with 1 logprobs"):
        TokenLedger(tokenizer, echo_messages("x")).add_sampled([1, 2], [-1.0], {"role": "assistant", "content": ""})
