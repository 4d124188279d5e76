"""Episodes as a Hugging Face `datasets.Dataset` (for SFT warm-ups and offline RL).

One row per graded episode. `messages` is the conversation in OpenAI's shape (an assistant
turn's `tool_calls` carry `arguments` as a JSON string); `tools` is a JSON string (JSON Schemas
differ from tool to tool, which Arrow cannot hold as one struct type: `json.loads` it, e.g. for
`apply_chat_template(tools=...)`; `chat_messages` readies `messages` for it). `tokens` holds each assistant turn's token ids and logprobs
when the policy gave them (empty otherwise).

`datasets` is an optional dependency: `pip install 'openenv-sdk[datasets]'`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._records import EpisodeRecord

__all__ = ["chat_messages", "dataset_rows", "save_dataset"]


def _message(message: dict[str, Any]) -> dict[str, Any]:
    # One struct type for every message (Arrow fills a missing field with None anyway).
    return {
        "role": message.get("role"),
        "content": message.get("content"),
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": message.get("tool_call_id"),
    }


def chat_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A row's `messages` ready for `tokenizer.apply_chat_template`: the fields Arrow filled with
    None dropped, and each tool call's `arguments` decoded to a dict (tool-calling templates such
    as Qwen2.5's render them with `tojson`; a string would be rendered quoted)."""
    out = []
    for message in messages:
        clean = {k: v for k, v in message.items() if v is not None}
        if clean.get("tool_calls"):
            clean["tool_calls"] = [_decoded(call) for call in clean["tool_calls"]]
        else:
            clean.pop("tool_calls", None)
        out.append(clean)
    return out


def _decoded(call: Mapping[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    try:
        function["arguments"] = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        pass  # not JSON (the policy's mistake): kept as the text it was
    return {**{k: v for k, v in call.items() if v is not None}, "function": function}


def dataset_rows(records: Iterable[EpisodeRecord], *, min_reward: float | None = None) -> list[dict[str, Any]]:
    """The rows of the graded episodes (reward at least `min_reward` when given), in order."""
    rows = []
    for r in records:
        if r.error is not None or r.reward is None or (min_reward is not None and r.reward < min_reward):
            continue
        rows.append(
            {
                "key": r.key,
                "task_id": r.task_id,
                "split": r.split,
                "attempt": r.attempt,
                "messages": [_message(m) for m in r.messages],
                "tools": json.dumps(r.tools),
                "reward": r.reward,
                "reward_components": json.dumps(r.reward_components),
                "passed": r.passed,
                "turns": r.turns,
                "tool_calls": r.tool_calls,
                "tokens": [t.model_dump() for t in r.tokens],
                "model": r.model,
                "env": r.env,
            }
        )
    return rows


def _datasets() -> Any:
    try:
        import datasets
    except ImportError as e:
        raise ImportError("a Dataset needs the `datasets` package: pip install 'openenv-sdk[datasets]'") from e
    return datasets


def save_dataset(
    records: Iterable[EpisodeRecord], folder: str | Path, *, min_reward: float | None = None
) -> Any:
    """Write the rows as a `datasets.Dataset` to `folder` (`save_to_disk`); returns the Dataset.

    Raises:
        ImportError: `datasets` is not installed.
    """
    datasets = _datasets()
    rows = dataset_rows(records, min_reward=min_reward)
    features = datasets.Features(
        {
            "key": datasets.Value("string"),
            "task_id": datasets.Value("string"),
            "split": datasets.Value("string"),
            "attempt": datasets.Value("int64"),
            "messages": datasets.List(
                {
                    "role": datasets.Value("string"),
                    "content": datasets.Value("string"),
                    "tool_calls": datasets.List(
                        {
                            "id": datasets.Value("string"),
                            "type": datasets.Value("string"),
                            "function": {"name": datasets.Value("string"), "arguments": datasets.Value("string")},
                        }
                    ),
                    "tool_call_id": datasets.Value("string"),
                }
            ),
            "tools": datasets.Value("string"),
            "reward": datasets.Value("float64"),
            "reward_components": datasets.Value("string"),
            "passed": datasets.Value("bool"),
            "turns": datasets.Value("int64"),
            "tool_calls": datasets.Value("int64"),
            "tokens": datasets.List(
                {
                    "turn": datasets.Value("int64"),
                    "prompt_token_ids": datasets.List(datasets.Value("int64")),
                    "token_ids": datasets.List(datasets.Value("int64")),
                    "logprobs": datasets.List(datasets.Value("float64")),
                }
            ),
            "model": datasets.Value("string"),
            "env": datasets.Value("string"),
        }
    )
    dataset = datasets.Dataset.from_list(rows, features=features)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # the caller has its own progress; tqdm's would garble it
    try:
        dataset.save_to_disk(str(folder))
    finally:
        if bars:
            datasets.enable_progress_bars()
    return dataset
