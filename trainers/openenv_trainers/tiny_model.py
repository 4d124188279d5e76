"""A tiny causal language model built locally, for tests and CPU smoke runs (no model hub).

`build_tiny_model(folder)` trains a byte-level BPE tokenizer with the ChatML and tool-call tokens,
gives it the tool-calling chat template, makes a small Qwen2 model, and (by default) teaches it
the tool-call format with a few hundred SFT steps, so that its sampled episodes actually call
tools and get results back (a random model would almost never produce a parseable call). Both
are saved with `save_pretrained` and load back with `AutoTokenizer`/`AutoModelForCausalLM`.

    python -m openenv_trainers.tiny_model /tmp/tiny-tool-model   # about a minute on a CPU, once
    python -m openenv_trainers.tiny_model --help
"""

from __future__ import annotations

import argparse
import random
import string
from pathlib import Path
from typing import Any

from .chat import tool_call_text, tool_chat_template, use_tool_chat_template

__all__ = [
    "ECHO_TOOL",
    "TOOL_TOKENS",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "echo_conversation",
    "echo_tool_variants",
]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
"""Added as whole tokens (not `special`: decoding keeps them, as in Qwen2.5's tokenizer)."""

ECHO_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Return the message unchanged.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"message": {"description": "the text to echo back.", "title": "Message", "type": "string"}},
            "required": ["message"],
            "type": "object",
        },
    },
}
"""The echo environment's tool exactly as its server's `/schema` lists it (so the prompt the tiny
model is taught with is the prompt it sees in an episode)."""


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 6))) for _ in range(n))


def echo_conversation(text: str, *, system: str = "You are a helpful assistant.") -> list[dict[str, Any]]:
    """A complete echo episode: the request, the tool call, its result, and the final answer."""
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Call the echo tool with the exact text: {text}"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "echo", "arguments": {"message": text}}}]},
        {"role": "tool", "name": "echo", "content": text},
        {"role": "assistant", "content": f"Done: {text}"},
    ]


def build_tiny_tokenizer(*, vocab_size: int = 800, seed: int = 0) -> Any:
    """A byte-level BPE tokenizer trained on rendered tool-calling chats, with the tool chat template.

    `<|im_end|>` is the end-of-turn (eos) token, `<|endoftext|>` the padding token.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [tool_chat_template(), tool_call_text("echo", {"message": "hello world"})]
    corpus += [str(ECHO_TOOL)] * 4
    corpus += [" ".join(f"{m['role']} {m.get('content', '')}" for m in echo_conversation(_words(rng, 3))) for _ in range(400)]
    corpus += [" ".join(str(rng.randint(0, 9999)) for _ in range(20)) for _ in range(50)]

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    from tokenizers import AddedToken

    fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    fast.padding_side = "left"
    return use_tool_chat_template(fast)


def build_tiny_model(
    folder: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    sft_steps: int = 200,
    seed: int = 0,
    progress: bool = False,
) -> Path:
    """Build (or reuse) a tiny tool-calling model in `folder`; returns the folder.

    Args:
        folder: where the tokenizer and model are saved; reused when it already holds them.
        hidden_size: the model's width.
        num_layers: the number of transformer layers.
        sft_steps: steps of supervised training on echo episodes (0 keeps the model random).
        seed: seeds the tokenizer corpus, the weights and the SFT data.
        progress: show a progress bar of the SFT steps on stderr (the build takes about a
            minute on a CPU; a reused folder shows nothing).
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder = Path(folder)
    if (folder / "config.json").is_file() and (folder / "tokenizer_config.json").is_file():
        return folder
    torch.manual_seed(seed)
    tokenizer = build_tiny_tokenizer(seed=seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    if sft_steps:
        _teach_tool_calls(model, tokenizer, steps=sft_steps, seed=seed, progress=progress)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def echo_tool_variants() -> list[dict[str, Any]]:
    """The echo tool as each adapter renders it: the server's `/schema` (the rollout function and
    the worker), and the schema `transformers` derives from the generated method (`environment_factory`)."""
    from transformers.utils import get_json_schema

    from .trl_env import EnvironmentFactory

    method = EnvironmentFactory.tool_method("echo", ECHO_TOOL["function"]["description"], ECHO_TOOL["function"]["parameters"])
    return [ECHO_TOOL, get_json_schema(method)]


def _teach_tool_calls(model: Any, tokenizer: Any, *, steps: int, seed: int, batch_size: int = 8, progress: bool = False) -> None:
    """A few hundred steps of SFT on echo episodes (both renderings of the tool): loss on the assistant turns only."""
    from contextlib import nullcontext

    from ._progress import step_progress
    from .warmup import assistant_labels, sft_warmup

    rng = random.Random(seed)
    variants = echo_tool_variants()
    examples = [
        assistant_labels(tokenizer, echo_conversation(_words(rng, rng.randint(1, 2))), tools=[variants[i % len(variants)]])
        for i in range(256)
    ]
    bar = step_progress("building the tiny model: SFT", steps) if progress else nullcontext(None)
    with bar as on_step:
        sft_warmup(model, tokenizer, examples, steps=steps, lr=3e-3, batch_size=batch_size, seed=seed, on_step=on_step)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m openenv_trainers.tiny_model",
        description="Build the tiny tool-calling test model (tokenizer and Qwen2 weights) into a folder; "
        "a folder that already holds one is reused. Prints the folder.",
    )
    parser.add_argument("folder", nargs="?", default="tiny-tool-model", help="where to save it (default: %(default)s)")
    parser.add_argument("--sft-steps", type=int, default=200, help="SFT steps teaching the tool-call format; 0: random weights")
    parser.add_argument("--hidden-size", type=int, default=64, help="the model's width")
    parser.add_argument("--num-layers", type=int, default=2, help="transformer layers")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.sft_steps < 0:
        build_parser().error(f"--sft-steps must be 0 or more, got {args.sft_steps}")
    folder = build_tiny_model(args.folder, hidden_size=args.hidden_size, num_layers=args.num_layers,
                              sft_steps=args.sft_steps, seed=args.seed, progress=True)
    print(folder)


if __name__ == "__main__":
    main()
