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

from .tokens import mask_runs

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


# --- tool-output bodies --------------------------------------------------------------------------

TWO_CALLS = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"type": "function", "id": "call-1", "function": {"name": "echo", "arguments": {"message": "a b"}}},
        {"type": "function", "id": "call-2", "function": {"name": "grep", "arguments": {"pattern": "x"}}},
    ],
}



def _two_step_ledger(tokenizer: Any) -> TokenLedger:
    """Two tool steps: two results at once (named by `tool_call_id` and by `name`), then one unnamed."""
    ledger = TokenLedger(tokenizer, echo_messages("a b"), tools=[ECHO_TOOL])
    first = _ids(tokenizer, tool_call_text("echo", {"message": "a b"}) + "<|im_end|>")
    ledger.add_sampled(first, [-0.5] * len(first), TWO_CALLS)
    ledger.add_messages(
        [
            # Bodies that look like scaffolding must not confuse the location of the real scaffolding.
            {"role": "tool", "tool_call_id": "call-2", "content": "user\n<tool_response>\n x"},
            {"role": "tool", "name": "echo", "content": "a b"},
        ]
    )
    second = _ids(tokenizer, tool_call_text("echo", {"message": "c"}) + "<|im_end|>")
    ledger.add_sampled(second, [-0.5] * len(second), CALL)
    ledger.add_messages([{"role": "tool", "tool_call_id": "unknown", "content": "line 1\n  line 2\n"}])
    return ledger


def test_the_tool_output_mask_is_exactly_the_bodies_of_tool_messages(tokenizer: Any) -> None:
    ledger = _two_step_ledger(tokenizer)
    mask = ledger.tool_output_mask()
    assert len(mask) == len(ledger.ids) == len(ledger.tool_output_names)
    assert [tokenizer.decode(ledger.ids[s:e]) for s, e in mask_runs(mask)] == ["user\n<tool_response>\n x", "a b", "line 1\n  line 2\n"]
    # Every other environment token is scaffolding, and the prompt and sampled tokens are never marked.
    scaffold = tokenizer.decode([t for t, m, s in zip(ledger.ids, mask, ledger.mask, strict=True) if not m and not s][-40:])
    assert "<tool_response>\n" in scaffold and "<|im_start|>assistant\n" in scaffold
    assert not any(m and s for m, s in zip(mask, ledger.mask, strict=True))
    assert not any(ledger.tool_output_mask()[: len(ledger.prompt_ids)])
    assert ledger.completion_tool_output_mask() == mask[len(ledger.prompt_ids) :]
    assert ledger.unlocated_tool_outputs == 0


def test_tool_names_come_from_name_or_the_answered_tool_call_and_filter_the_mask(tokenizer: Any) -> None:
    ledger = _two_step_ledger(tokenizer)
    runs = mask_runs(ledger.tool_output_mask())
    assert [set(ledger.tool_output_names[s:e]) for s, e in runs] == [{"grep"}, {"echo"}, {""}]
    assert mask_runs(ledger.tool_output_mask(["echo"])) == [runs[1]]
    assert mask_runs(ledger.tool_output_mask({"grep", ""})) == [runs[0], runs[2]]
    assert ledger.tool_output_mask(["nothing"]) == [0] * len(ledger.ids)
    names = ledger.completion_tool_output_names
    assert ledger.completion_tool_output_mask(["grep"]) == [int(n == "grep") for n in names]
    with pytest.raises(TypeError, match=r"use \('echo',\)"):
        ledger.tool_output_mask("echo")


def test_a_template_that_rewrites_tool_outputs_gives_no_mask_with_a_warning(tokenizer: Any) -> None:
    rewriting = copy.deepcopy(tokenizer)
    template = rewriting.chat_template
    assert template.count("{{- message.content }}\n        {{- '\\n</tool_response>' }}") == 1
    rewriting.chat_template = template.replace(
        "{{- message.content }}\n        {{- '\\n</tool_response>' }}", "{{- message.content | replace('a', '@') }}\n        {{- '\\n</tool_response>' }}"
    )
    ledger = TokenLedger(rewriting, echo_messages("a b"), tools=[ECHO_TOOL])
    first = _ids(rewriting, tool_call_text("echo", {"message": "a b"}) + "<|im_end|>")
    ledger.add_sampled(first, [-0.5] * len(first), CALL)
    with pytest.warns(RuntimeWarning, match="does not write tool message contents verbatim"):
        added = ledger.add_messages([RESULT])
    assert "@ b" in rewriting.decode(added)  # the sequence is the template's, as always
    assert ledger.tool_output_mask() == [0] * len(ledger.ids)
    assert ledger.unlocated_tool_outputs == 1
    assert ledger.mask.count(1) == len(first)


class _Processor:
    """A processor-like wrapper whose tokenizer tokenizes text differently from the template's tokens."""

    def __init__(self, tokenizer: Any) -> None:
        self._inner = tokenizer
        self.eos_token_id = tokenizer.eos_token_id

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.apply_chat_template(*args, **kwargs)

    def decode(self, ids: Any) -> str:
        return self._inner.decode(ids)

    def tokenizer(self, text: str, **kwargs: Any) -> dict[str, Any]:
        encoded = self._inner(text, **kwargs)
        return {"input_ids": [t + 1 for t in encoded["input_ids"]], "offset_mapping": encoded["offset_mapping"]}


def test_a_tokenizer_that_disagrees_with_the_template_gives_no_mask_with_a_warning(tokenizer: Any) -> None:
    ledger = TokenLedger(_Processor(tokenizer), echo_messages("a b"), tools=[ECHO_TOOL])
    first = _ids(tokenizer, tool_call_text("echo", {"message": "a b"}) + "<|im_end|>")
    ledger.add_sampled(first, [-0.5] * len(first), CALL)
    with pytest.warns(RuntimeWarning, match="tokenizing the rendered text does not give the tokens"):
        ledger.add_messages([RESULT])
    assert ledger.tool_output_mask() == [0] * len(ledger.ids)
    assert ledger.unlocated_tool_outputs == 1


def test_a_template_that_trims_tool_outputs_still_gives_their_bodies(tokenizer: Any) -> None:
    trimming = copy.deepcopy(tokenizer)
    trimming.chat_template = trimming.chat_template.replace(
        "{{- message.content }}\n        {{- '\\n</tool_response>' }}", "{{- message.content | trim }}\n        {{- '\\n</tool_response>' }}"
    )
    ledger = TokenLedger(trimming, echo_messages("a b"), tools=[ECHO_TOOL])
    first = _ids(trimming, tool_call_text("echo", {"message": "a b"}) + "<|im_end|>")
    ledger.add_sampled(first, [-0.5] * len(first), CALL)
    ledger.add_messages([{"role": "tool", "name": "echo", "content": "  a b\n"}])
    assert [trimming.decode(ledger.ids[s:e]) for s, e in mask_runs(ledger.tool_output_mask())] == ["a b"]
